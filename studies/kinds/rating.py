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
from functools import cache

from django.db import connection
from django.db.models import Avg, Count, IntegerField, Max, Min, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from studies import rows
from studies.balancing import (
    deal_order_sql,
    deal_start,
    live_sql,
    rules_params,
    tie_break_draws,
    tie_break_key,
)
from studies.models import (
    Assignment,
    AttentionCheck,
    Condition,
    Participant,
    Rating,
    Response,
    ResponseTally,
    Study,
)

from .base import StudyKind
from .registry import register

INSTRUCTIONS = Participant.Step.INSTRUCTIONS
TEQ = Participant.Step.TEQ
ITEMS = Participant.Step.ITEMS
# The columns a new page is written with (the others are NULL until it is shown and answered).
PAGE_FIELDS = ("participant", "position", "kind", "response", "attention_check")


def eligible_responses(condition: Condition):
    return Response.objects.filter(condition=condition, sample_index=0).exclude(
        review=Response.Review.FLAGGED
    )


@cache
def _eligible_sql(vendor: str, r: str = "r") -> str:
    """`eligible_responses` over the response row aliased `r` (its condition compared by the caller): the
    condition of the partial index `response_eligible_by_cond`, so that enrolment reads their ids from it alone."""
    col = lambda name: rows.column(Response, name, r)  # noqa: E731
    return f"{col('sample_index')} = 0 AND {col('review')} <> '{Response.Review.FLAGGED}'"


@cache
def _response_counts_sql(vendor: str) -> str:
    """`SELECT id, n`: the eligible responses of a condition with their live assignments (zeros included).
    Parameters: `_response_counts_params`.

    The responses and their live assignments are one UNION ALL grouped by response id (a response with
    no row of the first part, flagged since it was assigned, is left out by HAVING), not a join: the
    database adds them up in one pass whatever it believes about the tables' sizes. The assignments are
    found through the participants of the condition (an index on participant_id finds their few pages
    each), not through the responses' condition (which joins every assignment of the study to its
    response): the same rows, as a condition's responses are only ever assigned to its participants."""
    a = lambda name: rows.column(Assignment, name, "a")  # noqa: E731
    return (
        f"SELECT x.id AS id, SUM(x.w) AS n FROM ("
        f"SELECT {rows.column(Response, 'id', 'r')} AS id, 0 AS w FROM {rows.table(Response)} r"
        f" WHERE {rows.column(Response, 'condition', 'r')} = %s AND {_eligible_sql(vendor)}"
        f" UNION ALL SELECT {a('response')}, 1 FROM {rows.table(Assignment)} a"
        f" JOIN {rows.table(Participant)} p ON {rows.column(Participant, 'id', 'p')} = {a('participant')}"
        f" WHERE {rows.column(Participant, 'condition', 'p')} = %s"
        f" AND {a('kind')} = '{Assignment.Kind.RESPONSE}' AND {live_sql(vendor)}"
        f") x GROUP BY x.id HAVING MIN(x.w) = 0"
    )


def _response_counts_params(condition: Condition, now: datetime) -> list:
    return [condition.pk, condition.pk, *rules_params(condition.study, now)]


def response_live_counts(*, condition: Condition, now: datetime | None = None) -> dict[int, int]:
    """Live assignments per eligible response id of the condition (zeros included), counted from the pages by
    the balance rule: the figure `ResponseTally` keeps for enrolment. One query."""
    params = _response_counts_params(condition, now or timezone.now())
    return dict(rows.fetchall(_response_counts_sql(connection.vendor), params))


@cache
def _pages_sql(vendor: str) -> str:
    """The study's attention checks (0, id, after_item) and the responses to show (1, id, 0): the
    condition's eligible responses with the fewest live assignments first (their `ResponseTally`, kept by the
    database: see migration 0010), ties in their count's order from the participant's drawn starting point
    (`deal_order_sql`, `deal_start`: the order the enrolment statement reads from its index, migration 0019),
    as many as the study shows. One query, one pass over the condition's responses whatever the study's
    size: the database orders them and returns only the ones chosen. Parameters: `_pages_params`."""
    check = lambda name: rows.column(AttentionCheck, name, "c")  # noqa: E731
    r = lambda name: rows.column(Response, name, "r")  # noqa: E731
    live = rows.column(ResponseTally, "live_assignments", "t")
    order = deal_order_sql(r("id"), f"COALESCE({live}, 0)")
    return (
        f"SELECT 0, {check('id')}, {check('after_item')} FROM {rows.table(AttentionCheck)} c"
        f" WHERE {check('study')} = %s"
        f" UNION ALL SELECT 1, picked.id, 0 FROM (SELECT {r('id')} AS id FROM {rows.table(Response)} r"
        f" LEFT JOIN {rows.table(ResponseTally)} t ON {rows.column(ResponseTally, 'response', 't')} = {r('id')}"
        f" WHERE {r('condition')} = %s AND {_eligible_sql(vendor)}"
        f" ORDER BY COALESCE({live}, 0), ({order}) < %s, {order}, {r('id')} LIMIT %s) picked"
    )


def _pages_params(study: Study, condition: Condition, rng: random.Random) -> list:
    return [study.pk, condition.pk, deal_start(tie_break_draws(rng)), study.items_per_participant]


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


@cache
def _enrollable_sql(vendor: str) -> str:
    """A condition with nothing to rate cannot take anyone: an indexed EXISTS on the condition row `c`."""
    return (
        f"EXISTS (SELECT 1 FROM {rows.table(Response)} r"
        f" WHERE {rows.column(Response, 'condition', 'r')} = {rows.column(Condition, 'id', 'c')}"
        f" AND {_eligible_sql(vendor)})"
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
    analysis_page = "analysis:dashboard"
    launch_panel = "analysis.launch_power.launch_power_html"
    corpus_import = True
    judged = True
    power_planner = "analysis.study_power.rating_power_plan"
    admin_fieldsets = [
        ("Rating study", {"fields": ["worked_examples", "ask_teq", "scale_question", "scale"]}),
    ]

    def steps(self, study: Study) -> list[str]:
        return [INSTRUCTIONS, *([TEQ] if study.ask_teq else []), ITEMS]

    def enrollable_sql(self, vendor: str) -> str:
        return _enrollable_sql(vendor)

    def assignments_create(
        self, participant: Participant, *, rng: random.Random, now: datetime
    ) -> list[Assignment]:
        """Two queries: the attention checks and the chosen responses in one, the pages in one INSERT."""
        study = participant.study
        found = rows.fetchall(_pages_sql(connection.vendor), _pages_params(study, participant.condition, rng))
        # The page order: the participant's third tie-break (studies/balancing.py).
        draws = tie_break_draws(rng)
        chosen = sorted(
            (key for source, key, _ in found if source == 1), key=lambda k: (tie_break_key(k, draws), k)
        )
        checks = sorted((after, key) for source, key, after in found if source == 0)
        pages: list[Assignment] = []

        def add_checks(selected: Iterable[int]) -> None:
            for check_id in selected:
                pages.append(Assignment(kind=Assignment.Kind.ATTENTION, attention_check_id=check_id))

        for index, response_id in enumerate(chosen):
            add_checks(key for after, key in checks if after == index)
            pages.append(Assignment(kind=Assignment.Kind.RESPONSE, response_id=response_id))
        add_checks(key for after, key in checks if after >= len(chosen))
        for position, page in enumerate(pages):
            page.participant = participant
            page.position = position
        return rows.insert_many(Assignment, pages, PAGE_FIELDS)

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
