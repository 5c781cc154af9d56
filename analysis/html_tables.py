"""The analysts' pages' tables, whatever the kind (the kind-neutral page frame, with analysis/contents.py and
templates/analysis/_style.html): a DataFrame as an escaped HTML table people can read and scroll, numbers written
to four significant digits."""

from __future__ import annotations

import pandas as pd
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from analysis import stats

TEST_SHORT = {
    stats.TEST_OMNIBUS: "omnibus χ²",
    stats.TEST_2XK: "χ² 2×k vs baseline",
    stats.TEST_2X2: "χ² 2×2 top vs rest (Yates)",
    stats.TEST_CLUSTERED: "top share, clustered Wald (primary)",
}
# What people read above the columns of the tests' HTML tables (the CSV files keep the short names scripts use).
COLUMN_LABELS = {
    "scope": "Scope", "group": "Group", "test": "Test", "comparison": "Comparison", "n": "Ratings (n)",
    "chi2": "χ²", "dof": "df", "p": "p", "p_holm": "p (Holm)", "p_adjusted": "p (adjusted)",
    "significant": "Significant", "cramers_v": "Cramér's V",
    "top_share": "Top share", "top_share_baseline": "Top share, baseline", "change": "Relative change",
    "min_expected": "Smallest expected count", "small_sample": "Sample size", "p_exact": "Fisher's exact p",
    "procedure": "Procedure", "z": "z", "difference": "Difference (points)", "ci_low": "95 % CI low",
    "ci_high": "95 % CI high", "design_effect": "Design effect",
}  # fmt: skip
SMALL_SAMPLE_MARK = "too few: χ² unreliable"


def number_text(value) -> str:
    if isinstance(value, float):
        if value != value:
            return ""
        if abs(value) != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.3g}"
        return f"{value:.4g}"
    return str(value)


def html_table(
    frame: pd.DataFrame,
    *,
    columns: list[str] | None = None,
    caption: str = "",
    label: str = "",
    readable: bool = False,
    labels: dict[str, str] | None = None,
) -> SafeString:
    """A DataFrame as an escaped HTML table (pandas escapes cell text), in a scroll area that the keyboard can
    reach (tabindex=0, a named region) since wide tables scroll sideways on small screens. `readable`: the
    columns get their COLUMN_LABELS (`labels` overrides some) and small-sample rows a plain-words mark."""
    if frame is None or frame.empty:
        return mark_safe("<p class='empty'>No rows.</p>")
    if columns:
        frame = frame[[c for c in columns if c in frame.columns]]
    if "test" in frame.columns:
        frame = frame.assign(test=frame["test"].map(lambda t: TEST_SHORT.get(t, t)))
    if readable:
        if "small_sample" in frame.columns:
            frame = frame.assign(
                small_sample=frame["small_sample"].map(lambda s: SMALL_SAMPLE_MARK if s else "ok")
            )
        if "significant" in frame.columns:
            frame = frame.assign(significant=frame["significant"].map(lambda s: "yes" if s is True else "no"))
        frame = frame.rename(columns={**COLUMN_LABELS, **(labels or {})})
    html = frame.to_html(
        index=False, border=0, classes="data", na_rep="", formatters=None, float_format=number_text
    )
    html = html.replace('<table border="0" class="dataframe data">', '<table class="data">', 1)
    if caption:
        html = html.replace(
            '<table class="data">', f'<table class="data"><caption>{escape(caption)}</caption>', 1
        )
    name = escape(label or caption or "Table")
    return mark_safe(f'<div class="table-scroll" tabindex="0" role="region" aria-label="{name}">{html}</div>')
