"""EmotionBench scoring and analysis: how subjects feel by default and after imagining a situation.

Scoring: answers are mapped to items (runs store item numbers, whatever order they were shown in), reversed
items score `scale_min + scale_max - x` (EmotionBench's `scale - x`, with its `scale` = min + max), and each
category is the sum of its items (×2 for SUM*2 instruments).

The change test is the paper's: for a group of situations, compare the evoked scores with the default scores
by an F-test for equal variances (larger variance over the smaller, two-sided), then Student's t-test if the
F-test is not significant at α, else Welch's. The change is marked ↑ / ↓ when the t-test is significant at α,
− otherwise. For human participants, who answer once before and once after, a paired t-test is reported too;
their marks in the side-by-side table come from the paired test (the design is within subjects).

The default sample of a group: for subjects who answered both (participants), the default runs of the
subjects in that group; for models, whose default runs belong to no situation, all of the condition's
default runs (as in the paper).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

# The F and t tails as scipy.special ufuncs (the same functions scipy.stats' distributions call, without their
# per-call argument checking: the published data alone needs ~7,000 of them).
from scipy import special

from studies.emotionbench.data import EMOTIONS
from studies.kinds import questionnaire_with_instrument
from studies.models import Condition, Instrument, QuestionnaireAnswer, QuestionnaireRun, Study
from studies.selectors import study_planned_analysis

UP, DOWN, SAME = "↑", "↓", "−"


# --- Scoring --------------------------------------------------------------------------------------------


def instrument_score_runs(*, instrument: Instrument, answers: pd.DataFrame) -> pd.DataFrame:
    """Category scores of runs from a wide frame (index: run, columns: item numbers, values: raw answers).

    A run missing an item of a category gets NaN for that category (never a partial sum).
    """
    items = list(instrument.items.all())
    scored = answers.reindex(columns=[i.number for i in items]).astype(float)
    reverse = [i.number for i in items if i.reverse_scored]
    if reverse:
        scored[reverse] = instrument.scale_min + instrument.scale_max - scored[reverse]
    factor = 2 if instrument.compute_mode == Instrument.ComputeMode.SUM_X2 else 1
    out = pd.DataFrame(index=answers.index)
    for category in instrument.categories.all():
        out[category.name] = scored[category.item_numbers].sum(axis=1, min_count=len(category.item_numbers))
        out.loc[scored[category.item_numbers].isna().any(axis=1), category.name] = np.nan
        out[category.name] *= factor
    return out


def questionnaire_scores(*, study: Study) -> pd.DataFrame:
    """One row per run of the study with its category scores and where it belongs.

    Columns: run_id, condition, condition_label, condition_kind, condition_position, subject_key, phase,
    run_index, source, situation_id, situation_code, emotion, factor_index, factor_name, then one column per
    category of the study's instrument.
    """
    instrument = questionnaire_with_instrument(study).instrument
    runs = pd.DataFrame.from_records(
        QuestionnaireRun.objects.filter(study=study).values_list(
            "id",
            "condition__name",
            "condition__label",
            "condition__kind",
            "condition__position",
            "subject_key",
            "phase",
            "run_index",
            "source",
            "situation_id",
            "situation__emotion",
            "situation__factor_index",
            "situation__factor_name",
            "situation__index",
        ),
        columns=[
            "run_id",
            "condition",
            "condition_label",
            "condition_kind",
            "condition_position",
            "subject_key",
            "phase",
            "run_index",
            "source",
            "situation_id",
            "emotion",
            "factor_index",
            "factor_name",
            "situation_index",
        ],
    )
    categories = list(instrument.categories.values_list("name", flat=True))
    if runs.empty:
        return runs.assign(
            situation_code=pd.Series(dtype=str), **{c: pd.Series(dtype=float) for c in categories}
        )
    answers = pd.DataFrame.from_records(
        QuestionnaireAnswer.objects.filter(run__study=study).values_list("run_id", "item_number", "value"),
        columns=["run_id", "item_number", "value"],
    )
    wide = answers.pivot(index="run_id", columns="item_number", values="value")
    scores = instrument_score_runs(instrument=instrument, answers=wide)
    runs = runs.join(scores, on="run_id")
    runs["condition_label"] = runs["condition_label"].where(runs["condition_label"] != "", runs["condition"])
    runs["situation_code"] = [
        f"{e}-{int(f)}_scenario-{int(i)}" if isinstance(e, str) else ""
        for e, f, i in zip(runs["emotion"], runs["factor_index"], runs["situation_index"], strict=True)
    ]
    return runs.dropna(subset=categories, how="all")


# --- Tests ----------------------------------------------------------------------------------------------


@dataclass
class ChangeTest:
    """Default vs evoked scores of one category in one group, and the test of the change."""

    n_default: int
    mean_default: float
    sd_default: float
    n_evoked: int
    mean_evoked: float
    sd_evoked: float
    test: str  # "student", "welch", "paired" or "none" (too few runs)
    f_value: float
    f_p: float
    t_value: float
    p_value: float
    alpha: float

    @property
    def change(self) -> float:
        return self.mean_evoked - self.mean_default

    @property
    def mark(self) -> str:
        if self.test == "none" or math.isnan(self.p_value) or self.p_value >= self.alpha:
            return SAME
        return UP if self.change > 0 else DOWN

    def as_dict(self) -> dict:
        return {**asdict(self), "change": self.change, "mark": self.mark}


def _describe(values: np.ndarray) -> tuple[int, float, float]:
    n = len(values)
    mean = float(np.mean(values)) if n else math.nan
    sd = float(np.std(values, ddof=1)) if n > 1 else math.nan
    return n, mean, sd


def change_test(*, default: np.ndarray, evoked: np.ndarray, alpha: float) -> ChangeTest:
    """The paper's two-sample test of evoked vs default (F-test, then Student's or Welch's t-test).

    F = larger variance / smaller variance with the matching degrees of freedom, p = 2 × upper tail (capped at
    1); equal variances are assumed when p > α. Both samples constant: p = 1 if the means are equal, else 0
    (a t statistic would divide by zero; the paper adds 1e-8 to the SDs, which gives the same verdict).
    """
    default = np.asarray(default, dtype=float)
    evoked = np.asarray(evoked, dtype=float)
    default, evoked = default[~np.isnan(default)], evoked[~np.isnan(evoked)]
    n1, m1, s1 = _describe(default)
    n2, m2, s2 = _describe(evoked)
    if n1 < 2 or n2 < 2:
        return ChangeTest(n1, m1, s1, n2, m2, s2, "none", math.nan, math.nan, math.nan, math.nan, alpha)
    v1, v2 = s1**2, s2**2
    if v1 == 0 and v2 == 0:
        p = 1.0 if m1 == m2 else 0.0
        t = 0.0 if m1 == m2 else math.copysign(math.inf, m2 - m1)
        return ChangeTest(n1, m1, s1, n2, m2, s2, "student", math.nan, math.nan, t, p, alpha)
    if v1 >= v2:
        f_value, dfn, dfd = (v1 / v2 if v2 else math.inf), n1 - 1, n2 - 1
    else:
        f_value, dfn, dfd = (v2 / v1 if v1 else math.inf), n2 - 1, n1 - 1
    f_p = min(1.0, 2 * float(special.fdtrc(dfn, dfd, f_value)))
    equal_var = f_p > alpha
    # Student's / Welch's t from the summary statistics (what scipy.stats.ttest_ind computes, without its
    # per-call overhead: the analysis runs thousands of tests; the suite checks these against scipy).
    if equal_var:
        df = n1 + n2 - 2
        se = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / df * (1 / n1 + 1 / n2))
    else:
        a1, a2 = v1 / n1, v2 / n2
        se = math.sqrt(a1 + a2)
        df = (a1 + a2) ** 2 / (a1**2 / (n1 - 1) + a2**2 / (n2 - 1))
    t_value = (m2 - m1) / se
    p_value = float(2 * special.stdtr(df, -abs(t_value)))
    return ChangeTest(
        n1,
        m1,
        s1,
        n2,
        m2,
        s2,
        "student" if equal_var else "welch",
        float(f_value),
        f_p,
        t_value,
        p_value,
        alpha,
    )


def paired_change_test(*, default: np.ndarray, evoked: np.ndarray, alpha: float) -> ChangeTest:
    """Paired t-test of evoked vs default for subjects who answered both (arrays aligned by subject)."""
    default = np.asarray(default, dtype=float)
    evoked = np.asarray(evoked, dtype=float)
    keep = ~(np.isnan(default) | np.isnan(evoked))
    default, evoked = default[keep], evoked[keep]
    n1, m1, s1 = _describe(default)
    n2, m2, s2 = _describe(evoked)
    if n1 < 2:
        return ChangeTest(n1, m1, s1, n2, m2, s2, "none", math.nan, math.nan, math.nan, math.nan, alpha)
    differences = evoked - default
    if np.all(differences == differences[0]):
        p = 1.0 if differences[0] == 0 else 0.0
        t = 0.0 if differences[0] == 0 else math.copysign(math.inf, differences[0])
        return ChangeTest(n1, m1, s1, n2, m2, s2, "paired", math.nan, math.nan, t, p, alpha)
    n = len(differences)
    t_value = float(np.mean(differences) / (np.std(differences, ddof=1) / math.sqrt(n)))
    p_value = float(2 * special.stdtr(n - 1, -abs(t_value)))
    return ChangeTest(n1, m1, s1, n2, m2, s2, "paired", math.nan, math.nan, t_value, p_value, alpha)


# --- The analysis ---------------------------------------------------------------------------------------


@dataclass
class GroupResult:
    condition: str
    condition_label: str
    condition_kind: str
    level: str  # "overall", "emotion", "factor" or "situation"
    group: str  # "Overall", an emotion, "Anger-1 Facing Self-Opinioned People", a situation code
    category: str
    two_sample: ChangeTest
    paired: ChangeTest | None

    @property
    def headline(self) -> ChangeTest:
        """The test behind the mark: paired where subjects answered both, else the paper's two-sample test."""
        return self.paired if self.paired is not None and self.paired.test != "none" else self.two_sample

    def row(self) -> dict:
        out = {
            "condition": self.condition,
            "condition_label": self.condition_label,
            "level": self.level,
            "group": self.group,
            "category": self.category,
        }
        out.update({f"{k}": v for k, v in self.two_sample.as_dict().items() if k != "alpha"})
        if self.paired is not None:
            out.update(
                {
                    f"paired_{k}": v
                    for k, v in self.paired.as_dict().items()
                    if k in ("t_value", "p_value", "mark", "n_default")
                }
            )
        out["mark"] = self.headline.mark
        return out


