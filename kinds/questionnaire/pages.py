"""The questionnaire kind's participant pages (named by kinds/questionnaire/kind.py, see ratings/flow.py).

Sequence: consent → demographics (when the study asks) → the instrument "as you feel now" (default) → the
assigned situation to imagine → the instrument again (evoked) → done (completion code).

Exactly-once: an instrument page is stored by `questionnaire_submit`, which locks the participant row
(`studies.participants.participant_lock`, like every answer of every kind), checks the
participant is still on that page's step, writes the QuestionnaireRun and its answers, and moves the step on in
the same transaction: the answer protocol every kind goes through (studies/answers.py);
QuestionnaireRun's unique constraint (study, condition, subject, phase, run) backs it. A re-posted page (back
button, double click, second tab) finds its run stored and stores nothing.

Item order: shuffled per participant and phase (seeded by the participant's seed) when the study randomises,
recorded in QuestionnaireRun.item_order with each answer's position. Each instrument page carries one
instructed-response row (an attention check: "choose <label> here"); a wrong answer counts as a failure like
any kind's failed check, and more failures than the study allows flags the participant for exclusion (they still
finish and get the failed-checks code).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from django import forms
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from studies import authenticity
from studies.answers import STALE, NotYourItem, Page, answer_take
from studies.authenticity_picture import picture_context, sound_response
from studies.models import (
    Assignment,
    Instrument,
    Participant,
    QuestionnaireAnswer,
    QuestionnaireRun,
    QuestionnaireSettings,
    Study,
)
from studies.pages import StepPage
from studies.participants import is_on_step, participant_advance, participant_lock, participant_state_copy

from .kind import DEFAULT as STEP_DEFAULT
from .kind import EVOKED as STEP_EVOKED
from .kind import QUESTIONNAIRE, instrument_scale
from .kind import SITUATION as STEP_SITUATION
from .traps import (
    NEITHER,
    PICTURE_FIELD,
    PICTURE_SKIP,
    PICTURE_VIEW,
    Layout,
    QuestionnaireAnswerRejected,
    questionnaire_picture_options,
    traps_layout,
    traps_scored,
)

PHASE_FOR_STEP = {STEP_DEFAULT: QuestionnaireRun.Phase.DEFAULT, STEP_EVOKED: QuestionnaireRun.Phase.EVOKED}
CHECK_FIELD = "check"


def _settings(study: Study) -> QuestionnaireSettings:
    return QUESTIONNAIRE.settings(study)


# --- Services ---------------------------------------------------------------------------------------------


def questionnaire_item_order(*, participant: Participant, phase: str) -> list[int]:
    """The order the participant sees the items in for a phase: the published order, or a seeded shuffle."""
    settings = _settings(participant.study)
    numbers = list(settings.instrument.items.values_list("number", flat=True).order_by("number"))
    if settings.randomise_item_order:
        random.Random(f"{participant.seed}:{phase}").shuffle(numbers)
    return numbers


def questionnaire_check_value(*, participant: Participant, phase: str) -> int:
    """The value the attention-check row asks for on a phase's page (seeded, so a reload asks the same)."""
    instrument = _settings(participant.study).instrument
    return random.Random(f"{participant.seed}:{phase}:check").randint(
        instrument.scale_min, instrument.scale_max
    )


def questionnaire_layout(*, participant: Participant, phase: str) -> Layout:
    """The rows of a phase's page (kinds/questionnaire/traps.py `traps_layout`), the same on every showing."""
    order = questionnaire_item_order(participant=participant, phase=phase)
    return traps_layout(participant=participant, phase=phase, order=order)


def situation_assignment_for(*, participant: Participant) -> Assignment | None:
    return (
        participant.assignments.filter(kind=Assignment.Kind.SITUATION)
        .select_related("situation")
        .order_by("position")
        .first()
    )


