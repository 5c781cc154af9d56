"""Exclusion rules of a rating study: which participants they drop, whether they drop them evenly across
conditions, and whether the headline comparison depends on them.

Pure functions of DataFrames (the frame a kind's answers are read into: kinds/rating/frame.py `rating_rows_frame`); the declaration they
apply is `Study.exclusion_rules` (`studies.exclusion_rules`), or what the command line overrides.

Differential exclusion: excluding participants unevenly across conditions biases a between-subjects comparison
(e.g. dropping generous raters mostly from the LLM conditions lowers their Good share). For every rule the
participants it excludes are counted per condition and the conditions × (excluded, kept) table is tested: Pearson's
chi-square (no continuity correction) when every expected count is at least 5, else Fisher's exact test (2 × 2) or
Fisher's exact test by Monte-Carlo over tables with the same margins (more than two conditions; seeded). A p below
the study's α raises a plain warning.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import MonteCarloMethod, chi2_contingency, fisher_exact

from analysis import stats
from analysis.exclusion_predicates import INCOMPLETE_STATUSES, RULES, flags_frame, flags_one
from studies.exclusion_rules import STRAIGHT_LINING_DEFAULTS, exclusion_rules_normalise, exclusion_rules_words

RULE_NAMES = tuple(RULES)  # declared once, in analysis/exclusion_predicates.py
ANY_RULE = "any rule"
__all__ = ["INCOMPLETE_STATUSES", "RULE_NAMES", "ExclusionRules"]
MIN_EXPECTED = 5  # Cochran's rule: below this expected count the chi-square approximation is not trusted
MONTE_CARLO_TABLES = 9999

TEST_CHI2 = "chi-square"
TEST_FISHER = "Fisher's exact"
TEST_FISHER_MC = f"Fisher's exact (Monte-Carlo, {MONTE_CARLO_TABLES:,} tables)"


@dataclass(frozen=True)
class ExclusionRules:
    """The rules one analysis applies; the same rules give the same exclusions on every run.

    attention_checks: drop participants flagged for exclusion (failed more attention checks than the study allows).
    incomplete: drop participants who did not complete (returned, timed out, or never finished).
    min_median_response_ms: drop participants whose median response time is below this (None: rule off). Ratings
        without a recorded time (imported data) never trigger it.
    straight_lining_min_items: drop participants who gave the same value to every item, when they rated at least
        this many items (None: rule off) -- and, unless `straight_lining_identical_alone`, when a wrong attention
        check or a median response time below `straight_lining_corroborating_ms` corroborates it.
    authenticity: drop participants the authenticity score flags and a review did not clear, and those a review
        confirmed (`ParticipantAuthenticity.excluded`, studies/authenticity.py).
    """

    attention_checks: bool = True
    incomplete: bool = True
    min_median_response_ms: float | None = None
    straight_lining_min_items: int | None = None
    straight_lining_corroborating_ms: float = float(STRAIGHT_LINING_DEFAULTS["corroborating_median_ms"])
    straight_lining_identical_alone: bool = False
    authenticity: bool = False

    @classmethod
    def none(cls) -> ExclusionRules:
        return cls(attention_checks=False, incomplete=False)

    @classmethod
    def from_declared(cls, declared: dict) -> ExclusionRules:
        """The rules of a study's declaration (`Study.exclusion_rules`)."""
        rules = exclusion_rules_normalise(declared)
        too_fast, straight = rules["too_fast"], rules["straight_lining"]
        return cls(
            attention_checks=rules["attention_checks"],
            incomplete=rules["incomplete"],
            min_median_response_ms=float(too_fast["min_median_ms"]) if too_fast else None,
            straight_lining_min_items=int(straight["min_items"]) if straight else None,
            straight_lining_corroborating_ms=float(
                (straight or STRAIGHT_LINING_DEFAULTS)["corroborating_median_ms"]
            ),
            straight_lining_identical_alone=bool(straight and straight["identical_alone"]),
            authenticity=rules["authenticity"],
        )

    def as_declared(self) -> dict:
        """These rules in the declaration's JSON shape (so a report can show them beside the study's)."""
        return {
            "attention_checks": self.attention_checks,
            "incomplete": self.incomplete,
            "too_fast": {"min_median_ms": self.min_median_response_ms}
            if self.min_median_response_ms is not None
            else None,
            "straight_lining": {
                "min_items": self.straight_lining_min_items,
                "corroborating_median_ms": self.straight_lining_corroborating_ms,
                "identical_alone": self.straight_lining_identical_alone,
            }
            if self.straight_lining_min_items is not None
            else None,
            "authenticity": self.authenticity,
        }

    def describe(self) -> dict[str, str]:
        return exclusion_rules_words(self.as_declared())

    def is_on(self, rule: str) -> bool:
        return {
            "attention_checks": self.attention_checks,
            "incomplete": self.incomplete,
            "too_fast": self.min_median_response_ms is not None,
            "straight_lining": self.straight_lining_min_items is not None,
            "authenticity": self.authenticity,
        }[rule]


