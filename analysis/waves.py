"""The analysis of a follow-up wave (studies/waves.py): every condition of the family (the parent's stored
baseline and conditions, each wave's new conditions) in one analysis, so the tests against the stored baseline
are corrected across the whole family (by the wave's planned correction, Holm by default); and the drift test:
the wave's re-rating of the parent's baseline against the original ratings (χ² and the top-share difference
with a participant bootstrap CI), with a plain warning when raters seem to have drifted (`drift_warning`, shown once: on its own line of the report, the
dashboard and `analyze`'s output, not among the notes).

Conditions are labelled `<condition> · <study> (<launch date>)`, so tables and figures say where each came
from. The re-rating condition is left out of the comparisons (it is the drift test's)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from analysis import selectors, stats
from analysis.exclusions import ExclusionRules, participant_exclusion_flags
from analysis.services import AnalysisOptions, RatingAnalysis, rating_frame_analyze
from studies.models import Study
from studies.waves import RERATE_SUFFIX, family_members, parent_baseline


@dataclass
class WaveAnalysis(RatingAnalysis):
    family: pd.DataFrame = field(default_factory=pd.DataFrame)
    drift: pd.DataFrame = field(default_factory=pd.DataFrame)
    drift_warning: str = ""

    def tables(self) -> dict[str, pd.DataFrame]:
        return {**super().tables(), "family": self.family, "drift": self.drift}

    def summary(self) -> dict:
        out = super().summary()
        out["family"] = self.family.to_dict(orient="records")
        out["drift"] = self.drift.to_dict(orient="records")
        out["drift_warning"] = self.drift_warning
        return out


def condition_label(study: Study, condition: str) -> str:
    when = study.launched_at or study.closed_at or study.created_at
    return f"{condition} · {study.slug} ({when:%Y-%m-%d})"


def _kept(rows: pd.DataFrame, rules: ExclusionRules) -> pd.DataFrame:
    """`rows` without the participants `rules` exclude."""
    if rows.empty:
        return rows
    flags = participant_exclusion_flags(rows, rules)
    return rows[~rows["participant_id"].isin(flags.index[flags["excluded"]])]


def drift_test(
    original: pd.DataFrame, rerated: pd.DataFrame, scale: stats.Scale, *, b: int, seed: int, alpha: float
) -> tuple[pd.DataFrame, str]:
    """The re-rated baseline against its original ratings: a 2 × scale χ² (no correction) and the change of
    the top share with a percentile bootstrap CI at 1 − alpha (participants resampled). Returns the one-row
    table and a warning ("" when neither the test nor the interval shows drift)."""
    if original.empty or rerated.empty:
        note = "no re-ratings yet" if rerated.empty else "the parent's baseline has no ratings"
        return pd.DataFrame([{"note": note}]), ""
    joined = pd.concat([original.assign(condition="original"), rerated.assign(condition="rerated")])
    counts = stats.counts_table(joined, scale, ["condition"]).reindex(["original", "rerated"]).fillna(0)
    test = stats.chi_square(counts.to_numpy(dtype=float), yates=False)
    level = 1 - alpha  # the interval and the test decide at the same, planned, α
    _, change = stats.bootstrap_shares(
        joined, scale, ["original", "rerated"], "original", b=b, seed=seed, level=level
    )
    row = change.iloc[0] if not change.empty else None
    top = scale.top_label
    line = {
        "n_original": int(len(original)),
        "n_rerated": int(len(rerated)),
        "chi2": test.statistic,
        "dof": test.dof,
        "p": test.p,
        f"{top}_share_original": float((original["value"] == scale.top).mean()),
        f"{top}_share_rerated": float((rerated["value"] == scale.top).mean()),
        "change": float(row["change"]) if row is not None else np.nan,
        "ci_low": float(row["ci_low"]) if row is not None else np.nan,
        "ci_high": float(row["ci_high"]) if row is not None else np.nan,
        "ci_level": level,
        "alpha": alpha,
    }
    significant = (not np.isnan(line["p"]) and line["p"] < alpha) or (
        row is not None and (line["ci_low"] > 0 or line["ci_high"] < 0)
    )
    warning = ""
    if significant:
        warning = (
            f"Rater drift: today's raters judge the parent's baseline responses differently from the original "
            f"raters. Re-rating them, they chose {top} {line[f'{top}_share_rerated']:.0%} of the time, against "
            f"{line[f'{top}_share_original']:.0%} originally (relative change {line['change']:+.0%}, {level:.0%} CI "
            f"{line['ci_low']:+.0%} to {line['ci_high']:+.0%}; χ² p = {line['p']:.3g}). Part of any difference "
            "between the new conditions and the stored baseline may come from the raters, not the models."
        )
    return pd.DataFrame([line]), warning


def wave_analyze(*, study: Study, options: AnalysisOptions) -> WaveAnalysis:
    """The analysis of a wave and its family (see the module docstring)."""
    if options.seed is None:
        options.seed = int(study.seed)
    members = family_members(study)
    root = members[0]
    root_baseline = parent_baseline(root)
    baseline = condition_label(root, root_baseline.name)
    frames, conditions, family_lines = [], [], []
    rerate = pd.DataFrame()
    for member in members:
        rows = selectors.rating_rows_frame(study=member)
        for info in selectors.condition_list(study=member):
            label = condition_label(member, info.name)
            part = rows[rows["condition"] == info.name]
            if info.name.endswith(RERATE_SUFFIX) and member.parent_id is not None:
                if member.pk == study.pk:
                    rerate = part
                continue
            frames.append(part.assign(condition=label))
            conditions.append(label)
            family_lines.append(
                {
                    "condition": label,
                    "study": member.slug,
                    "wave": members.index(member),
                    "ratings": len(part),
                }
            )
    rows = pd.concat(frames, ignore_index=True) if frames else selectors.rating_rows_frame(study=study)
    scale = stats.Scale.from_study_scale(study.scale)
    base = rating_frame_analyze(
        rows, study=study, conditions=conditions, baseline=baseline, scale=scale, options=options
    )
    result = WaveAnalysis(**{f.name: getattr(base, f.name) for f in fields(RatingAnalysis)})
    result.family = pd.DataFrame(family_lines)
    parent = Study.objects.get(pk=study.parent_id)
    parent_rows = selectors.rating_rows_frame(study=parent)
    original = parent_rows[parent_rows["condition"] == parent_baseline(parent).name]
    original = _kept(
        original, result.rules
    )  # the rules the wave's analysis applied (by default its declared)
    rerate = _kept(rerate, result.rules)
    result.drift, result.drift_warning = drift_test(
        original, rerate, scale, b=options.bootstrap_samples, seed=options.seed + 2, alpha=result.alpha
    )
    return result
