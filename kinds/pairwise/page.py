"""What the pairwise analysts' page says in words above its tables (kinds/pairwise/views.py): the headline
sentence, the warning when the intervals are too wide to say anything (with the votes the pairwise power plan
says it would take), who was excluded and why, and the tables under readable headings with the columns that
carry numbers. Reads the analysis' output files (summary.json, the CSVs), so the page says what the files say."""

from __future__ import annotations

import io
import json
import math

import pandas as pd

from analysis.study_power import StudyPowerError
from studies.models import Study

from .frame import EXCLUSION_REASONS
from .power import pairwise_power_plan

# An interval wider than this on either side of the estimate (log-strength 1: a win rate of 73 % against 27 %)
# cannot tell even a large preference from none: the page says the data are too few to say anything.
TOO_WIDE_HALF_WIDTH = 1.0
# The power the "votes it would take" sentence plans for.
PLANNED_POWER = 0.8
# Each output table: its heading, what it shows, and its columns as the page names them (others are left out).
TABLES = {
    "bt_scores.csv": (
        "Strengths of the conditions (Bradley–Terry, the baseline at 0)",
        {"condition": "condition", "strength": "log-strength", "ci_low": "95 % CI low", "ci_high": "95 % CI high",
         "strength_lc": "controlling for length", "strength_pos": "controlling for side", "votes": "votes",
         "wins": "wins", "losses": "losses", "ties": "ties"},
    ),
    "win_rates.csv": (
        "Win rates against the baseline (non-tied votes)",
        {"condition": "condition", "baseline": "against", "votes": "votes", "wins": "wins", "losses": "losses",
         "ties": "ties", "raters": "raters", "win_rate": "win rate", "ci_low": "95 % CI low",
         "ci_high": "95 % CI high", "p": "p (vs 50 %)"},
    ),
    "win_matrix.csv": ("How often each condition (row) beat each other one (column)", None),
    "position_bias.csv": (
        "Position bias: does the left reply win more often?",
        {"measure": "measure", "estimate": "estimate", "null": "no bias", "ci_low": "95 % CI low",
         "ci_high": "95 % CI high", "p": "p", "left_wins": "left wins", "right_wins": "right wins", "ties": "ties"},
    ),
    "exclusions.csv": (
        "Raters and exclusions",
        {"rater": "rater", "status": "status", "known_answer_pairs_failed": "known-answer pairs failed",
         "pairs": "pairs answered", "excluded": "excluded", "reasons": "why"},
    ),
    "drift.csv": ("Drift: the parent study's pairs asked again", None),
    "judge_flips.csv": ("LLM judges: verdicts that flip when the replies swap sides", None),
    "judge_calibration.csv": ("LLM judges against the people's votes", None),
    "judge_bt_scores.csv": ("LLM judges' strengths beside the people's", None),
}  # fmt: skip


# The position-bias table's measures in words.
MEASURES = {
    "left_share_of_non_tied_votes": "left reply's share of non-tied votes",
    "left_side_advantage_log_odds": "left side's advantage (log-odds)",
}


def _signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def _finite(*values) -> bool:
    return all(v is not None and isinstance(v, int | float) and math.isfinite(v) for v in values)


def headline_sentences(summary: dict) -> list[str]:
    """The result in words: each condition against the baseline, best first, its log-strength with its interval
    and what the interval allows one to say; then its win rate."""
    baseline = summary["baseline"]
    rates = {row["condition"]: row for row in summary.get("win_rates", [])}
    out = []
    for row in summary.get("strengths", []):
        name = row["condition"]
        if name == baseline:
            continue
        strength, low, high = row.get("strength"), row.get("ci_low"), row.get("ci_high")
        if not _finite(strength, low, high):
            out.append(f"{name}: no interval could be computed against {baseline} (too few votes).")
            continue
        if low > 0:
            verdict = f"preferred to {baseline}"
        elif high < 0:
            verdict = f"less preferred than {baseline}"
        else:
            verdict = f"not told apart from {baseline}"
        text = f"{name} is {verdict}: log-strength {_signed(strength)} (95 % CI {_signed(low)} to {_signed(high)})"
        rate = rates.get(name, {})
        if _finite(rate.get("win_rate")):
            text += (
                f"; it wins {100 * rate['win_rate']:.0f} % of {rate['wins'] + rate['losses']} non-tied votes"
            )
        out.append(text + ".")
    return out