def participant_exclusion_flags(rows: pd.DataFrame, rules: ExclusionRules) -> pd.DataFrame:
    """One row per participant: their condition, a boolean column per rule and `excluded` (any rule)."""
    grouped = rows.groupby("participant_id", sort=True)
    per = pd.DataFrame(
        {
            "condition": grouped["condition"].first(),
            "n": grouped["value"].size(),
            "n_distinct": grouped["value"].nunique(),
            "median_ms": grouped["response_time_ms"].median(),
            "flagged": grouped["flagged_for_exclusion"].any(),
            "status": grouped["participant_status"].first(),
            "failures": grouped["attention_failures"].max(),
            "unauthentic": grouped["authenticity_excluded"].any(),
        }
    )
    flags = pd.DataFrame({"condition": per["condition"], **flags_frame(per, rules)}, index=per.index)
    flags["excluded"] = flags[list(RULE_NAMES)].any(axis=1)
    return flags


def participant_exclusion_flags_one(
    *,
    values: list[int],
    times_ms: list[float | None],
    flagged: bool,
    status: str,
    attention_failures: int,
    rules: ExclusionRules,
    authenticity_excluded: bool = False,
) -> dict[str, bool]:
    """The same rules for one participant's answers, for streamed exports (they see one participant at a time).
    Both are derived from the one declaration of the rules (analysis/exclusion_predicates.py)."""
    times = [t for t in times_ms if t is not None]
    one = {
        "flagged": flagged,
        "status": status,
        "failures": attention_failures,
        "unauthentic": authenticity_excluded,
        "median_ms": statistics.median(times) if times else None,
        "n": len(values),
        "n_distinct": len(set(values)),
    }
    out = flags_one(one, rules)
    out["excluded"] = any(out.values())
    return out


# --- Differential exclusion -----------------------------------------------------------------------------


@dataclass
class RateTest:
    test: str
    chi2: float
    dof: int
    p: float
    note: str = ""


def exclusion_rate_test(excluded: list[int], totals: list[int], *, seed: int) -> RateTest:
    """Do exclusion rates differ between conditions? `excluded[i]` of `totals[i]` participants of condition i.

    Pearson's chi-square on the conditions × (excluded, kept) table when every expected count is at least 5;
    otherwise Fisher's exact test (2 × 2) or its Monte-Carlo version over tables with the same margins (seeded, so
    the same data give the same p). The chi-square statistic is always reported for reference."""
    table = np.array([[e, t - e] for e, t in zip(excluded, totals, strict=True) if t > 0], dtype=np.int64)
    nan = float("nan")
    if len(table) < 2:
        return RateTest("", nan, 0, nan, "not testable: fewer than two conditions with participants")
    if table[:, 0].sum() == 0:
        return RateTest("", nan, 0, nan, "no participant excluded")
    if table[:, 1].sum() == 0:
        return RateTest("", nan, 0, nan, "every participant excluded")
    result = chi2_contingency(table, correction=False)
    statistic, dof = float(result.statistic), int(result.dof)
    if result.expected_freq.min() >= MIN_EXPECTED:
        return RateTest(TEST_CHI2, statistic, dof, float(result.pvalue))
    if table.shape == (2, 2):
        return RateTest(
            TEST_FISHER, statistic, dof, float(fisher_exact(table).pvalue), "small expected counts"
        )
    method = MonteCarloMethod(n_resamples=MONTE_CARLO_TABLES, rng=np.random.default_rng(seed))
    # SciPy answers some degenerate tables (one excluded participant among three conditions) with a one-element
    # array instead of a scalar.
    p = np.asarray(fisher_exact(table, method=method).pvalue).item()
    return RateTest(TEST_FISHER_MC, statistic, dof, p, "small expected counts")


