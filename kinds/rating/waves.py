"""The analysis of a follow-up wave (studies/waves.py): every condition of the family (the parent's stored
baseline and conditions, each wave's new conditions) in one analysis, so the tests against the stored baseline
are corrected across the whole family (by the wave's planned correction, Holm by default); and the drift test:
the wave's re-rating of the parent's baseline against the original ratings OF THE SAME RESPONSES, with a plain
warning when raters seem to have drifted (`drift_warning`, shown once: on its own line of the report, the
dashboard and `analyze`'s output, not among the notes).

The drift test is ONE test at the planned α: the difference of the top share between the re-ratings and the
original ratings of the same responses (each response weighing its re-ratings), with a standard error clustered
two ways, by rater and by response (analysis.clustered.twoway_clustered_difference), and Student's t with the
fewer raters on a side minus one degrees of freedom. The interval at 1 − α and the test agree by construction. A
re-rated response is matched with its original by its prompt's dialogue id and its sample index (the wave's
responses are copies of the parent's). Comparing the re-ratings with all the baseline's ratings by a χ² that
treats ratings as independent, or warning when either that χ² or a bootstrap interval said so, raised false alarms
at 8–18 % instead of 5 % (bench/inference.py measures that χ² beside the paired test).

Conditions are labelled `<condition> · <study> (<launch date>)`, so tables and figures say where each came
from. The re-rating condition is left out of the comparisons (it is the drift test's)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pandas as pd

from analysis import selectors, stats
from analysis.clustered import twoway_clustered_difference
from analysis.exclusions import ExclusionRules, participant_exclusion_flags
from analysis.services import AnalysisOptions
from studies.models import Response, Study
from studies.waves import RERATE_SUFFIX, family_members, parent_baseline

from .analysis import RatingAnalysis, rating_frame_analyze
from .frame import rating_rows_frame


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
    original: pd.DataFrame, rerated: pd.DataFrame, scale: stats.Scale, *, alpha: float
) -> tuple[pd.DataFrame, str]:
    """The re-rated baseline against its original ratings of the same responses (module doc). Both frames have
    participant_id, value and `response_key` (what matches a re-rated response with its original). Returns the
    one-row table and a warning ("" when the test does not reject at `alpha`)."""
    if original.empty or rerated.empty:
        note = "no re-ratings yet" if rerated.empty else "the parent's baseline has no ratings"
        return pd.DataFrame([{"note": note}]), ""
    paired = original[original["response_key"].isin(set(rerated["response_key"]))]
    top = scale.top_label
    line = {
        "n_original": int(len(original)),
        "n_rerated": int(len(rerated)),
        "responses": int(paired["response_key"].nunique()),
        "n_original_paired": int(len(paired)),
        "alpha": alpha,
        "ci_level": 1 - alpha,
    }
    if paired.empty:
        line["note"] = "none of the re-rated responses has an original rating"
        return pd.DataFrame([line]), ""
    joined = pd.concat([paired.assign(side=0), rerated.assign(side=1)], ignore_index=True)
    joined = joined[joined["response_key"].isin(set(paired["response_key"]))]
    rater = joined["side"].astype(str) + ":" + joined["participant_id"].astype(str)
    y = (joined["value"] == scale.top).to_numpy(float)
    try:
        d = twoway_clustered_difference(
            y, joined["side"].to_numpy(), joined["response_key"].to_numpy(), rater.to_numpy(), level=1 - alpha
        )
    except ValueError as exc:
        line["note"] = str(exc)
        return pd.DataFrame([line]), ""
    share_original = float(y[joined["side"].to_numpy() == 0].mean())
    share_rerated = float(y[joined["side"].to_numpy() == 1].mean())
    line.update(
        {
            f"{top}_share_original": share_original,
            f"{top}_share_rerated": share_rerated,
            "difference": d.estimate,
            "change": stats.top_change(share_original + d.estimate, share_original),
            "se": d.se,
            "t": d.z,
            "df": d.clusters - 1,
            "p": d.p,
            "ci_low": d.ci_low,
            "ci_high": d.ci_high,
        }
    )
    warning = ""
    if d.p < alpha:
        warning = (
            f"Rater drift: today's raters judge the parent's baseline responses differently from the original "
            f"raters. Re-rating {line['responses']} of them, they chose {top} {share_rerated:.0%} of the time, "
            f"against {share_original:.0%} originally on the same responses (difference {d.estimate:+.1%} points, "
            f"{1 - alpha:.0%} CI {d.ci_low:+.1%} to {d.ci_high:+.1%}; p = {d.p:.3g}). Part of any difference "
            "between the new conditions and the stored baseline may come from the raters, not the models."
        )
    return pd.DataFrame([line]), warning


def response_keys(rows: pd.DataFrame) -> pd.Series:
    """What matches a wave's re-rated response with its original: (prompt's dialogue id, sample index)."""
    keys = {
        pk: f"{dialogue}#{sample}"
        for pk, dialogue, sample in Response.objects.filter(pk__in=set(rows["response_id"])).values_list(
            "pk", "prompt__dialogue_id", "sample_index"
        )
    }
    return rows["response_id"].map(keys)


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
        rows = rating_rows_frame(study=member)
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
    rows = pd.concat(frames, ignore_index=True) if frames else rating_rows_frame(study=study)
    scale = stats.Scale.from_study_scale(study.scale)
    base = rating_frame_analyze(
        rows, study=study, conditions=conditions, baseline=baseline, scale=scale, options=options
    )
    result = WaveAnalysis(**{f.name: getattr(base, f.name) for f in fields(RatingAnalysis)})
    result.family = pd.DataFrame(family_lines)
    parent = Study.objects.get(pk=study.parent_id)
    parent_rows = rating_rows_frame(study=parent)
    original = parent_rows[parent_rows["condition"] == parent_baseline(parent).name]
    original = _kept(
        original, result.rules
    )  # the rules the wave's analysis applied (by default its declared)
    rerate = _kept(rerate, result.rules)
    original = original.assign(response_key=response_keys(original))
    rerate = rerate.assign(response_key=response_keys(rerate))
    result.drift, result.drift_warning = drift_test(original, rerate, scale, alpha=result.alpha)
    return result
