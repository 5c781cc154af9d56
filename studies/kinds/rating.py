"""The rating study (Welivita & Pu, 2024): participants rate LLM or human responses to dialogue prompts on the
study's scale; each participant sees one condition only.

Steps: consent → instructions (with worked examples) → the TEQ when asked → the items → done.
Assignment: `items_per_participant` different responses of the condition (sample 0, not flagged), fewest live
assignments first (random among ties), in an order shuffled by the participant's seed, with the study's
attention checks inserted after `after_item` regular items (checks past the end go last).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Avg, Count, IntegerField, Max, Min, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from studies.balancing import fewest_first, live_assignments
from studies.models import Assignment, Condition, Participant, Rating, Response, Study

from .base import StudyKind
from .registry import register

INSTRUCTIONS = Participant.Step.INSTRUCTIONS
TEQ = Participant.Step.TEQ
ITEMS = Participant.Step.ITEMS


def eligible_responses(condition: Condition):
    return Response.objects.filter(condition=condition, sample_index=0).exclude(
        review=Response.Review.FLAGGED
    )


def response_live_counts(*, condition: Condition, now: datetime | None = None) -> dict[int, int]:
    """Live assignments per eligible response id of the condition (zeros included)."""
    now = now or timezone.now()
    study = condition.study
    # No ORDER BY: the models' default ordering would join study and prompt for 2,000 ids nobody sorts.
    counts = dict.fromkeys(eligible_responses(condition).order_by().values_list("id", flat=True), 0)
    # Through the participants of the condition (an index on participant_id finds their few pages each),
    # not through the responses' condition (which joins every assignment of the study to its response).
    # The same rows: a condition's responses are only ever assigned to that condition's participants, and
    # a response id outside `counts` is skipped below anyway.
    rows = (
        Assignment.objects.filter(participant__condition=condition, kind=Assignment.Kind.RESPONSE)
        .filter(live_assignments(study, now))
        .order_by()
        .values("response")
        .annotate(n=Count("id"))
    )
    for row in rows:
        if row["response"] in counts:  # not a response flagged since it was assigned
            counts[row["response"]] = row["n"]
    return counts


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


class RatingKind(StudyKind):
    name = "rating"
    label = "Rating study (rate responses on a scale)"
    step_labels = {
        INSTRUCTIONS: "Instructions",
        TEQ: "Toronto Empathy Questionnaire",
        ITEMS: "Items",
    }
    pages = {
        INSTRUCTIONS: "ratings.views.INSTRUCTIONS_PAGE",
        TEQ: "ratings.views.TEQ_PAGE",
        ITEMS: "ratings.views.ITEMS_PAGE",
    }
    status_columns = [
        ("responses", "responses"),
        ("ratings", "ratings"),
        ("ratings_per_response.min", "min/resp"),
        ("ratings_per_response.max", "max/resp"),
        ("ratings_per_response.mean", "mean/resp"),
    ]
    analysis = "analysis.entries.RATING_ANALYSIS"
    launch_panel = "analysis.launch_power.launch_power_html"
    admin_fieldsets = [
        ("Rating study", {"fields": ["worked_examples", "ask_teq", "scale_question", "scale"]}),
    ]

    def steps(self, study: Study) -> list[str]:
        return [INSTRUCTIONS, *([TEQ] if study.ask_teq else []), ITEMS]

    def conditions_enrollable(self, study: Study, conditions: dict[int, Condition]) -> dict[int, Condition]:
        # A condition with nothing to rate cannot take anyone (one indexed EXISTS per condition).
        return {cid: c for cid, c in conditions.items() if eligible_responses(c).exists()}

    def assignments_create(
        self, participant: Participant, *, rng: random.Random, now: datetime
    ) -> list[Assignment]:
        study = participant.study
        counts = response_live_counts(condition=participant.condition, now=now)
        chosen = fewest_first(counts, rng)[: study.items_per_participant]
        rng.shuffle(chosen)
        checks = list(study.attention_checks.order_by("after_item", "id"))
        pages: list[Assignment] = []

        def add_checks(selected: Iterable) -> None:
            for check in selected:
                pages.append(Assignment(kind=Assignment.Kind.ATTENTION, attention_check=check))

        for index, response_id in enumerate(chosen):
            add_checks(c for c in checks if c.after_item == index)
            pages.append(Assignment(kind=Assignment.Kind.RESPONSE, response_id=response_id))
        add_checks(c for c in checks if c.after_item >= len(chosen))
        for position, page in enumerate(pages):
            page.participant = participant
            page.position = position
        return Assignment.objects.bulk_create(pages)

    def launch_problems(self, study: Study, conditions: list[Condition]) -> list[str]:
        """Every condition has a response (sample 0) for every prompt; none is flagged for review; at least
        items_per_participant prompts. `conditions` carry `with_response` (prompts with a sample-0 response)."""
        problems = []
        prompts = study.prompts.count()
        if prompts < study.items_per_participant:
            problems.append(
                f"the study has {prompts} prompts but each participant rates {study.items_per_participant}: "
                "import a corpus or lower items per participant"
            )
        for condition in conditions:
            missing = prompts - condition.with_response
            if missing:
                problems.append(
                    f"condition '{condition.name}' has no response for {missing} of {prompts} prompts "
                    "(generate or import them)"
                )
        flagged = (
            Response.objects.filter(condition__study=study, review=Response.Review.FLAGGED)
            .values("condition__name")
            .annotate(n=Count("id"))
            .order_by("condition__name")
        )
        for row in flagged:
            problems.append(
                f"condition '{row['condition__name']}' has {row['n']} responses flagged for review: "
                "approve, edit or replace them"
            )
        return problems

    def status_counts(self, study: Study, conditions: list[Condition]) -> dict[int, dict]:
        """Responses, ratings by counted participants, and the spread of ratings per response (min / max /
        mean and how many responses have each count). Five grouped queries."""
        per: dict[int, dict] = {}

        def row_of(cid: int) -> dict:
            return per.setdefault(
                cid,
                {
                    "responses": 0,
                    "ratings": 0,
                    "ratings_per_response": {"min": None, "max": None, "mean": None, "histogram": {}},
                },
            )

        for cid, n in (
            Response.objects.filter(condition__study=study)
            .values("condition")
            .annotate(n=Count("id"))
            .values_list("condition", "n")
        ):
            row_of(cid)["responses"] = n
        for cid, n in (
            Rating.objects.filter(  # answers to attention-check pages are not ratings of responses
                assignment__participant__study=study,
                assignment__participant__is_preview=False,
                assignment__kind=Assignment.Kind.RESPONSE,
            )
            .values("assignment__participant__condition")
            .annotate(n=Count("id"))
            .values_list("assignment__participant__condition", "n")
        ):
            if cid is not None:
                row_of(cid)["ratings"] = n
        per_response = _ratings_per_response(study)
        for row in per_response.values("condition").annotate(min=Min("n"), max=Max("n"), mean=Avg("n")):
            spread = row_of(row["condition"])["ratings_per_response"]
            spread["min"], spread["max"] = row["min"], row["max"]
            spread["mean"] = round(float(row["mean"]), 3) if row["mean"] is not None else None
        for row in (
            per_response.values("condition", "n").annotate(responses=Count("id")).order_by("condition", "n")
        ):
            row_of(row["condition"])["ratings_per_response"]["histogram"][str(row["n"])] = row["responses"]
        for condition in conditions:
            row_of(condition.pk)
        return per

    def status_totals(self, study: Study, per_condition: dict[int, dict]) -> dict:
        return {"ratings": sum(row.get("ratings", 0) for row in per_condition.values())}

    def status_summary(self, study: Study, status: dict) -> list[str]:
        target = study.target_ratings_per_response
        return [
            f"{status['prompts']} prompts",
            f"{study.items_per_participant} items per participant",
            f"target {target} rating{'' if target == 1 else 's'} per response",
        ]


RATING = register(RatingKind())
