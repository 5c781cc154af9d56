"""The rating study (Welivita & Pu, 2024): participants rate LLM or human responses to dialogue prompts on the
study's scale; each participant sees one condition only.

Steps: consent → instructions (with worked examples) → the TEQ when asked → the items → done.
Assignment: `items_per_participant` different responses of the condition (sample 0, not flagged), fewest live
assignments first (random among ties), in an order shuffled by the participant's seed, with the study's
attention checks inserted after `after_item` regular items, or after a number drawn per participant from
`after_item` to `after_item_max` when the researcher gave a range (checks past the end go last); the consistency
pairs' second showings last; the picture check (`trap_picture`) where the participant's seed puts it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from studies import authenticity, rows
from studies.balance_counts import live_pages
from studies.balancing import live_assignments, tie_break_draws, tie_break_key
from studies.kinds import register
from studies.kinds.base import (
    CONDITIONS,
    TRAP_FIELDS,
    AnalysisPlan,
    LaunchProblem,
    PlannedTest,
    StudyKind,
    corpus_coverage_problems,
    instructions_problems,
)
from studies.models import (
    RESPONSE_ELIGIBLE,
    Assignment,
    AttentionCheck,
    Condition,
    Participant,
    Response,
    Study,
)

from .models import RatingSettings
from .rating_totals import ratings_per_response

INSTRUCTIONS = Participant.Step.INSTRUCTIONS
TEQ = Participant.Step.TEQ
ITEMS = Participant.Step.ITEMS
# The columns a new page is written with (the others are NULL until it is shown and answered).
PAGE_FIELDS = ("participant", "position", "kind", "response", "attention_check")


def eligible_responses(condition):
    """The responses of `condition` (a Condition, or an OuterRef to one) a participant may be shown
    (`RESPONSE_ELIGIBLE`)."""
    return Response.objects.filter(RESPONSE_ELIGIBLE, condition=condition)


def response_live_counts(*, condition: Condition, now: datetime | None = None) -> dict[int, int]:
    """Live assignments per eligible response id of the condition (zeros included), by the balance rule
    (studies/balancing.py `live_assignments`), counted from the pages (what enrolment's running totals must
    equal). Two queries: the eligible responses (from their index alone),
    and the live pages of the condition's participants counted by response, which reads those participants'
    pages through their own index rather than looking up every response's pages one by one."""
    counts = dict.fromkeys(eligible_responses(condition).order_by().values_list("pk", flat=True), 0)
    pages = (
        Assignment.objects.filter(participant__condition=condition, kind=Assignment.Kind.RESPONSE)
        .filter(live_assignments(condition.study, now or timezone.now()))
        .order_by()
        .values_list("response")
        .annotate(n=Count("pk"))
    )
    for response_id, n in pages:
        if response_id in counts:
            counts[response_id] = n
    return counts


def check_place(after_item: int, after_item_max: int | None, rng: random.Random) -> int:
    """How many regular items come before an attention check for one participant: `after_item` for everyone
    when the researcher set no range; otherwise a number from `after_item` to `after_item_max` (both included),
    drawn from the participant's generator, so a repeat worker cannot learn where the check sits. A place past
    the participant's last item puts the check last."""
    if after_item_max is None or after_item_max <= after_item:
        return after_item
    return rng.randint(after_item, after_item_max)


# The rating kind's planned analysis (analysis/stats.py runs each test under its key; analysis/services.py reports
# the primary one first, as primary).
RATING_PLAN = AnalysisPlan(
    primary=PlannedTest(
        "clustered",
        "each condition's top share against the baseline's: difference with a participant-clustered "
        "(GEE-robust) Wald test, because each participant gives several ratings",
    ),
    secondary=(
        PlannedTest("omnibus", "omnibus chi-square (condition × rating), the seed study's own procedure"),
        PlannedTest("2xk", "chi-square vs baseline (2 × scale)"),
        PlannedTest("2x2", "chi-square vs baseline (2 × 2 top vs rest, Yates)"),
        PlannedTest("bootstrap", "bootstrap CI of the top-share change (participants resampled)"),
    ),
)


