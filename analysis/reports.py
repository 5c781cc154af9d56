"""Rendering an analysis for people: HTML tables, the dashboard's context, and the self-contained report that
`python manage.py analyze` writes next to the CSV tables and PNG/SVG figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from analysis import figures, stats
from analysis.design import design_json_write, design_of_slug
from analysis.exports import table_lines

TEST_SHORT = {
    stats.TEST_OMNIBUS: "omnibus χ²",
    stats.TEST_2XK: "χ² 2×k vs baseline",
    stats.TEST_2X2: "χ² 2×2 top vs rest (Yates)",
}
MAIN_COLUMNS = [
    "scope", "group", "test", "comparison", "n", "chi2", "dof", "p", "p_holm", "cramers_v",
    "top_share", "top_share_baseline", "change",
]  # fmt: skip


def _fmt(value) -> str:
    if isinstance(value, float):
        if value != value:
            return ""
        if abs(value) != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.3g}"
        return f"{value:.4g}"
    return str(value)


def html_table(frame: pd.DataFrame, *, columns: list[str] | None = None, caption: str = "") -> SafeString:
    """A DataFrame as an escaped HTML table (pandas escapes cell text)."""
    if frame is None or frame.empty:
        return mark_safe("<p class='empty'>No rows.</p>")
    if columns:
        frame = frame[[c for c in columns if c in frame.columns]]
    if "test" in frame.columns:
        frame = frame.assign(test=frame["test"].map(lambda t: TEST_SHORT.get(t, t)))
    html = frame.to_html(index=False, border=0, classes="data", na_rep="", formatters=None, float_format=_fmt)
    if caption:
        html = html.replace(
            '<table border="0" class="dataframe data">',
            f'<table class="data"><caption>{caption}</caption>',
            1,
        )
    return mark_safe(html)


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
    return {
        "analysis": analysis,
        "generated_at": timezone.now(),
        "design": design_of_slug(analysis.study_slug),
        "figures": figs,
        "rules": analysis.options.rules.describe(),
        "exclusions_html": html_table(analysis.exclusions),
        "distribution_html": html_table(analysis.distribution),
        "distribution_by_valence_html": html_table(analysis.distribution_by_valence),
        "distribution_by_emotion_html": html_table(analysis.distribution_by_emotion),
        "change_html": html_table(analysis.bootstrap_change),
        "change_by_valence_html": html_table(analysis.bootstrap_change_by_valence),
        "main_html": html_table(main_table(analysis)),
        "pairwise_2xk_html": html_table(
            analysis.tests[analysis.tests["test"] == stats.TEST_2XK]
            if not analysis.tests.empty
            else analysis.tests,
            columns=MAIN_COLUMNS,
        ),
        "ordinal": ordinal,
        "ordinal_html": html_table(ordinal.coefficients) if ordinal is not None else "",
        "agreement": analysis.agreement,
        "table_names": ["main_tests", *analysis.tables()],
        # A follow-up wave's (analysis/waves.py): its family's studies and the drift test.
        "family_html": html_table(analysis.family) if hasattr(analysis, "family") else "",
        "drift_html": html_table(analysis.drift) if hasattr(analysis, "drift") else "",
        "drift_warning": getattr(analysis, "drift_warning", ""),
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
    context = report_context(analysis, inline_figures=True)
    written.append(design_json_write(context["design"], out_dir / "design.json"))
    html = render_to_string("analysis/report.html", context)
    path = out_dir / "report.html"
    path.write_text(html, encoding="utf-8")
    written.append(path)
    return written