def questionnaire_pages(participant: Participant) -> list[Page]:
    """The participant's instrument pages for the answer protocol (studies/answers.py): the default phase's
    (position 0) and the evoked phase's (position 1), each answered once its run is stored, each carrying one
    attention check."""
    done = set(QuestionnaireRun.objects.filter(participant=participant).values_list("phase", flat=True))
    return [
        Page(position, step, PHASE_FOR_STEP[step] in done, check=True)
        for position, step in enumerate(PHASE_FOR_STEP)
    ]


def questionnaire_submit(
    *,
    participant: Participant,
    step: str,
    answers: dict[int, int],
    check_passed: bool,
    traps: dict | None = None,
    now: datetime | None = None,
) -> bool:
    """Store one instrument page (the default or the evoked phase) and move the participant on, through the
    answer protocol every kind goes through (studies/answers.py). True when stored now; False when that page
    was answered before (a re-post: nothing stored).

    Refused, with nothing stored: a page that is not the participant's current one (NotCurrentItem), a
    participant no longer active on its step (ParticipantNotActive), answers that do not fit the instrument
    (QuestionnaireAnswerRejected: every item answered within the instrument's range, and the page's traps as
    its layout has them: `traps` = {"repeat": {item number: value}, "picture": a value or PICTURE_SKIP}). The
    run, its answers, the traps' answers (kept on the run, never among its answers), the attention check's
    outcome (a failure counts like any kind's failed check) and the step change are one transaction; the traps'
    outcomes are scored for authenticity after it (`authenticity.pair_record`, `picture_record`), in the
    signals' transaction if any, as every kind's are."""
    now = now or timezone.now()
    if step not in PHASE_FOR_STEP:
        raise NotYourItem(f"{step!r} is not an instrument page.")
    phase = PHASE_FOR_STEP[step]
    scored: dict = {}
    with transaction.atomic():
        locked = participant_lock(participant)

        def store(page: Page) -> bool:
            instrument: Instrument = _settings(locked.study).instrument
            order = questionnaire_item_order(participant=locked, phase=phase)
            if sorted(answers) != sorted(order):
                raise QuestionnaireAnswerRejected("every item needs one answer")
            if any(not instrument.scale_min <= v <= instrument.scale_max for v in answers.values()):
                raise QuestionnaireAnswerRejected("an answer is outside the scale")
            layout = questionnaire_layout(participant=locked, phase=phase)
            scored.update(traps_scored(locked, instrument, answers, layout, traps or {}))
            situation = None
            if phase == QuestionnaireRun.Phase.EVOKED:
                assignment = situation_assignment_for(participant=locked)
                situation = assignment.situation if assignment else None
                if situation is None:
                    raise QuestionnaireAnswerRejected("no situation was assigned")
            run = QuestionnaireRun.objects.create(
                study=locked.study,
                condition_id=locked.condition_id,
                participant=locked,
                subject_key=f"participant-{locked.pk}",
                phase=phase,
                situation=situation,
                run_index=0,
                item_order=order,
                traps={
                    **({"repeat": {str(n): v for n, v in traps["repeat"].items()}} if layout.repeats else {}),
                    **({"picture": str(traps["picture"])} if layout.picture else {}),
                },
                source=QuestionnaireRun.Source.PARTICIPANT,
                completed_at=now,
            )
            QuestionnaireAnswer.objects.bulk_create(
                [
                    QuestionnaireAnswer(run=run, item_number=number, value=answers[number], position=position)
                    for position, number in enumerate(order, start=1)
                ]
            )
            return not check_passed

        position = list(PHASE_FOR_STEP).index(step)
        taken = answer_take(
            locked, pages=questionnaire_pages(locked), position=position, now=now, store=store
        )
    if taken.created:
        participant_state_copy(participant, locked)
    for row, far in scored.get(
        "far", {}
    ).items():  # after the answer's statements, in the signals' transaction
        authenticity.pair_record(participant=participant, position=row, far=far)
    if "picture" in scored:
        authenticity.picture_record(participant=participant, outcome=scored["picture"])
    return taken.created