def _checks_line(design: dict) -> str:
    fields = design["fields"]
    return (
        f"Attention checks: {len(design['attention_checks'])}; more than "
        f"{fields['attention_check_max_failures']} failed flags a participant"
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
        TEQ: "kinds.rating.pages.TEQ_PAGE",
        ITEMS: "kinds.rating.pages.ITEMS_PAGE",
    }
    status_columns = [
        ("responses", "responses"),
        ("ratings", "ratings (attention checks not counted)"),
        ("ratings_per_response.min", "min/resp"),
        ("ratings_per_response.max", "max/resp"),
        ("ratings_per_response.mean", "mean/resp"),
    ]
    analysis = "kinds.rating.entry.RATING_ANALYSIS"
    analysis_page = "analysis:dashboard"
    analysis_view = "kinds.rating.views.dashboard"
    analysis_urls = "kinds.rating.urls.urlpatterns"
    demo = "kinds.rating.demo.rating_demo_ensure"
    demo_closed = "kinds.rating.demo.published_demo_ensure"
    launch_panel = "kinds.rating.launch_power.launch_power_html"
    corpus_import = True
    judged = True
    attention_checks = True
    material_title = "Corpus: prompts and responses"
    answer_review = "kinds.rating.answer_review.rating_answer_review"
    bundle = "kinds.rating.bundle.RATING_BUNDLE"
    answers_export = "kinds.rating.export.rating_export"
    answers_export_lines = "kinds.rating.export.rating_export_lines"
    answers_stamp = "kinds.rating.frame.rating_stamp"
    scale_answers = "kinds.rating.frame.rating_rows_frame"
    analysis_plan = RATING_PLAN
    power_planner = "kinds.rating.power.rating_power_plan"
    exclusion_flags = "kinds.rating.live_exclusions.rating_exclusion_flags"
    traps = TRAP_FIELDS
    admin_fieldsets = [
        (
            "Rating study",
            {
                "fields": [
                    "worked_examples",
                    "scale",
                ]
            },
        ),
    ]
    # The question, the TEQ and the ratings aimed for per response (kinds/rating/models.py), on the study's page.
    settings_model = RatingSettings
    admin_inlines = ["kinds.rating.admin.RatingSettingsInline"]

    def steps(self, study: Study) -> list[str]:
        return [INSTRUCTIONS, *([TEQ] if self.settings(study).ask_teq else []), ITEMS]

    def picture_options(self, study: Study) -> list[dict]:
        return study.scale

    def prereg_procedure(self, study: Study, design: dict) -> list[str]:
        # A design frozen while these settings were Study fields has them among its fields.
        fields = {**design["fields"], **(design.get("kind_settings") or {})}
        scale = ", ".join(f"{o['label']} = {o['value']}" for o in fields["scale"])
        return [
            f"Question: {fields['scale_question']}",
            f"Scale: {scale}",
            f"Items per participant: {fields['items_per_participant']}; ratings per response: "
            f"{fields['target_ratings_per_response']}",
            _checks_line(design),
        ]

    def enrollable(self) -> Q:
        """A condition with nothing to rate cannot take anyone."""
        return Q(Exists(eligible_responses(OuterRef("pk"))))

    def assignments_create(
        self, participant: Participant, *, rng: random.Random, now: datetime
    ) -> list[Assignment]:
        """The condition's eligible responses with the fewest live assignments (ties by the participant's
        second tie-break), as many as the study shows, in the order of their third; each of the study's attention
        checks after its place's number of regular items (`check_place`, drawn after the tie-breaks, check by
        check in id order, so an enrolment still replays from its seed). The counts are the balance's running
        totals (studies/balance_counts.py), which equal `response_live_counts` without reading every page."""
        study = participant.study
        counts = live_pages(study, now, Assignment.Kind.RESPONSE, eligible_responses(participant.condition))
        draws = tie_break_draws(rng)
        dealt = sorted(counts, key=lambda k: (counts[k], tie_break_key(k, draws), k))
        draws = tie_break_draws(rng)
        chosen = sorted(dealt[: study.items_per_participant], key=lambda k: (tie_break_key(k, draws), k))
        checks = sorted(
            (check_place(first, last, rng), pk)
            for pk, first, last in AttentionCheck.objects.filter(study=study)
            .order_by("pk")
            .values_list("pk", "after_item", "after_item_max")
        )
        pages: list[Assignment] = []

        def add_checks(selected: Iterable[int]) -> None:
            for check_id in selected:
                pages.append(Assignment(kind=Assignment.Kind.ATTENTION, attention_check_id=check_id))

        for index, response_id in enumerate(chosen):
            add_checks(key for after, key in checks if after == index)
            pages.append(Assignment(kind=Assignment.Kind.RESPONSE, response_id=response_id))
        add_checks(key for after, key in checks if after >= len(chosen))
        authenticity.traps_place(
            pages,
            study=study,
            shown=chosen,
            repeat=lambda response_id: Assignment(kind=Assignment.Kind.REPEAT, response_id=response_id),
            picture=lambda: Assignment(kind=Assignment.Kind.PICTURE),
            rng=rng,
        )
        for position, page in enumerate(pages):
            page.participant = participant
            page.position = position
        return rows.insert_many(Assignment, pages, PAGE_FIELDS)

    def launch_problems(self, study: Study, conditions: list[Condition]) -> list[LaunchProblem]:
        """Instructions are written; every condition has a response (sample 0) for every prompt; none is
        flagged for review; at least items_per_participant prompts. `conditions` carry `with_response` (prompts
        with a sample-0 response)."""
        problems = instructions_problems(study, what="what participants rate and how")
        problems += corpus_coverage_problems(study, conditions, asks=f"rates {study.items_per_participant}")
        flagged = (
            Response.objects.filter(condition__study=study, review=Response.Review.FLAGGED)
            .values("condition__name")
            .annotate(n=Count("id"))
            .order_by("condition__name")
        )
        for row in flagged:
            problems.append(
                LaunchProblem(
                    CONDITIONS,
                    f"condition '{row['condition__name']}' has {row['n']} responses flagged for review: "
                    "approve, edit or replace them",
                )
            )
        return problems

    def coverage_problems(self, study: Study, conditions: list[Condition]) -> list[str]:
        """A condition whose quota × items per participant is below its responses × the target ratings per
        response cannot rate every response as often as planned (e.g. 3 × 5 < 20 × 2)."""
        problems = []
        responses = dict(
            Response.objects.filter(RESPONSE_ELIGIBLE, condition__in=conditions)
            .values("condition")
            .annotate(n=Count("id"))
            .values_list("condition", "n")
        )
        target, items = self.settings(study).target_ratings_per_response, study.items_per_participant
        for condition in conditions:
            n = responses.get(condition.pk, 0)
            quota = condition.effective_quota
            if n and quota * items < n * target:
                problems.append(
                    f"condition '{condition.name}': {quota} participants × {items} items = {quota * items} "
                    f"ratings, fewer than its {n} responses × {target} planned rating{'s' if target != 1 else ''} "
                    f"= {n * target}; raise the quota to {-(-n * target // items)} or lower the target"
                )
        return problems

    def status_counts(self, study: Study, conditions: list[Condition]) -> dict[int, dict]:
        """Responses, ratings by counted participants, and the spread of ratings per response (min / max /
        mean and how many responses have each count), from the running totals (kinds/rating/rating_totals.py):
        a fixed number of queries that do not grow with the number of participants."""
        per: dict[int, dict] = {}
        by_condition: dict[int, list[int]] = {condition.pk: [] for condition in conditions}
        for condition_id, n in ratings_per_response(study).values():
            by_condition.setdefault(condition_id, []).append(n)
        for cid, counts in by_condition.items():
            spread = {"min": None, "max": None, "mean": None, "histogram": {}}
            if counts:
                spread["min"], spread["max"] = min(counts), max(counts)
                spread["mean"] = round(sum(counts) / len(counts), 3)
                spread["histogram"] = {str(n): k for n, k in sorted(Counter(counts).items())}
            per[cid] = {"responses": len(counts), "ratings": sum(counts), "ratings_per_response": spread}
        return per

    def status_totals(self, study: Study, per_condition: dict[int, dict]) -> dict:
        return {"ratings": sum(row.get("ratings", 0) for row in per_condition.values())}

    def status_notices(self, study: Study, status: dict) -> list[str]:
        """A shortfall per condition whose quota has filled (its completed and active participants reach it, so
        nobody new joins) while responses have fewer ratings than the target: how many have none, how many
        ratings are missing, and the participants that would give them."""
        target, items = self.settings(study).target_ratings_per_response, study.items_per_participant
        notices = []
        for row in status["conditions"]:
            taken = row["participants"]["completed"] + row["participants"]["active"]
            histogram = row.get("ratings_per_response", {}).get("histogram", {})
            missing = sum(n * max(target - int(k), 0) for k, n in histogram.items())
            if taken < row["quota"] or not missing:
                continue
            unrated = histogram.get("0", 0)
            notices.append(
                f"condition '{row['name']}' has filled its quota ({row['quota']} participants) but {unrated} "
                f"response{'' if unrated == 1 else 's'} have no rating and {missing} rating"
                f"{'' if missing == 1 else 's'} are missing against the target of {target} per response: raise "
                f"its quota by {-(-missing // items)} to collect them, or accept the shortfall"
            )
        return notices

    def status_summary(self, study: Study, status: dict) -> list[str]:
        target = self.settings(study).target_ratings_per_response
        return [
            f"{status['prompts']} prompts",
            f"{study.items_per_participant} items per participant",
            f"target {target} rating{'' if target == 1 else 's'} per response",
        ]


RATING = register(RatingKind())