@dataclass
class EmotionBenchAnalysis:
    study: Study
    alpha: float
    categories: list[str]
    conditions: list[tuple[str, str, str]]  # (name, label, kind) in display order
    results: list[GroupResult]
    # The pre-registered primary test ({"key", "name"}): "change", the test behind each mark (GroupResult.headline).
    primary_test: dict = field(default_factory=dict)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.row() for r in self.results])

    def get(self, *, condition: str, level: str, group: str, category: str) -> GroupResult | None:
        for result in self.results:
            if (result.condition, result.level, result.group, result.category) == (
                condition,
                level,
                group,
                category,
            ):
                return result
        return None


def emotionbench_analyse(
    *, study: Study, alpha: float | None = None, scores: pd.DataFrame | None = None
) -> EmotionBenchAnalysis:
    """Default and evoked mean ± SD of every category, overall, per emotion, per factor and per situation, for
    every condition, with the change tests (module docstring). α defaults to the study's significance level."""
    settings = questionnaire_with_instrument(study)
    alpha = settings.significance_level if alpha is None else alpha
    scores = questionnaire_scores(study=study) if scores is None else scores
    categories = list(settings.instrument.categories.values_list("name", flat=True))
    conditions = [
        (c.name, c.label or c.name, c.kind)
        for c in Condition.objects.filter(study=study).order_by("kind", "position", "name")
    ]
    # Humans first, as in the paper's tables.
    conditions.sort(key=lambda c: (c[2] != Condition.Kind.HUMAN,))
    results: list[GroupResult] = []
    for name, label, kind in conditions:
        runs = scores[scores["condition"] == name]
        if runs.empty:
            continue
        default = runs[runs["phase"] == QuestionnaireRun.Phase.DEFAULT]
        evoked = runs[runs["phase"] == QuestionnaireRun.Phase.EVOKED]
        paired_design = bool(set(default["subject_key"]) & set(evoked["subject_key"]))
        default_by_subject = default.drop_duplicates("subject_key").set_index("subject_key")
        groups: list[tuple[str, str, pd.DataFrame]] = [("overall", "Overall", evoked)]
        for emotion in EMOTIONS:
            subset = evoked[evoked["emotion"] == emotion]
            if not subset.empty:
                groups.append(("emotion", emotion, subset))
        for (emotion, factor_index), subset in evoked.groupby(["emotion", "factor_index"], sort=False):
            groups.append(
                ("factor", f"{emotion}-{int(factor_index)} {subset['factor_name'].iloc[0]}", subset)
            )
        for code, subset in evoked.groupby("situation_code", sort=True):
            groups.append(("situation", code, subset))
        for level, group, subset in groups:
            if paired_design:
                keys = [k for k in subset["subject_key"] if k in default_by_subject.index]
                group_default = default_by_subject.loc[keys] if keys else default.iloc[0:0]
            else:
                group_default = default
            for category in categories:
                two_sample = change_test(
                    default=group_default[category].to_numpy(),
                    evoked=subset[category].to_numpy(),
                    alpha=alpha,
                )
                paired = None
                if paired_design:
                    aligned = subset[subset["subject_key"].isin(default_by_subject.index)]
                    paired = paired_change_test(
                        default=default_by_subject.loc[aligned["subject_key"], category].to_numpy(),
                        evoked=aligned[category].to_numpy(),
                        alpha=alpha,
                    )
                results.append(GroupResult(name, label, kind, level, group, category, two_sample, paired))
    return EmotionBenchAnalysis(
        study=study,
        alpha=alpha,
        categories=categories,
        conditions=conditions,
        results=results,
        primary_test=study_planned_analysis(study=study)["primary_test"] or {},
    )