def situation_acknowledge(*, participant: Participant, now: datetime | None = None) -> bool:
    """The participant has read and imagined the situation: mark it answered and move on (once)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = participant_lock(participant)
        if not is_on_step(locked, STEP_SITUATION):
            return False
        Assignment.objects.filter(
            participant=locked, kind=Assignment.Kind.SITUATION, answered_at__isnull=True
        ).update(answered_at=now)
        participant_advance(participant=locked, from_step=STEP_SITUATION, now=now)
    participant_state_copy(participant, locked)
    return True


def demographics_submit(*, participant: Participant, data: dict, now: datetime | None = None) -> bool:
    """Store the optional demographics and move on (once)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = participant_lock(participant)
        if not is_on_step(locked, Participant.Step.DEMOGRAPHICS):
            return False
        locked.demographics = {k: v for k, v in data.items() if v not in (None, "")}
        locked.save(update_fields=["demographics"])
        participant_advance(participant=locked, from_step=Participant.Step.DEMOGRAPHICS, now=now)
    participant_state_copy(participant, locked)
    return True


# --- Pages --------------------------------------------------------------------------------------------------


class DemographicsForm(forms.Form):
    gender = forms.ChoiceField(
        required=False,
        choices=[("", "Prefer not to say"), ("female", "Female"), ("male", "Male"), ("other", "Other")],
    )
    year_of_birth = forms.IntegerField(required=False, min_value=1900, max_value=2015, label="Year of birth")
    country = forms.CharField(required=False, max_length=100, label="Country you live in")
    employment = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Prefer not to say"),
            ("employed", "Employed"),
            ("self-employed", "Self-employed"),
            ("student", "Student"),
            ("unemployed", "Not employed"),
            ("retired", "Retired"),
        ],
    )
    education = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Prefer not to say"),
            ("secondary", "Secondary school"),
            ("college", "College or vocational"),
            ("bachelor", "University: bachelor's"),
            ("master", "University: master's"),
            ("doctorate", "Doctorate"),
        ],
    )


@dataclass
class Row:
    field: str
    text: str
    position: int
    selected: int | str | None
    is_check: bool = False
    error: bool = False
    is_repeat: bool = False
    is_picture: bool = False


def _page(request, participant, template, status=200, **context):
    context.update({"study": participant.study, "participant": participant, "step": participant.step})
    return render(request, f"ratings/{template}", context, status=status)


def _fields(layout: Layout) -> list[str]:
    """The form's fields, one a row."""
    names = {"item": "item-{}", "repeat": "repeat-{}", "check": CHECK_FIELD, "picture": PICTURE_FIELD}
    return [names[kind].format(n) for kind, n in layout.rows]


def instrument_get(
    request: HttpRequest, participant: Participant, *, posted=None, status: int = 200, view: str = ""
) -> HttpResponse:
    """The instrument's page; `posted`: the answers of a page sent back (with the rows left unanswered marked,
    unless `view` says the participant only asked to see the picture check as a sound, or the picture again)."""
    instrument = _settings(participant.study).instrument
    phase = PHASE_FOR_STEP[participant.step]
    layout = questionnaire_layout(participant=participant, phase=phase)
    options = questionnaire_picture_options(participant.study) if layout.picture else []
    if layout.picture and request.GET.get("sound") == "wav":
        return sound_response(participant, options)
    texts = dict(instrument.items.values_list("number", "text"))
    scale = instrument_scale(instrument)
    check_value = questionnaire_check_value(participant=participant, phase=phase)
    check_label = dict(scale)[check_value]
    posted = posted or {}
    marking = bool(posted) and not view
    rows = []
    for position, ((kind, n), field) in enumerate(zip(layout.rows, _fields(layout), strict=True), start=1):
        text = {
            "item": texts.get(n, ""),
            "repeat": texts.get(n, ""),
            "check": f"To show you are reading, choose \u201c{check_label}\u201d in this row.",
            "picture": "Answer as the picture asks.",
        }[kind]
        rows.append(
            Row(
                field,
                text,
                position,
                posted.get(field),
                is_check=kind == "check",
                error=marking and field not in posted,
                is_repeat=kind == "repeat",
                is_picture=kind == "picture",
            )
        )
    situation = None
    if phase == QuestionnaireRun.Phase.EVOKED:
        assignment = situation_assignment_for(participant=participant)
        situation = assignment.situation if assignment else None
    sound = view == "sound" or request.GET.get("check") == "sound"
    return _page(
        request,
        participant,
        "questionnaire_instrument.html",
        status=status,
        instrument=instrument,
        rows=rows,
        scale=scale,
        phase=phase,
        situation=situation,
        missing=sum(1 for r in rows if r.error),
        **(
            {
                **picture_context(request, participant, options),
                "sound": sound,
                "picture_choices": [*scale, *([(PICTURE_SKIP, NEITHER)] if sound else [])],
            }
            if layout.picture
            else {}
        ),
    )


