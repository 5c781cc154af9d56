"""A pairwise study's answers, read once, two ways: the answers export (`pairwise_export`, the kind's
`answers_export`, served by analysis/exports.py as the study's `ratings` export) and the analysis frame
(`pairwise_frame`, what kinds/pairwise/analysis.py hands to the Bradley–Terry functions).

One row per answered regular pair (known-answer pairs are attention checks, not votes) of a non-preview
participant, in participant and page order. The frame keeps the rows of counted participants only: those no
exclusion rule excludes (the study's declared rules by default, as for the rating kind: analysis/exclusions.py,
applied to each participant's answers with `participant_exclusion_flags_one`; answering the same side every time
is what straight-lining means here).

Frame contract (exactly these columns, agreed with kinds/pairwise/bradley_terry.py): participant (pseudonym), prompt_id,
left_condition, right_condition, choice (left / right / tie), both_inadequate, response_time_ms, left_length,
right_length (reply lengths in characters), position (page order).
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from django.db.models.functions import Length

from analysis.exclusions import RULE_NAMES, ExclusionRules, participant_exclusion_flags_one
from analysis.pseudonyms import pseudonym
from kinds.pairwise.models import PairItem
from studies.models import Study

FRAME_COLUMNS = [
    "participant", "prompt_id", "left_condition", "right_condition", "choice", "both_inadequate",
    "response_time_ms", "left_length", "right_length", "position",
]  # fmt: skip
# The frame's types but the response time's (filled with 0 where missing first); the open-science bundle's script
# reads them from its parameters.json (kinds/pairwise/bundle.py), so that its frame is this one.
FRAME_TYPES = {
    "participant": str, "prompt_id": str, "left_condition": str, "right_condition": str, "choice": str,
    "both_inadequate": bool, "left_length": int, "right_length": int, "position": int,
}  # fmt: skip
EXPORT_COLUMNS = [
    *FRAME_COLUMNS, "emotion", "left_text", "right_text", "answered_at", "participant_status",
    "attention_failures", "flagged_for_exclusion", "excluded", *(f"excluded_{rule}" for rule in RULE_NAMES),
]  # fmt: skip
# A participant's choices as the straight-lining rule sees them: one value per side.
_CHOICE_VALUE = {PairItem.Choice.LEFT: 1, PairItem.Choice.RIGHT: 2, PairItem.Choice.TIE: 3}
_FIELDS = (
    "participant__external_id", "prompt__dialogue_id", "left__condition__name",
    "right__condition__name", "choice", "both_inadequate", "response_time_ms", "left_length", "right_length",
    "position", "prompt__emotion__name", "left__text", "right__text", "answered_at", "participant__status",
    "participant__attention_failures", "participant__flagged_for_exclusion",
)  # fmt: skip


def pairwise_answer_rows(*, study: Study) -> Iterator[tuple]:
    """The answered regular pairs of the study's non-preview participants (`_FIELDS`), by participant and page,
    streamed from the database."""
    return (
        PairItem.objects.filter(
            participant__study=study,
            participant__is_preview=False,
            known_answer__isnull=True,
            trap="",
            answered_at__isnull=False,
        )
        .annotate(left_length=Length("left__text"), right_length=Length("right__text"))
        .order_by("participant_id", "position")  # one participant's rows together (their exclusion flags)
        .values_list(*_FIELDS)
        .iterator(chunk_size=2000)
    )


def pairwise_records(*, study: Study, rules: ExclusionRules | None = None) -> Iterator[list]:
    """The export's records (`EXPORT_COLUMNS`), `participant` being the platform id, with the exclusion flags
    `rules` give (default: the study's declared rules)."""
    rules = rules or ExclusionRules.from_declared(study.exclusion_rules)
    buffer: list[tuple] = []

    def flush() -> Iterator[list]:
        first = buffer[0]
        flags = participant_exclusion_flags_one(
            values=[_CHOICE_VALUE[row[4]] for row in buffer],
            times_ms=[row[6] for row in buffer],
            flagged=bool(first[16]),
            status=first[14],
            attention_failures=int(first[15]),
            rules=rules,
        )
        for row in buffer:
            yield [*row, flags["excluded"], *(flags[rule] for rule in RULE_NAMES)]

    for row in pairwise_answer_rows(study=study):
        if buffer and row[0] != buffer[0][0]:
            yield from flush()
            buffer = []
        buffer.append(row)
    if buffer:
        yield from flush()


def pairwise_export(study: Study, rules: ExclusionRules | None = None) -> tuple[list[str], Iterator[list]]:
    """The kind's answers export (`StudyKind.answers_export`): header and records (platform ids; the exports
    machinery puts pseudonyms in their place for whoever may not see them)."""
    return list(EXPORT_COLUMNS), pairwise_records(study=study, rules=rules)


def pairwise_frame(*, study: Study, rules: ExclusionRules | None = None) -> pd.DataFrame:
    """The frame of the contract (`FRAME_COLUMNS`): the counted participants' answered regular pairs, under
    their pseudonyms."""
    frame = pd.DataFrame(list(pairwise_records(study=study, rules=rules)), columns=EXPORT_COLUMNS)
    frame = frame[~frame["excluded"].astype(bool)][FRAME_COLUMNS].reset_index(drop=True)
    frame["participant"] = [pseudonym(study_id=study.pk, platform_id=p) for p in frame["participant"]]
    frame["response_time_ms"] = frame["response_time_ms"].fillna(0).astype(int)
    return frame.astype(FRAME_TYPES)


# Why a rater's votes are left out, in words, per rule (the analysts' page and exclusions.csv).
EXCLUSION_REASONS = {
    "attention_checks": "failed the known-answer pairs",
    "incomplete": "did not finish",
    "too_fast": "answered too fast",
    "straight_lining": "chose the same side on every pair",
    "authenticity": "flagged by the authenticity score",
}


def pairwise_exclusions(*, study: Study, rules: ExclusionRules | None = None) -> pd.DataFrame:
    """One row per rater with answered pairs (pseudonym, status, known-answer pairs failed, pairs answered,
    excluded, the reasons in words), by the same flags as the frame's (`pairwise_records`)."""
    rows: dict[str, dict] = {}
    for record in pairwise_records(study=study, rules=rules):
        row = dict(zip(EXPORT_COLUMNS, record, strict=True))
        seen = rows.get(row["participant"])
        if seen is not None:
            seen["pairs"] += 1
            continue
        reasons = [EXCLUSION_REASONS[rule] for rule in RULE_NAMES if row[f"excluded_{rule}"]]
        rows[row["participant"]] = {
            "rater": pseudonym(study_id=study.pk, platform_id=row["participant"]),
            "status": row["participant_status"],
            "known_answer_pairs_failed": int(row["attention_failures"]),
            "pairs": 1,
            "excluded": bool(row["excluded"]),
            "reasons": "; ".join(reasons) or "counted",
        }
    columns = ["rater", "status", "known_answer_pairs_failed", "pairs", "excluded", "reasons"]
    return pd.DataFrame(list(rows.values()), columns=columns)
