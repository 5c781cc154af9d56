"""Rendering an analysis for people: HTML tables, the dashboard's context, and the self-contained report that
`python manage.py analyze` writes next to the CSV tables and PNG/SVG figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from analysis import figures, stats
from analysis.exports import table_lines

TEST_SHORT = {
    stats.TEST_OMNIBUS: "omnibus χ²",
    stats.TEST_2XK: "χ² 2×k vs baseline",
    stats.TEST_2X2: "χ² 2×2 top vs rest (Yates)",
}
MAIN_COLUMNS = [
    "scope", "group", "test", "comparison", "n", "small_sample", "chi2", "dof", "p", "p_holm", "cramers_v",
    "top_share", "top_share_baseline", "change", "min_expected", "p_exact",
]  # fmt: skip
# What people read above the columns of the tests' HTML tables (the CSV files keep the short names scripts use).
COLUMN_LABELS = {
    "scope": "Scope", "group": "Group", "test": "Test", "comparison": "Comparison", "n": "Ratings (n)",
    "chi2": "χ²", "dof": "df", "p": "p", "p_holm": "p (Holm)", "cramers_v": "Cramér's V",
    "top_share": "Top share", "top_share_baseline": "Top share, baseline", "change": "Relative change",
    "min_expected": "Smallest expected count", "small_sample": "Sample size", "p_exact": "Fisher's exact p",
}  # fmt: skip
SMALL_SAMPLE_MARK = "too few: χ² unreliable"


def _fmt(value) -> str:
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
) -> SafeString:
    """A DataFrame as an escaped HTML table (pandas escapes cell text), in a scroll area that the keyboard can
    reach (tabindex=0, a named region) since wide tables scroll sideways on small screens. `readable`: the
    columns get their COLUMN_LABELS and small-sample rows a plain-words mark."""
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
        frame = frame.rename(columns=COLUMN_LABELS)
    html = frame.to_html(index=False, border=0, classes="data", na_rep="", formatters=None, float_format=_fmt)
    html = html.replace('<table border="0" class="dataframe data">', '<table class="data">', 1)
    if caption:
        html = html.replace(
            '<table class="data">', f'<table class="data"><caption>{escape(caption)}</caption>', 1
        )
    name = escape(label or caption or "Table")
    return mark_safe(f'<div class="table-scroll" tabindex="0" role="region" aria-label="{name}">{html}</div>')


def main_table(analysis) -> pd.DataFrame:
    return (
        analysis.main_tests()[[c for c in MAIN_COLUMNS if c in analysis.main_tests().columns]]
        if not analysis.empty
        else pd.DataFrame()
    )


def report_context(analysis, *, inline_figures: bool) -> dict:
    """What the dashboard and the report show, in one place."""
    figs = {}
    if inline_figures and not analysis.empty:
        for name in figures.FIGURES:
            svg = figures.figure_render(analysis, name, "svg").decode("utf-8")
            figs[name] = mark_safe(svg[svg.index("<svg") :])  # drop the XML prolog: inline in HTML
    ordinal = analysis.ordinal
    main = main_table(analysis)
    return {
        "analysis": analysis,
        "generated_at": timezone.now(),
        "figures": figs,
        "rules": analysis.options.rules.describe(),
        "exclusions_html": html_table(analysis.exclusions, label="Exclusions"),
        "distribution_html": html_table(analysis.distribution, label="Ratings by condition"),
        "distribution_by_valence_html": html_table(
            analysis.distribution_by_valence, label="Ratings by valence"
        ),
        "distribution_by_emotion_html": html_table(
            analysis.distribution_by_emotion, label="Ratings by emotion"
        ),
        "change_html": html_table(analysis.bootstrap_change, label="Change against the baseline"),
        "change_by_valence_html": html_table(
            analysis.bootstrap_change_by_valence, label="Change against the baseline by valence"
        ),
        "main_html": html_table(main, label="Main tests", readable=True),
        "small_sample_min": stats.SMALL_SAMPLE_MIN_EXPECTED,
        "small_sample_tests": int(main["small_sample"].sum()) if "small_sample" in main.columns else 0,
        "pairwise_2xk_html": html_table(
            analysis.tests[analysis.tests["test"] == stats.TEST_2XK]
            if not analysis.tests.empty
            else analysis.tests,
            columns=MAIN_COLUMNS,
            label="2 × scale chi-square tests",
            readable=True,
        ),
        "ordinal": ordinal,
        "ordinal_html": html_table(ordinal.coefficients, label="Proportional-odds model coefficients")
        if ordinal is not None
        else "",
        "agreement": analysis.agreement,
        "table_names": ["main_tests", *analysis.tables()],
    }


def report_write(*, analysis, out_dir: Path) -> list[Path]:
    """Write every table as CSV, every figure as PNG and SVG, and report.html (figures embedded, no external
    files). Returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in analysis.tables().items():
        path = out_dir / f"{name}.csv"
        with path.open("w", encoding="utf-8", newline="") as fh:
            fh.writelines(table_lines(frame))
        written.append(path)
    main_path = out_dir / "main_tests.csv"
    with main_path.open("w", encoding="utf-8", newline="") as fh:
        fh.writelines(table_lines(main_table(analysis)))
    written.append(main_path)
    if not analysis.empty:
        for name in figures.FIGURES:
            for fmt in ("png", "svg"):
                path = out_dir / f"{name}.{fmt}"
                path.write_bytes(figures.figure_render(analysis, name, fmt))
                written.append(path)
    html = render_to_string("analysis/report.html", report_context(analysis, inline_figures=True))
    path = out_dir / "report.html"
    path.write_text(html, encoding="utf-8")
    written.append(path)
    return written
