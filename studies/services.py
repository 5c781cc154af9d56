"""A study's lifecycle: draft → live ⇄ paused → closed.

Each transition is one conditional UPDATE (``filter(state__in=...).update(...)``), so two admins clicking at
the same time cannot both launch or close a study, and a transition never happens from a state it does not
allow. Launching checks the study can actually be run (the launch gates) and says what is missing.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from .design import CONDITION_HOOKS, design_freeze
from .kinds import kind_named, kind_of
from .kinds.base import CONDITIONS, LAUNCH, MATERIAL, TEXTS, LaunchProblem
from .markdown import template_blanks
from .models import Study
from .platforms import platform_of

State = Study.State


class StudyStateError(Exception):
    """The study is not in a state that allows the transition."""


class StudyLaunchError(Exception):
    """The study cannot be launched; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


class StudyCreateError(Exception):
    """The study cannot be created as asked; nothing was written."""


def study_create(*, slug: str, title: str, kind: str, platform: str) -> Study:
    """A new draft study with the platform's defaults (texts, codes and design are set up afterwards).
    StudyCreateError for a taken slug or an unknown kind."""
    kind_named(kind)  # UnknownStudyKind for a kind nobody registered
    if not slug:
        raise StudyCreateError("give the study a short name (letters, digits, - and _)")
    taken = StudyCreateError(f"a study '{slug}' already exists: choose another short name")
    if Study.objects.filter(slug=slug).exists():
        raise taken
    try:
        with transaction.atomic():
            return Study.objects.create(slug=slug, title=title, kind=kind, platform=platform)
    except IntegrityError:  # the same slug created by someone else between the check and the insert
        raise taken from None


def study_launch_checks(*, study: Study) -> list[LaunchProblem]:
    """Everything that stops ``study`` from being launched, each with the setup step that fixes it (empty: it
    can be launched).

    Every kind: at least one enrolling condition, a consent text and, when participants come from a recruiting
    platform, a completion code (a direct link has no platform to confirm with); then the kind's own
    checks (`StudyKind.launch_problems`: e.g. instructions and responses for every prompt of a rating study, an
    instrument and situations for a questionnaire study). Every problem is listed at once, so a researcher
    fixes them in one pass.
    """
    problems: list[LaunchProblem] = []
    conditions = list(
        study.conditions.annotate(
            with_response=Count("responses__prompt", filter=Q(responses__sample_index=0), distinct=True)
        ).order_by("position", "name")
    )
    if not any(c.enrolling for c in conditions):
        problems.append(
            LaunchProblem(
                CONDITIONS,
                "no condition is enrolling participants: add one or switch one on"
                if conditions
                else "the study has no conditions: import a corpus or add one",
            )
        )
    if not study.consent_text.strip():
        problems.append(LaunchProblem(TEXTS, "the consent text is empty: write what participants agree to"))
    elif blanks := template_blanks(study.consent_text):
        problems.append(
            LaunchProblem(
                TEXTS, f"the consent text still has the template's blanks to fill in: {', '.join(blanks)}"
            )
        )
    if platform_of(study).needs_completion_code and not study.completion_code.strip():
        problems.append(LaunchProblem(LAUNCH, "the completion code is not set"))
    for problem in kind_of(study).launch_problems(study, conditions):
        problems.append(problem if isinstance(problem, LaunchProblem) else LaunchProblem(MATERIAL, problem))
    return problems


def study_launch_problems(*, study: Study) -> list[str]:
    """The texts of `study_launch_checks`: what the launch page and StudyLaunchError list."""
    return [problem.text for problem in study_launch_checks(study=study)]


def study_closed_problem(*, study: Study) -> str | None:
    """Why nothing may be generated or added for `study` (None: it is not closed). A closed study is a finished
    record; new models run against its stored human baseline as a follow-up wave."""
    if study.state != State.CLOSED:
        return None
    return (
        f"Study {study.slug} is closed: it takes no new conditions or responses. Run new models against its "
        f"stored human baseline as a follow-up wave: python manage.py study_extend {study.slug} NEW-SLUG "
        "--condition NAME (admin: the study's “Extend as a wave” button)."
    )


def _transition(*, study: Study, allowed_from: set[str], to: str, verb: str, **fields) -> Study:
    changed = Study.objects.filter(pk=study.pk, state__in=allowed_from).update(state=to, **fields)
    if changed != 1:
        current = Study.objects.filter(pk=study.pk).values_list("state", flat=True).first()
        allowed = " or ".join(sorted(allowed_from))
        raise StudyStateError(f"cannot {verb} study '{study.slug}': it is {current}, not {allowed}")
    study.refresh_from_db(fields=["state", "launched_at", "closed_at"])
    return study


def study_placeholder_conditions(*, study: Study) -> list[str]:
    """The study's conditions whose stimuli are placeholders (the test model's replies), from the apps' condition
    hooks: a study with any launches only as a dry run."""
    return sorted(
        {name for hook in CONDITION_HOOKS.values() if hook.placeholders for name in hook.placeholders(study)}
    )


def study_launch(*, study: Study, dry_run: bool = False) -> Study:
    """Make a draft study live, taking participants. Guarantees: the launch gates passed just before
    (StudyLaunchError lists what fails; a study with placeholder conditions launches only with `dry_run`, the
    researcher's word that it is a dry run), the study moved from draft to live exactly once
    (StudyStateError otherwise), and its design was frozen in the same transaction (studies/design.py)."""
    if study.state != State.DRAFT:
        raise StudyStateError(f"cannot launch study '{study.slug}': it is {study.state}, not draft")
    problems = study_launch_problems(study=study)
    placeholders = study_placeholder_conditions(study=study)
    if placeholders and not dry_run:
        problems.append(
            f"{', '.join(placeholders)} {'answers' if len(placeholders) == 1 else 'answer'} with the test model "
            "(placeholder replies): launch only as a dry run, confirmed on the launch page"
        )
    if problems:
        raise StudyLaunchError(problems)
    with transaction.atomic():
        study = _transition(
            study=study, allowed_from={State.DRAFT}, to=State.LIVE, verb="launch", launched_at=timezone.now()
        )
        design_freeze(study, reason="launch")
    return study


def study_pause(*, study: Study) -> Study:
    """Stop a live study from taking new participants (those already in may finish). live → paused only."""
    return _transition(study=study, allowed_from={State.LIVE}, to=State.PAUSED, verb="pause")


def study_resume(*, study: Study) -> Study:
    """Open a paused study again. paused → live only."""
    return _transition(study=study, allowed_from={State.PAUSED}, to=State.LIVE, verb="resume")


def study_close(*, study: Study) -> Study:
    """End a live or paused study for good; it takes no participants and no answers afterwards."""
    return _transition(
        study=study,
        allowed_from={State.LIVE, State.PAUSED},
        to=State.CLOSED,
        verb="close",
        closed_at=timezone.now(),
    )