def instrument_post(request: HttpRequest, participant: Participant) -> HttpResponse:
    instrument = _settings(participant.study).instrument
    phase = PHASE_FOR_STEP[participant.step]
    layout = questionnaire_layout(participant=participant, phase=phase)
    fields = _fields(layout)
    posted: dict[str, int | str] = {}
    for name in fields:
        raw = request.POST.get(name, "")
        if name == PICTURE_FIELD and raw == PICTURE_SKIP:
            posted[name] = raw
            continue
        try:
            value = int(raw)
        except ValueError:
            continue
        if instrument.scale_min <= value <= instrument.scale_max:
            posted[name] = value
    view = request.POST.get(PICTURE_VIEW, "")
    if layout.picture and view in ("sound", "picture"):
        # "I can't see the picture" (or back to it): the same page with the answers given so far, nothing stored.
        return instrument_get(request, participant, posted=posted, view=view)
    if len(posted) < len(fields):
        return instrument_get(request, participant, posted=posted or {"": 0}, status=400)
    check_passed = posted[CHECK_FIELD] == questionnaire_check_value(participant=participant, phase=phase)
    traps: dict = {"repeat": {n: posted[f"repeat-{n}"] for n in layout.repeats}}
    if layout.picture:
        traps["picture"] = posted[PICTURE_FIELD]
    try:
        questionnaire_submit(
            participant=participant,
            step=participant.step,
            answers={n: posted[f"item-{n}"] for kind, n in layout.rows if kind == "item"},
            check_passed=check_passed,
            traps=traps,
        )
    except QuestionnaireAnswerRejected:
        return instrument_get(request, participant, posted=posted, status=400)
    except STALE:
        pass  # a stale page: nothing stored, show the current step
    return redirect("ratings:step", slug=participant.study.slug)


def situation_get(request: HttpRequest, participant: Participant) -> HttpResponse:
    assignment = situation_assignment_for(participant=participant)
    if assignment is not None and assignment.shown_at is None:
        Assignment.objects.filter(pk=assignment.pk, shown_at__isnull=True).update(shown_at=timezone.now())
    return _page(
        request,
        participant,
        "questionnaire_situation.html",
        situation=assignment.situation if assignment else None,
    )


def situation_post(request: HttpRequest, participant: Participant) -> HttpResponse:
    situation_acknowledge(participant=participant)
    return redirect("ratings:step", slug=participant.study.slug)


def demographics_get(
    request: HttpRequest, participant: Participant, *, form=None, status=200
) -> HttpResponse:
    return _page(
        request,
        participant,
        "questionnaire_demographics.html",
        status=status,
        form=form or DemographicsForm(),
    )


def demographics_post(request: HttpRequest, participant: Participant) -> HttpResponse:
    form = DemographicsForm(request.POST)
    if not form.is_valid():
        return demographics_get(request, participant, form=form, status=400)
    demographics_submit(participant=participant, data=form.cleaned_data)
    return redirect("ratings:step", slug=participant.study.slug)


# The pages named by kinds/questionnaire/kind.py.
DEMOGRAPHICS_PAGE = StepPage(get=demographics_get, post=demographics_post)
INSTRUMENT_PAGE = StepPage(get=instrument_get, post=instrument_post)
SITUATION_PAGE = StepPage(get=situation_get, post=situation_post)
