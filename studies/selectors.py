"""Read-only views of a study, shared by the admin, the terminal and the API."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from .declared_flags import flagged_by_rules
from .design import planned_analysis_of
from .kinds import kind_of
from .kinds.base import resolved
from .models import Assignment, Condition, Participant, ParticipantAuthenticity, Prompt, Study
from .status_tally import status_tallies

STATUSES = [status.value for status in Participant.Status]
# A participant the authenticity score flags, unless a researcher cleared the flag; or confirmed in review
# (`ParticipantAuthenticity.excluded`, set by studies/authenticity.py).
AUTHENTICITY_FLAGGED = Q(authenticity__excluded=True)
# A participant's ratings as every page counts them (from Participant): answers to response pages; answers to
# attention-check pages are checks, not ratings (the analysis reads the same, analysis/selectors.py).
COUNTED_RATINGS = Q(assignments__rating__isnull=False, assignments__kind=Assignment.Kind.RESPONSE)


def study_status(*, study: Study) -> dict[str, Any]:
    """Counts per condition: participants by status (staff previews never counted), those flagged for
    exclusion and those the authenticity score flags (not cleared in review), then the study kind's own numbers (`StudyKind.status_counts`, named by `status_columns`: e.g.
    responses, ratings and ratings per response of a rating study, completed runs of a questionnaire study).

    A fixed number of queries, none reading the study's participants one by one: flat as the study grows.
    """
    kind = kind_of(study)
    conditions = list(study.conditions.order_by("position", "name"))
    participants: dict[int | None, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    flagged: dict[int | None, int] = defaultdict(int)
    # The authenticity score's flags still open or confirmed in review (studies/authenticity.py).
    unauthentic: dict[int | None, int] = defaultdict(int)
    # Running tallies (studies/status_tally.py): the same counts at any size of the study.
    for condition_id, status, is_flagged, is_unauthentic, n in status_tallies(study.pk):
        if is_unauthentic:
            unauthentic[condition_id] += n
            continue
        participants[condition_id][status] += n
        if is_flagged:
            flagged[condition_id] += n
    own = kind.status_counts(study, conditions)

    result_conditions = []
    for condition in conditions:
        by_status = dict(participants[condition.pk])
        result_conditions.append(
            {
                "name": condition.name,
                "label": condition.label,
                "kind": condition.kind,
                "is_baseline": condition.is_baseline,
                "enrolling": condition.enrolling,
                "quota": condition.quota if condition.quota is not None else study.quota_per_condition,
                "participants": by_status,
                "participants_total": sum(by_status.values()),
                "flagged_for_exclusion": flagged[condition.pk],
                "authenticity_flagged": unauthentic[condition.pk],
                **own.get(condition.pk, {}),
            }
        )
    unassigned = dict(participants[None]) if None in participants else dict.fromkeys(STATUSES, 0)
    totals = dict.fromkeys(STATUSES, 0)
    for counts in participants.values():
        for status, n in counts.items():
            totals[status] += n
    status = {
        "study": study.slug,
        "title": study.title,
        "kind": study.kind,
        "state": study.state,
        "prompts": study.prompts.count(),
        "items_per_participant": study.items_per_participant,
        "kind_settings": kind.settings_values(study),
        "columns": [{"key": key, "header": header} for key, header in kind.status_columns],
        "conditions": result_conditions,
        "participants_without_condition": unassigned,
        "totals": {
            "participants": totals,
            "flagged_for_exclusion": sum(flagged.values()),
            "authenticity_flagged": sum(unauthentic.values()),
            **kind.status_totals(study, own),
        },
    }
    status["summary"] = kind.status_summary(study, status)
    status["notices"] = kind.status_notices(study, status) if study.state != Study.State.DRAFT else []
    return status


def status_cell(row: dict, key: str) -> str:
    """One cell of the status table: `key` (dotted for nested numbers) of a condition's row or of the totals,
    as text ("-" when there is no number)."""
    value: Any = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _count_of(model, **filters):
    return Coalesce(
        Subquery(
            model.objects.filter(study=OuterRef("pk"), **filters)
            .order_by()
            .values("study")
            .annotate(n=Count("id"))
            .values("n"),
            output_field=IntegerField(),
        ),
        0,
    )


def study_list_with_counts():
    """Studies annotated with their numbers of conditions, prompts and counted participants (one query;
    subqueries rather than joins, which would multiply the rows)."""
    return Study.objects.annotate(
        n_conditions=_count_of(Condition),
        n_prompts=_count_of(Prompt),
        n_participants=_count_of(Participant, is_preview=False),
    )


def study_design_summary(*, study: Study) -> dict[str, Any] | None:
    """The study's frozen design as reports and exports cite it: the current hash, when and why it was written,
    and every amendment (who, when, why, old → new). None: the design is not frozen yet (a draft)."""
    current = study.designs.order_by("-created_at", "-id").first()
    if current is None:
        return None
    return {
        "sha256": current.sha256,
        "frozen_at": current.created_at.isoformat(),
        "reason": current.reason,
        "versions": study.designs.count(),
        "amendments": [
            {
                "field": a.field,
                "old": a.old_value,
                "new": a.new_value,
                "reason": a.reason,
                "author": a.author,
                "at": a.created_at.isoformat(),
                "sha256_before": a.sha256_before,
                "sha256_after": a.sha256_after,
            }
            for a in study.amendments.order_by("created_at", "id")
        ],
    }


def study_planned_analysis(*, study: Study) -> dict[str, Any]:
    """What the analysis applies: the study's planned analysis (tests, alpha, correction) from its frozen design
    (amendments included) or, for a draft, as it stands; `design_sha256` names the design it comes from (None
    for a draft); `primary_test` and `secondary_tests` ({"key", "name"} each) are the kind's declared tests as
    pre-registered (studies/design.py `analysis_plan_of`), the primary being the one the analysis reports as
    primary."""
    planned, sha256, plan = planned_analysis_of(study)
    declared = (
        {"primary_test": plan.primary._asdict(), "secondary_tests": [t._asdict() for t in plan.secondary]}
        if plan is not None
        else {"primary_test": None, "secondary_tests": []}
    )
    return {**planned, **declared, "design_sha256": sha256}


def participants_exclusion_flags(participants: list[Participant]) -> dict[int, list[str]]:
    """The same for some participants, whatever their studies: one computation per kind among them."""
    by_path: dict[str, dict[int, Study]] = defaultdict(dict)
    for participant in participants:
        path = kind_of(participant.study).exclusion_flags
        if path and not participant.is_preview:
            by_path[path][participant.pk] = participant.study
    out: dict[int, list[str]] = {}
    for path, mine in by_path.items():
        out.update(resolved(path)(participants=mine))
    return out


def study_flagged_participants(*, study: Study) -> list[dict[str, Any]]:
    """The live status page's list: every counted participant whom a declared rule excludes or whom the
    authenticity score flags (whatever the rules say), with their condition, status, ratings of responses
    (attention checks not counted, as everywhere) and flags, by condition then platform id.

    Flat as the study grows: the stored flags of the participants who changed since the last look are computed
    again (studies/declared_flags.py), and the people listed are found by their ids."""
    flags = flagged_by_rules(study)
    unauthentic = ParticipantAuthenticity.objects.filter(participant__study=study, excluded=True).order_by()
    ids = set(flags) | set(unauthentic.values_list("participant_id", flat=True))
    people = (
        Participant.objects.filter(pk__in=ids, is_preview=False)
        .annotate(n_ratings=Count("assignments__rating", filter=COUNTED_RATINGS))
        .annotate(unauthentic=Count("id", filter=AUTHENTICITY_FLAGGED))
        .select_related("condition")
        .order_by("condition__position", "condition__name", "external_id")
    )
    return [
        {
            "pk": p.pk,
            "external_id": p.external_id,
            "condition": p.condition.name if p.condition else "",
            "status": p.get_status_display(),
            "ratings": p.n_ratings,
            "rules": flags.get(p.pk, []),
            "authenticity": bool(p.unauthentic),
        }
        for p in people
    ]
