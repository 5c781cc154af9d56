"""Read-only views of a study, shared by the admin, the terminal and the API."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Avg, Count, IntegerField, Max, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from .models import Assignment, Condition, Participant, Prompt, QuestionnaireRun, Rating, Response, Study

STATUSES = [status.value for status in Participant.Status]


def _ratings_per_response(study: Study):
    """Responses of the study annotated with ``n``: their ratings by counted (non-preview) participants."""
    counted = (
        Rating.objects.filter(assignment__response=OuterRef("pk"), assignment__participant__is_preview=False)
        .order_by()
        .values("assignment__response")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Response.objects.filter(condition__study=study).annotate(
        n=Coalesce(Subquery(counted, output_field=IntegerField()), 0)
    )


def study_status(*, study: Study) -> dict[str, Any]:
    """Counts per condition: responses, participants by status (staff previews never counted), those flagged
    for exclusion, ratings of responses (answers to attention-check pages are not ratings),
    completed questionnaire runs (questionnaire studies; models' runs included), and the spread of ratings
    per response (min / max / mean and how many responses have each count).

    A fixed number of grouped queries, whatever the size of the study.
    """
    conditions = list(study.conditions.order_by("position", "name"))
    responses = dict(
        Response.objects.filter(condition__study=study)
        .values("condition")
        .annotate(n=Count("id"))
        .values_list("condition", "n")
    )
    participants: dict[int | None, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    flagged: dict[int | None, int] = defaultdict(int)
    for row in (
        Participant.objects.filter(study=study, is_preview=False)
        .values("condition", "status")
        .annotate(n=Count("id"), flagged=Count("id", filter=Q(flagged_for_exclusion=True)))
    ):
        participants[row["condition"]][row["status"]] = row["n"]
        flagged[row["condition"]] += row["flagged"]
    ratings = dict(
        Rating.objects.filter(
            assignment__participant__study=study,
            assignment__participant__is_preview=False,
            assignment__kind=Assignment.Kind.RESPONSE,
        )
        .values("assignment__participant__condition")
        .annotate(n=Count("id"))
        .values_list("assignment__participant__condition", "n")
    )
    runs = dict(
        QuestionnaireRun.objects.filter(study=study, completed_at__isnull=False)
        .exclude(participant__is_preview=True)
        .values("condition")
        .annotate(n=Count("id"))
        .values_list("condition", "n")
    )
    per_response = _ratings_per_response(study)
    spread = {
        row["condition"]: row
        for row in per_response.values("condition").annotate(min=Min("n"), max=Max("n"), mean=Avg("n"))
    }
    histogram: dict[int, dict[str, int]] = defaultdict(dict)
    for row in (
        per_response.values("condition", "n").annotate(responses=Count("id")).order_by("condition", "n")
    ):
        histogram[row["condition"]][str(row["n"])] = row["responses"]

    result_conditions = []
    for condition in conditions:
        by_status = dict(participants[condition.pk])
        row = spread.get(condition.pk)
        result_conditions.append(
            {
                "name": condition.name,
                "label": condition.label,
                "kind": condition.kind,
                "is_baseline": condition.is_baseline,
                "enrolling": condition.enrolling,
                "quota": condition.quota if condition.quota is not None else study.quota_per_condition,
                "responses": responses.get(condition.pk, 0),
                "participants": by_status,
                "participants_total": sum(by_status.values()),
                "flagged_for_exclusion": flagged[condition.pk],
                "ratings": ratings.get(condition.pk, 0),
                "questionnaire_runs": runs.get(condition.pk, 0),
                "ratings_per_response": {
                    "min": row["min"] if row else None,
                    "max": row["max"] if row else None,
                    "mean": round(float(row["mean"]), 3) if row and row["mean"] is not None else None,
                    "histogram": histogram.get(condition.pk, {}),
                },
            }
        )
    unassigned = dict(participants[None]) if None in participants else dict.fromkeys(STATUSES, 0)
    totals = dict.fromkeys(STATUSES, 0)
    for counts in participants.values():
        for status, n in counts.items():
            totals[status] += n
    return {
        "study": study.slug,
        "title": study.title,
        "kind": study.kind,
        "state": study.state,
        "prompts": study.prompts.count(),
        "items_per_participant": study.items_per_participant,
        "target_ratings_per_response": study.target_ratings_per_response,
        "conditions": result_conditions,
        "participants_without_condition": unassigned,
        "totals": {
            "participants": totals,
            "flagged_for_exclusion": sum(flagged.values()),
            "ratings": sum(ratings.values()),
        },
    }


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
