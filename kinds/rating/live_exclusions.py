"""Each participant's flags under their study's declared exclusion rules while it runs: what the live status page
and the participant list show, so a researcher can act before approving anyone on the recruiting platform.

One computation with the analysis: the rows are `frame.rating_rows_frame` (counted ratings: answers to
response pages by real participants, attention-check pages apart) and the flags are
`exclusions.participant_exclusion_flags` under `ExclusionRules.from_declared(study.exclusion_rules)`, exactly what
`exclusions.exclusions_apply` runs when the analysis applies the declared rules (a participant's flags depend on
their own ratings only, so reading some participants gives the flags the whole study's analysis gives them). The
rating kind names `rating_exclusion_flags` as its `exclusion_flags` (kinds/rating/kind.py), so the studies
admin shows them without importing analysis. A participant with no counted rating yet has no row, so no flag.
"""

from __future__ import annotations

from collections.abc import Mapping

from analysis.exclusions import RULE_NAMES, ExclusionRules, participant_exclusion_flags
from studies.models import Study

from .frame import rating_rows_frame

RULE_WORDS = {
    "attention_checks": "failed attention checks",
    "incomplete": "not finished",
    "too_fast": "too fast",
    "straight_lining": "straight-lining",
    "authenticity": "authenticity",
}


def rating_exclusion_flags(
    *, study: Study | None = None, participants: Mapping[int, Study] | None = None
) -> dict[int, list[str]]:
    """{participant id: the declared rules that exclude them, in words (RULE_WORDS), in RULE_NAMES order; []:
    kept} for every participant of `study`, or of `participants` ({participant id: their study}, one query
    whatever their studies), with at least one counted rating."""
    if study is not None:
        rows = rating_rows_frame(study=study)
        studies = {}
    else:
        rows = rating_rows_frame(participant_ids=list(participants or {}))
        studies = dict(participants or {})
    if rows.empty:
        return {}
    out: dict[int, list[str]] = {}
    owner = rows["participant_id"].map(lambda pid: (studies.get(pid) or study).pk)
    for _, mine in rows.groupby(owner, sort=False):
        whose = study or studies[int(mine["participant_id"].iloc[0])]
        flags = participant_exclusion_flags(mine, ExclusionRules.from_declared(whose.exclusion_rules))
        for pid, row in flags.iterrows():
            out[int(pid)] = [RULE_WORDS[rule] for rule in RULE_NAMES if row[rule]]
    return out
