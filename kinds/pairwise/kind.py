"""The pairwise preference study: participants see one prompt with two replies of two conditions and say which
reply is more empathetic (A, B, or about the same), with "both are inadequate" as a separate flag. Conditions
are ranked from these votes with a Bradley–Terry model (kinds/pairwise/analysis.py).

Steps: consent → instructions (with worked examples) → the pairs → done.
Settings: `PairwiseSettings` (the question, the focal design, the adaptive phase); the number of pairs is the
study's `items_per_participant`.

Assignment (`assignments_create`, under the enrolment's study lock), a balanced incomplete design over prompt ×
condition pair, dealt by live counts (studies/balancing.py `live_assignments`: answered pages, and pages of
participants who hold their place; a participant who returns or times out stops counting, so their pairs are
dealt again):

* each of the participant's pairs is the condition pair with the fewest live pairs, so condition pairs never
  differ by more than one; with the focal design, among the pairs involving the participant's condition, and
  first the one this participant has been given least: each participant's pages are spread evenly over their
  condition's pairs (the fewest live breaking ties), so that participants of all conditions keep the pairs
  within two of each other;
* on the prompt with the fewest live pairs of that condition pair, then the fewest live pairs at all, among the
  prompts the participant has not been given yet (each prompt at most once per participant);
* left/right: the side that condition pair has had less often that way round, then the side its conditions have
  had less often, then the side this participant has had less often; then the participant's seed;
* the pages in an order drawn from the participant's seed, the study's known-answer pairs inserted after
  `after_item` regular pairs, their good reply on a side drawn from the seed;
* the traps the study has on (studies/authenticity.py `traps_place`), never a vote: consistency pairs, their
  replies' sides swapped, and the picture check.

A follow-up wave (studies/waves.py) deals the pairs involving its new conditions, and re-asks its parent's pairs
for `rerate_share` of its pairs (the drift test, kinds/pairwise/analysis.py).
Ties everywhere are broken by `tie_break_key` with the participant's draws, so an enrolment replays from its seed.
Adaptive phase (`PairwiseSettings.adaptive_after`): once that many pairs are answered, the condition pair is the
one furthest below its target share, the targets coming from `pair_weights` (a dotted path into analysis:
the current strengths' intervals), each capped at `adaptive_max_share`.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime
from itertools import combinations

from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from generation.judge_formats import PAIRS as PAIRS_FORMAT
from kinds.pairwise.models import PairItem, PairwiseSettings
from studies import authenticity, rows
from studies.balancing import live_assignments, tie_break_draws, tie_break_key
from studies.kinds import StudyKind, register, resolved
from studies.kinds.base import (
    CONDITIONS,
    TRAP_FIELDS,
    AnalysisPlan,
    LaunchProblem,
    PlannedTest,
    SetupTexts,
    WorkedExampleForm,
    corpus_coverage_problems,
    instructions_problems,
)
from studies.models import RESPONSE_ELIGIBLE, Condition, PairAttentionCheck, Participant, Response, Study
from studies.reply_review import undecided_same_pairs

from .traps import PICTURE_OPTIONS, picture_page, repeat_page

INSTRUCTIONS = Participant.Step.INSTRUCTIONS
PAIRS = "pairs"
# The columns a new page is written with (the answer's columns hold their defaults until it is answered).
PAGE_FIELDS = (
    "participant", "position", "prompt", "left", "right", "known_answer", "good_on_left", "choice", "both_inadequate",
    "trap",
)  # fmt: skip

Pair = tuple[int, int]  # two condition ids, smaller first

# The pairwise kind's planned analysis (analysis/pairwise_report.py computes each test under its key; the
# analysts' page and the command report the primary one first, as primary).
PAIRWISE_PLAN = AnalysisPlan(
    primary=PlannedTest(
        "bradley_terry",
        "Bradley–Terry strengths (Davidson, with ties) of each condition against the baseline, with 95 % "
        "intervals from a two-way cluster bootstrap (raters and prompts resampled)",
    ),
    secondary=(
        PlannedTest(
            "win_rates",
            "win rate of each condition against the baseline (non-tied votes, clustered by rater)",
        ),
        PlannedTest("length", "Bradley–Terry strengths controlling for the replies' length"),
        PlannedTest("position", "position bias: the left reply's share of non-tied votes and its advantage"),
        PlannedTest("agreement", "agreement of raters on pairs asked more than once"),
    ),
)
# A worked example shows one prompt with two replies and the choice a careful participant makes.
PAIR_EXAMPLES = WorkedExampleForm(
    texts=(
        ("emotion", "Emotion"),
        ("situation", "Situation"),
        ("speaker_utterance", "Speaker 1 says"),
        ("reply_a", "Reply A"),
        ("reply_b", "Reply B"),
    ),
    required=("situation", "speaker_utterance", "reply_a", "reply_b"),
    answer_key="choice",
    answer_label="The more empathetic reply",
    help_text="Shown with the instructions. Leave an example's texts blank to remove it; each shows two replies to "
    "one prompt and the choice a careful participant makes, with why.",
)
EXAMPLE_CHOICES = [
    ("A", "A is more empathetic"),
    ("B", "B is more empathetic"),
    ("same", "About the same"),
    ("both_inadequate", "Both are inadequate"),
]
# What a participant answers on each pair, as the pre-registration and the setup say it.
CHOICES_IN_WORDS = (
    "A is more empathetic / B is more empathetic / about the same; and, apart, “both are inadequate”"
)


def eligible_replies(study: Study) -> dict[tuple[int, int], int]:
    """{(prompt id, condition id): response id} of the replies a participant may be shown (`RESPONSE_ELIGIBLE`)."""
    found = Response.objects.filter(RESPONSE_ELIGIBLE, condition__study=study).order_by()
    return {(p, c): r for p, c, r in found.values_list("prompt_id", "condition_id", "pk")}


def pair_live_counts(*, study: Study, now: datetime | None = None) -> Counter:
    """Live regular pages of the study per (prompt id, left condition id, right condition id), by the balance
    rule (studies/balancing.py `live_assignments`). One grouped query."""
    pages = (
        PairItem.objects.filter(participant__study=study, known_answer__isnull=True, trap="")
        .filter(live_assignments(study, now or timezone.now()))
        .order_by()
        .values_list("prompt_id", "left__condition_id", "right__condition_id")
        .annotate(n=Count("pk"))
    )
    return Counter({(prompt, left, right): n for prompt, left, right, n in pages})


def answered_pairs(study: Study) -> int:
    """Regular pairs of the study answered by counted (non-preview) participants."""
    return PairItem.objects.filter(
        participant__study=study,
        participant__is_preview=False,
        known_answer__isnull=True,
        trap="",
        answered_at__isnull=False,
    ).count()


class _Deal:
    """The live counts one enrolment deals against, updated as it deals (so one participant's pairs count
    towards the next of their own pairs too)."""

    def __init__(self, live: Counter) -> None:
        self.ordered: Counter = Counter()  # (left, right) conditions
        self.pair: Counter = Counter()  # unordered condition pair
        self.prompt_pair: Counter = Counter()  # (prompt, unordered pair)
        self.prompt: Counter = Counter()
        self.left: Counter = Counter()  # condition on the left minus on the right
        for (prompt, left, right), n in live.items():
            self.add(prompt, left, right, n)

    def add(self, prompt: int, left: int, right: int, n: int = 1) -> None:
        pair = (min(left, right), max(left, right))
        self.ordered[(left, right)] += n
        self.pair[pair] += n
        self.prompt_pair[(prompt, pair)] += n
        self.prompt[prompt] += n
        self.left[left] += n
        self.left[right] -= n


class PairwiseKind(StudyKind):
    name = "pairwise"
    label = "Pairwise preference study (which of two replies is more empathetic)"
    step_labels = {INSTRUCTIONS: "Instructions", PAIRS: "Pairs"}
    pages = {
        PAIRS: "kinds.pairwise.pages.PAIRS_PAGE",
    }
    settings_model = PairwiseSettings
    status_columns = [("responses", "replies"), ("votes", "votes"), ("wins", "wins"), ("ties", "ties")]
    analysis = "kinds.pairwise.analysis.PAIRWISE_ANALYSIS"
    analysis_page = "analysis:pairwise"
    analysis_urls = "kinds.pairwise.urls.urlpatterns"
    analysis_file = "kinds.pairwise.views.pairwise_file_response"
    demo = "kinds.pairwise.demo.pairwise_demo_ensure"
    corpus_import = True
    material_title = "Corpus: prompts and replies"
    analysis_plan = PAIRWISE_PLAN
    setup_texts = SetupTexts(
        answers="the question, the worked examples (two replies and the better one) and the known-answer pairs",
        items="pairs",
        welcome="You will read {n} short conversations, each with two replies, and say which reply is more "
        "empathetic.",
    )
    worked_example_form = PAIR_EXAMPLES
    answers_export = "kinds.pairwise.frame.pairwise_export"
    bundle = "kinds.pairwise.bundle.PAIRWISE_BUNDLE"
    # LLM judges compare each pair of conditions' replies on every prompt, in both orders.
    judged = True
    judge_format = PAIRS_FORMAT
    answer_review = "kinds.pairwise.answer_review.pairwise_answer_review"
    power_planner = "kinds.pairwise.power.pairwise_power_plan"
    launch_panel = "kinds.pairwise.launch_power.pairwise_launch_power_html"
    # (study) -> {(condition id, condition id): weight}, the adaptive phase's targets; read after the warm-up.
    pair_weights = "kinds.pairwise.analysis.adaptive_pair_weights"
    traps = TRAP_FIELDS
    admin_fieldsets = [("Pairwise study", {"fields": ["worked_examples"]})]
    wave_keeps_conditions = True
    admin_inlines = [
        "kinds.pairwise.admin.PairwiseSettingsInline",
        "kinds.pairwise.admin.PairAttentionCheckInline",
    ]

    def picture_options(self, study: Study) -> list[dict]:
        return PICTURE_OPTIONS

    def steps(self, study: Study) -> list[str]:
        return [INSTRUCTIONS, PAIRS]

    def example_answers(self, study: Study) -> list[tuple[object, str]]:
        return list(EXAMPLE_CHOICES)

    def checks(self, study: Study) -> tuple[int, str, str]:
        """The known-answer pairs: a pair whose better reply is known, counted as an attention check."""
        return (
            PairAttentionCheck.objects.filter(study=study).count(),
            "known-answer pair",
            "pair_attention_checks-group",
        )

    def prereg_procedure(self, study: Study, design: dict) -> list[str]:
        settings = design.get("kind_settings") or {}
        known = len(design.get("known_answer_pairs", []))
        fields = design["fields"]
        return [
            f"Question: {settings.get('question', '')}",
            f"Choices on each pair of two conditions' replies to one prompt: {CHOICES_IN_WORDS}",
            f"Pairs per participant: {fields['items_per_participant']}; "
            + (
                "focal design (each participant's pairs involve their condition)"
                if settings.get("focal_design")
                else "every pair of conditions for everyone"
            ),
            f"Known-answer pairs (the attention checks): {known}; more than "
            f"{fields['attention_check_max_failures']} failed flags a participant",
        ]

    def enrollable(self) -> Q:
        """A condition with replies to show; without the focal design, only the baseline condition takes
        participants (everyone sees every condition: the baseline's quota is the study's)."""
        has_replies = Q(Exists(Response.objects.filter(RESPONSE_ELIGIBLE, condition=OuterRef("pk"))))
        return has_replies & (Q(study__pairwise_settings__focal_design=True) | Q(is_baseline=True))

    def assignments_create(self, participant: Participant, *, rng: random.Random, now: datetime) -> list:
        """The participant's pairs by the balanced design (see the module's docstring), with the study's
        known-answer pairs; three queries for the counts and checks, one INSERT."""
        study = participant.study
        settings = self.settings(study)
        replies = eligible_replies(study)
        undecided = undecided_same_pairs(study)  # near-identical replies: never a pair until decided
        conditions = sorted({c for _p, c in replies})
        pairs = [
            pair
            for pair in combinations(conditions, 2)
            if not settings.focal_design or participant.condition_id in pair
        ]
        prompts = sorted({p for p, _c in replies})
        deal = _Deal(pair_live_counts(study=study, now=now))
        weights = self._adaptive_weights(study, settings, pairs)
        pair_draws, prompt_draws, side_draws = (tie_break_draws(rng) for _ in range(3))
        mine: Counter = Counter()  # this participant's left-minus-right per condition
        mine_pairs: Counter = (
            Counter()
        )  # this participant's pages per condition pair (the focal design's spread)
        used: set[int] = set()
        dealt: list[PairItem] = []
        stored = self._stored_pairs(study, pairs)
        for _ in range(study.items_per_participant):
            pair = min(
                self._pool(study, deal, pairs, stored),
                key=lambda p: (
                    mine_pairs[p] if settings.focal_design else 0,
                    self._need(deal, p, weights),
                    tie_break_key(p[0] * 65599 + p[1], pair_draws),
                    p,
                ),
            )
            mine_pairs[pair] += 1
            open_prompts = [
                p
                for p in prompts
                if p not in used
                and (p, pair[0]) in replies
                and (p, pair[1]) in replies
                and (p, *pair) not in undecided
            ]
            if not open_prompts:
                break  # fewer prompts than pairs: launch_problems refuses such a study
            prompt = min(
                open_prompts,
                key=lambda p: (
                    deal.prompt_pair[(p, pair)],
                    deal.prompt[p],
                    tie_break_key(p, prompt_draws),
                    p,
                ),
            )
            a, b = pair
            side = tie_break_key(prompt, side_draws) % 2
            left, right = min(
                ((a, b), (b, a)),
                key=lambda lr: (
                    deal.ordered[lr],
                    deal.left[lr[0]] - deal.left[lr[1]],
                    mine[lr[0]] - mine[lr[1]],
                    (lr[0] == a) != bool(side),
                ),
            )
            deal.add(prompt, left, right)
            mine[left] += 1
            mine[right] -= 1
            used.add(prompt)
            dealt.append(
                PairItem(prompt_id=prompt, left_id=replies[(prompt, left)], right_id=replies[(prompt, right)])
            )
        order_draws = tie_break_draws(rng)
        dealt.sort(key=lambda page: (tie_break_key(page.prompt_id, order_draws), page.prompt_id))
        checks = sorted(
            PairAttentionCheck.objects.filter(study=study).order_by().values_list("after_item", "pk")
        )
        pages: list[PairItem] = []
        for index, page in enumerate([*dealt, None]):
            for after, check_id in checks:
                if after == index or (page is None and after > index):
                    pages.append(PairItem(known_answer_id=check_id, good_on_left=rng.random() < 0.5))
            if page is not None:
                pages.append(page)
        authenticity.traps_place(
            pages, study=study, shown=dealt, repeat=repeat_page, picture=picture_page, rng=rng
        )
        for position, page in enumerate(pages):
            page.participant = participant
            page.position = position
        return rows.insert_many(PairItem, pages, PAGE_FIELDS)

    @staticmethod
    def _stored_pairs(study: Study, pairs: list[Pair]) -> set[Pair] | None:
        """A follow-up wave's pairs of two conditions its parent compared already (None: not a wave)."""
        if study.parent_id is None:
            return None
        stored = set(Condition.objects.filter(study_id=study.parent_id).values_list("name", flat=True))
        names = dict(Condition.objects.filter(study=study).values_list("pk", "name"))
        return {pair for pair in pairs if names[pair[0]] in stored and names[pair[1]] in stored}

    @staticmethod
    def _pool(study: Study, deal: _Deal, pairs: list[Pair], stored: set[Pair] | None) -> list[Pair]:
        """The condition pairs the next page is dealt from: in a follow-up wave, the pairs involving a new
        condition, and the parent's pairs again (re-asked, for the drift test) while they have less than the
        wave's `rerate_share` of its pairs."""
        if stored is None:
            return pairs
        fresh = [pair for pair in pairs if pair not in stored]
        again = [pair for pair in pairs if pair in stored]
        total = sum(deal.pair[pair] for pair in pairs)
        asked_again = sum(deal.pair[pair] for pair in again)
        if again and (not fresh or asked_again < study.rerate_share * (total + 1)):
            return again
        return fresh

    @staticmethod
    def _need(deal: _Deal, pair: Pair, weights: dict[Pair, float] | None) -> float:
        """How far `pair` is from its share: its live count (balanced design), or its count over its target
        share (adaptive phase; a pair at its cap is not dealt)."""
        if weights is None:
            return deal.pair[pair]
        weight = weights.get(pair, 0.0)
        return deal.pair[pair] / weight if weight > 0 else float("inf")

    def _adaptive_weights(
        self, study: Study, settings: PairwiseSettings, pairs: list[Pair]
    ) -> dict[Pair, float] | None:
        """The adaptive phase's target share per condition pair (None: the balanced design), capped at
        `adaptive_max_share` and normalised over `pairs`."""
        if settings.adaptive_after is None or answered_pairs(study) < settings.adaptive_after:
            return None
        raw = resolved(self.pair_weights)(study)
        cap = settings.adaptive_max_share
        weights = {pair: max(float(raw.get(pair, 0.0)), 0.0) for pair in pairs}
        total = sum(weights.values())
        if total <= 0:
            return None
        shares = {pair: weight / total for pair, weight in weights.items()}
        for _ in range(len(shares)):  # cap, and hand the excess to the others in proportion
            over = {p: s - cap for p, s in shares.items() if s > cap + 1e-12}
            if not over:
                break
            excess = sum(over.values())
            rest = {p: s for p, s in shares.items() if p not in over}
            rest_total = sum(rest.values())
            for pair in over:
                shares[pair] = cap
            for pair, share in rest.items():
                shares[pair] = share + excess * (share / rest_total if rest_total else 1 / len(rest))
        return shares

    def launch_problems(self, study: Study, conditions: list[Condition]) -> list[LaunchProblem]:
        """Instructions are written; two conditions or more, one of them the baseline; every condition has a
        reply for every prompt; at least items_per_participant prompts."""
        problems = instructions_problems(study, what="what participants compare and how")
        if len(conditions) < 2:
            problems.append(LaunchProblem(CONDITIONS, "a pairwise study needs at least two conditions"))
        if sum(1 for c in conditions if c.is_baseline) != 1:
            problems.append(
                LaunchProblem(
                    CONDITIONS,
                    "a pairwise study needs exactly one baseline condition (strengths are relative to it)",
                )
            )
        n = study.items_per_participant
        return problems + corpus_coverage_problems(
            study, conditions, asks=f"answers {n} pairs, each on another prompt"
        )

    def coverage_problems(self, study: Study, conditions: list[Condition]) -> list[str]:
        """Two conditions' near-identical replies to a prompt are not dealt as a pair until the researcher
        approves one of them (studies/reply_review.py)."""
        undecided = undecided_same_pairs(study)
        if not undecided:
            return []
        return [
            f"{len(undecided)} pair(s) of near-identical replies (two conditions, one prompt) are not dealt until "
            "you decide: review the responses flagged 'same_as_other_condition' and approve, edit or replace them"
        ]

    def status_counts(self, study: Study, conditions: list[Condition]) -> dict[int, dict]:
        """Replies, votes (answered pairs showing the condition), wins and ties, by counted participants.
        Three grouped queries."""
        per = {c.pk: {"responses": 0, "votes": 0, "wins": 0, "ties": 0} for c in conditions}
        for cid, n in (
            Response.objects.filter(condition__study=study)
            .values("condition")
            .annotate(n=Count("id"))
            .values_list("condition", "n")
        ):
            per.setdefault(cid, {"responses": 0, "votes": 0, "wins": 0, "ties": 0})["responses"] = n
        answered = PairItem.objects.filter(
            participant__study=study,
            participant__is_preview=False,
            known_answer__isnull=True,
            answered_at__isnull=False,
        )
        for side, wins_when in (("left", PairItem.Choice.LEFT), ("right", PairItem.Choice.RIGHT)):
            rows_ = (
                answered.values(f"{side}__condition")
                .annotate(
                    votes=Count("pk"),
                    wins=Count("pk", filter=Q(choice=wins_when)),
                    ties=Count("pk", filter=Q(choice=PairItem.Choice.TIE)),
                )
                .values_list(f"{side}__condition", "votes", "wins", "ties")
            )
            for cid, votes, wins, ties in rows_:
                row = per.setdefault(cid, {"responses": 0, "votes": 0, "wins": 0, "ties": 0})
                row["votes"] += votes
                row["wins"] += wins
                row["ties"] += ties
        return per

    def status_totals(self, study: Study, per_condition: dict[int, dict]) -> dict:
        return {"votes": sum(row.get("votes", 0) for row in per_condition.values()) // 2}

    def status_summary(self, study: Study, status: dict) -> list[str]:
        settings = self.settings(study)
        return [
            f"{status['prompts']} prompts",
            f"{study.items_per_participant} pairs per participant",
            "focal design (each participant's pairs involve their condition)"
            if settings.focal_design
            else "every pair of conditions for everyone",
        ]


PAIRWISE = register(PairwiseKind())