def exclusions_apply(
    rows: pd.DataFrame,
    rules: ExclusionRules,
    *,
    conditions: list[str],
    alpha: float,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(kept rows, per-participant flags, summary).

    The summary has a line before exclusions, one per rule (the participants and ratings that rule alone drops; a
    participant caught by two rules counts under both), one for any rule, and one after exclusions. Every line
    counts participants per condition (`participants_<condition>`); each rule's line and the any-rule line carry the
    test of whether that rule's exclusion rates differ between conditions, and `differs` (p < alpha; empty on the
    lines without a test)."""
    flags = participant_exclusion_flags(rows, rules)
    ratings_per = rows.groupby("participant_id").size()
    described = rules.describe()
    totals = flags.groupby("condition").size().reindex(conditions, fill_value=0)

    def per_condition(mask: pd.Series) -> dict[str, int]:
        counts = flags.loc[mask, "condition"].value_counts().reindex(conditions, fill_value=0)
        return {f"participants_{c}": int(counts[c]) for c in conditions}

    def line(rule: str, definition: str, mask: pd.Series, *, test: bool) -> dict:
        hit = flags.index[mask]
        out = {
            "rule": rule,
            "definition": definition,
            "participants": int(len(hit)),
            "ratings": int(ratings_per.reindex(hit).sum()) if len(hit) else 0,
            **per_condition(mask),
            "test": "",
            "chi2": float("nan"),
            "dof": float("nan"),
            "p": float("nan"),
            "differs": None,  # no test on this line
            "note": "",
        }
        if test:
            counts = flags.loc[mask, "condition"].value_counts().reindex(conditions, fill_value=0)
            result = exclusion_rate_test(list(counts), list(totals), seed=seed)
            out.update(
                test=result.test,
                chi2=result.chi2,
                dof=result.dof if result.test else float("nan"),
                p=result.p,
                differs=bool(not math.isnan(result.p) and result.p < alpha),
                note=result.note,
            )
        return out

    everyone = pd.Series(True, index=flags.index)
    lines = [line("before exclusions", "", everyone, test=False)]
    for rule in RULE_NAMES:
        if rules.is_on(rule):
            lines.append(line(rule, described[rule], flags[rule], test=True))
        else:
            lines.append(line(rule, "off", flags[rule], test=False) | {"note": "rule off"})
    lines.append(line(ANY_RULE, "excluded by at least one rule", flags["excluded"], test=True))
    lines.append(line("after exclusions", "", ~flags["excluded"], test=False))
    excluded = flags.index[flags["excluded"]]
    kept = rows[~rows["participant_id"].isin(excluded)]
    summary = pd.DataFrame(lines)
    summary.loc[summary["rule"] == "after exclusions", "ratings"] = len(kept)
    return kept, flags, summary


def differential_warnings(summary: pd.DataFrame, *, alpha: float) -> list[str]:
    """A plain sentence for every rule whose exclusion rates differ between conditions."""
    out = []
    conditions = [c.removeprefix("participants_") for c in summary.columns if c.startswith("participants_")]
    by_rule = summary.set_index("rule")
    before = by_rule.loc["before exclusions"]
    # With one rule excluding anyone, the any-rule line is that rule again: one warning, not two.
    rules_hit = sum(int(by_rule.loc[rule, "participants"]) > 0 for rule in RULE_NAMES)
    for _, line in summary[summary["differs"].eq(True)].iterrows():
        if line["rule"] == ANY_RULE and rules_hit < 2:
            continue
        per = ", ".join(
            f"{c} {int(line[f'participants_{c}'])}/{int(before[f'participants_{c}'])}" for c in conditions
        )
        out.append(
            f"Exclusion rates differ between conditions for {line['rule']} ({per}; {line['test']} "
            f"p = {line['p']:.2g} < α = {alpha:g}, χ² = {line['chi2']:.1f}, df {int(line['dof'])}): excluding "
            "these participants changes who is compared in each condition and can bias the comparison; "
            "check the sensitivity line."
        )
    return out


def removal_notes(summary: pd.DataFrame) -> list[str]:
    """When the rules remove all or most ratings, say how many each rule removed (never a silent empty analysis)."""
    by_rule = summary.set_index("rule")
    before = int(by_rule.loc["before exclusions", "ratings"])
    after = int(by_rule.loc["after exclusions", "ratings"])
    if before == 0 or after > before / 2:
        return []
    per_rule = "; ".join(
        f"{rule} removed {int(by_rule.loc[rule, 'participants'])} participants "
        f"({int(by_rule.loc[rule, 'ratings'])} ratings)"
        for rule in RULE_NAMES
        if by_rule.loc[rule, "note"] != "rule off"
    )
    lead = (
        f"The exclusion rules removed every one of the {before} ratings"
        if after == 0
        else f"The exclusion rules removed {before - after} of {before} ratings ({100 * (before - after) / before:.0f} %)"
    )
    return [f"{lead}: {per_rule}. Check the declared rules, or analyse without exclusions to compare."]


# --- Sensitivity ----------------------------------------------------------------------------------------


def sensitivity_table(
    rows: pd.DataFrame,
    kept: pd.DataFrame,
    scale: stats.Scale,
    conditions: list[str],
    baseline: str,
    *,
    alpha: float,
) -> pd.DataFrame:
    """The headline comparison without and with the exclusions: per condition, participants, the top value's share
    (%), and for each other condition its difference from the baseline in points and relative (the seed study's
    headline), and the p of the 2×2 top-vs-rest Yates test against the baseline. `conclusion_changes`: that test
    is significant at alpha on one side only."""
    top = f"pct_{scale.top_label}"
    sides = {}
    for side, frame in (("without", rows), ("with", kept)):
        counts = stats.counts_table(frame, scale, ["condition"]).reindex(conditions, fill_value=0)
        people = frame.groupby("condition")["participant_id"].nunique().reindex(conditions, fill_value=0)
        sides[side] = (counts, people)
    lines = []
    for condition in conditions:
        line: dict = {"condition": condition}
        for side, (counts, people) in sides.items():
            n = counts.loc[condition].sum()
            base_n = counts.loc[baseline].sum()
            share = counts.loc[condition].iloc[-1] / n if n else float("nan")
            base_share = counts.loc[baseline].iloc[-1] / base_n if base_n else float("nan")
            line[f"participants_{side}"] = int(people[condition])
            line[f"{top}_{side}"] = 100 * share
            if condition == baseline:
                continue
            line[f"diff_points_{side}"] = 100 * (share - base_share)
            line[f"change_{side}"] = stats.top_change(share, base_share)
            pair = np.vstack([counts.loc[condition].to_numpy(), counts.loc[baseline].to_numpy()])
            line[f"p_{side}"] = stats.chi_square(stats.top_vs_rest(pair), yates=True).p
        if condition != baseline:
            p_without, p_with = line["p_without"], line["p_with"]
            line["conclusion_changes"] = bool(
                not (math.isnan(p_without) or math.isnan(p_with)) and (p_without < alpha) != (p_with < alpha)
            )
        lines.append(line)
    frame = pd.DataFrame(lines)
    # Each measure without and with the exclusions side by side.
    order = ["condition"] + [
        f"{measure}_{side}"
        for measure in ("participants", top, "diff_points", "change", "p")
        for side in ("without", "with")
    ]
    return frame[[c for c in [*order, "conclusion_changes"] if c in frame.columns]]


def sensitivity_sentences(
    table: pd.DataFrame,
    scale: stats.Scale,
    baseline: str,
    *,
    alpha: float,
    leads: tuple[str, str] = ("Without exclusions", "With the exclusions"),
    subject: str = "the exclusions",
) -> list[str]:
    """The sensitivity line in words: the headline without and with the exclusions (`leads` name the two
    sides, `subject` what differs between them), and whether the conclusion at alpha depends on them."""
    if table.empty:
        return []
    top = f"pct_{scale.top_label}"
    out = []
    for side, lead in zip(("without", "with"), leads, strict=True):
        if table[f"participants_{side}"].sum() == 0:
            out.append(f"{lead}: no ratings are left.")
            continue
        parts = []
        for _, line in table.iterrows():
            share, change = line[f"{top}_{side}"], line.get(f"change_{side}", float("nan"))
            if share != share:  # NaN: no participant of this condition on this side
                parts.append(f"{line['condition']}: no ratings")
                continue
            text = f"{line['condition']} {share:.1f} % {scale.top_label}"
            if line["condition"] != baseline and change == change:
                text += f" ({line[f'diff_points_{side}']:+.1f} points, {100 * change:+.1f} % vs {baseline})"
            parts.append(text)
        out.append(f"{lead}: " + "; ".join(parts) + ".")
    comparable = "p_with" in table and "p_without" in table and table["p_with"].notna().any()
    changed = table.loc[table["conclusion_changes"].eq(True), "condition"].tolist() if comparable else []
    if changed:
        out.append(
            f"The 2×2 test against {baseline} is significant at α = {alpha:g} on one side only for "
            f"{', '.join(changed)}: that conclusion depends on {subject}."
        )
    elif comparable:
        out.append(
            f"At α = {alpha:g}, every comparison with {baseline} reaches the same conclusion with and without "
            f"{subject}."
        )
    else:
        out.append(f"No comparison with {baseline} can be tested with {subject}.")
    return out