def headline(summary: dict) -> str:
    """One sentence: how many votes from how many raters, and the best condition against the baseline."""
    strengths = [r for r in summary.get("strengths", []) if _finite(r.get("strength"))]
    best = max(strengths, key=lambda r: r["strength"]) if strengths else None
    lead = (
        f"{summary['votes']} votes from {summary['raters']} raters on {summary['prompts']} prompts compare "
        f"{len(summary['conditions'])} conditions against {summary['baseline']}"
    )
    if best is None or best["condition"] == summary["baseline"]:
        return lead + f"; no condition is ahead of {summary['baseline']}."
    low = best.get("ci_low")
    sure = _finite(low) and low > 0
    return (
        lead + f"; {best['condition']} is ahead"
        + (" and its interval excludes no preference." if sure else ", but its interval includes no preference.")
    )  # fmt: skip


def too_wide(summary: dict, *, study: Study, alpha: float) -> str:
    """The warning when some condition's interval is too wide to say anything (`TOO_WIDE_HALF_WIDTH`), with the
    pairs the pairwise power plan (kinds/pairwise/power.py) says it would take; "" when none is."""
    wide = []
    for row in summary.get("strengths", []):
        if row["condition"] == summary["baseline"]:
            continue
        low, high = row.get("ci_low"), row.get("ci_high")
        if not _finite(low, high) or (high - low) / 2 > TOO_WIDE_HALF_WIDTH:
            shown = f"{_signed(low)} to {_signed(high)}" if _finite(low, high) else "no interval"
            wide.append(f"{row['condition']} ({shown})")
    if not wide:
        return ""
    text = (
        f"Too little data to say anything yet: the 95 % intervals of {', '.join(wide)} are wider than "
        f"±{TOO_WIDE_HALF_WIDTH:g} in log-strength, so they cannot tell even a large preference from none."
    )
    try:
        plan = pairwise_power_plan(study=study, alpha=alpha, powers=(PLANNED_POWER,))
    except StudyPowerError:
        return text
    have = {row["condition"]: row.get("votes", 0) for row in summary.get("win_rates", [])}
    needs = [
        f"{line.condition}: about {line.ratings_per_condition:,} pairs against the baseline "
        f"(it has {have.get(line.condition, 0)})"
        for line in plan.lines
    ]
    shares = next(iter(plan.share_sources.values()), "")
    return (
        f"{text} To tell a condition from the baseline with {PLANNED_POWER:.0%} power at α = {plan.alpha:g} "
        f"({shares}; {plan.design_effect_text}) it would take {'; '.join(needs)}: about "
        f"{max(line.participants_per_condition for line in plan.lines):,} participants per condition at "
        f"{plan.items_per_participant} pairs each."
    )


def exclusion_sentence(exclusions: pd.DataFrame, *, applied: bool) -> str:
    """Who was excluded and why, in one sentence (the raters' table follows on the page)."""
    total = len(exclusions)
    if not applied:
        return f"Exclusions are off: the votes of all {total} raters are counted."
    excluded = exclusions[exclusions["excluded"].astype(bool)] if total else exclusions
    if excluded.empty:
        return f"No rater is excluded: the votes of all {total} raters are counted."
    counts = []
    for reason in EXCLUSION_REASONS.values():
        n = int(excluded["reasons"].str.contains(reason, regex=False).sum())
        if n:
            counts.append(f"{n} {reason}")
    return (
        f"{len(excluded)} of {total} raters are excluded by the study's declared rules and their votes are left "
        f"out: {'; '.join(counts)}."
    )


def table_html(name: str, data: bytes) -> tuple[str, str]:
    """(heading, HTML) of one output table: its readable columns only (columns with no number at all dropped),
    numbers rounded for reading."""
    heading, columns = TABLES.get(name, (name, None))
    frame = pd.read_csv(io.BytesIO(data)).replace(MEASURES)
    if columns is not None:
        frame = frame[[c for c in columns if c in frame.columns]].rename(columns=columns)
    else:
        frame = frame.rename(columns=lambda c: str(c).replace("_", " "))
    for column in frame.select_dtypes(include="bool").columns:
        frame[column] = frame[column].map({True: "yes", False: "no"})
    frame = frame.loc[:, frame.notna().mean() >= 0.5] if len(frame) else frame
    html = frame.to_html(
        index=False, classes="pw-table", border=0, na_rep="–", float_format=lambda v: f"{v:.2f}"
    )
    return heading, html


def summary_of(files: dict[str, bytes]) -> dict:
    return json.loads(files["summary.json"]) if "summary.json" in files else {}
