"""The EmotionBench analysis presented: the paper's side-by-side table, the per-situation agreement, the text
report and the files `analyze` writes (kinds.questionnaire.analysis computes what these show)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from studies.emotionbench.data import EMOTIONS
from studies.models import Condition

from .analysis import DOWN, SAME, UP, ChangeTest, EmotionBenchAnalysis


def _fmt_mean_sd(test: ChangeTest) -> str:
    if math.isnan(test.mean_default):
        return "n/a"
    sd = "n/a" if math.isnan(test.sd_default) else f"{test.sd_default:.1f}"
    return f"{test.mean_default:.1f}±{sd}"


def _fmt_change(test: ChangeTest, mark: str) -> str:
    if math.isnan(test.mean_evoked) or math.isnan(test.mean_default):
        return "n/a"
    return f"{mark} ({test.change:+.1f})"


def emotionbench_side_by_side(*, analysis: EmotionBenchAnalysis) -> pd.DataFrame:
    """The paper's table with humans beside the models: per condition and category, the default mean ± SD,
    then per emotion and overall the change of the mean with its mark."""
    rows = []
    columns = ["Default", *EMOTIONS, "Overall"]
    for name, label, _kind in analysis.conditions:
        for category in analysis.categories:
            overall = analysis.get(condition=name, level="overall", group="Overall", category=category)
            if overall is None:
                continue
            row = {
                "condition": label,
                "category": _abbreviate(category),
                "Default": _fmt_mean_sd(overall.two_sample),
            }
            for group in [*EMOTIONS, "Overall"]:
                level = "overall" if group == "Overall" else "emotion"
                result = analysis.get(condition=name, level=level, group=group, category=category)
                row[group] = "n/a" if result is None else _fmt_change(result.headline, result.headline.mark)
            rows.append(row)
    return pd.DataFrame(rows, columns=["condition", "category", *columns])


def _abbreviate(category: str) -> str:
    return {"Positive Affect": "PA", "Negative Affect": "NA"}.get(category, category)


def emotionbench_situation_agreement(*, analysis: EmotionBenchAnalysis) -> pd.DataFrame:
    """Do models move the way humans move, situation by situation? Per model and category: Pearson's r between
    the model's and the humans' per-situation change (evoked mean − default mean), over the situations both
    answered, and the share of situations whose change has the same sign."""
    humans = [c for c in analysis.conditions if c[2] == Condition.Kind.HUMAN]
    rows = []
    if not humans:
        return pd.DataFrame(
            rows, columns=["condition", "category", "situations", "pearson_r", "same_direction"]
        )
    baseline = humans[0][0]
    for name, label, _kind in analysis.conditions:
        if name == baseline:
            continue
        for category in analysis.categories:
            pairs = []
            for result in analysis.results:
                if result.condition != name or result.level != "situation" or result.category != category:
                    continue
                human = analysis.get(
                    condition=baseline, level="situation", group=result.group, category=category
                )
                if human is None:
                    continue
                model_change, human_change = result.two_sample.change, human.two_sample.change
                if not (math.isnan(model_change) or math.isnan(human_change)):
                    pairs.append((model_change, human_change))
            r = math.nan
            if len(pairs) > 2:
                x, y = np.array(pairs).T
                if x.std() > 0 and y.std() > 0:
                    r = float(np.corrcoef(x, y)[0, 1])
            same = float(np.mean([np.sign(a) == np.sign(b) for a, b in pairs])) if pairs else math.nan
            rows.append(
                {"condition": label, "category": _abbreviate(category), "situations": len(pairs),
                 "pearson_r": r, "same_direction": same}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["condition", "category", "situations", "pearson_r", "same_direction"])


def emotionbench_report_text(*, analysis: EmotionBenchAnalysis) -> str:
    """The side-by-side table as plain text, with a legend, and the situation-level agreement with humans."""
    agreement = emotionbench_situation_agreement(analysis=analysis)
    table = emotionbench_side_by_side(analysis=analysis)
    legend = (
        f"EmotionBench: {analysis.study.title} ({analysis.study.slug}); α = {analysis.alpha}\n"
        "Default: mean±SD of the default runs. Emotion columns: change of the mean (evoked − default) with "
        f"{UP} significant increase, {DOWN} significant decrease, {SAME} no significant change.\n"
        "Models: F-test then Student's/Welch's t-test; humans: paired t-test over participants who answered both.\n"
    )
    if analysis.primary_test:
        legend += f"Primary test (as pre-registered): {analysis.primary_test['name']}.\n"
    text = legend + "\n" + table.to_string(index=False)
    if not agreement.empty:
        text += (
            "\n\nSituation by situation, against the humans: Pearson's r of the per-situation change, and the "
            "share of situations changing in the same direction.\n"
            + agreement.to_string(index=False, float_format=lambda v: f"{v:.2f}")
        )
    return text


def emotionbench_report_write(*, analysis: EmotionBenchAnalysis, out_dir) -> list:
    """Write the analysis into `out_dir`: every group and test (CSV), the side-by-side table (CSV and text) and
    a figure of the per-emotion change of each category per condition (PNG and SVG). Returns the paths."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    groups = out / "emotionbench_groups.csv"
    analysis.frame().to_csv(groups, index=False)
    table = out / "emotionbench_table.csv"
    emotionbench_side_by_side(analysis=analysis).to_csv(table, index=False)
    agreement = out / "emotionbench_situation_agreement.csv"
    emotionbench_situation_agreement(analysis=analysis).to_csv(agreement, index=False)
    written.append(agreement)
    text = out / "emotionbench_table.txt"
    text.write_text(emotionbench_report_text(analysis=analysis) + "\n", encoding="utf-8")
    written += [groups, table, text]
    categories = analysis.categories[:2] if len(analysis.categories) > 2 else analysis.categories
    fig, axes = plt.subplots(1, len(categories), figsize=(6 * len(categories), 4.5), squeeze=False)
    names = [
        c
        for c in analysis.conditions
        if analysis.get(condition=c[0], level="overall", group="Overall", category=categories[0])
    ]
    width = 0.8 / max(len(names), 1)
    for ax, category in zip(axes[0], categories, strict=True):
        for i, (name, label, _kind) in enumerate(names):
            changes = []
            for emotion in EMOTIONS:
                result = analysis.get(condition=name, level="emotion", group=emotion, category=category)
                changes.append(result.headline.change if result else np.nan)
            ax.bar(np.arange(len(EMOTIONS)) + i * width, changes, width, label=label)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(np.arange(len(EMOTIONS)) + 0.4 - width / 2, EMOTIONS, rotation=35, ha="right")
        ax.set_title(f"{category}: evoked − default")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    for suffix in ("png", "svg"):
        path = out / f"emotionbench_change.{suffix}"
        fig.savefig(path)
        written.append(path)
    plt.close(fig)
    return written
