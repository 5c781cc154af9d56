"""Rendering a rating analysis for people: its tables, the dashboard's context, and the self-contained reports
(report.html, report.md) that `python manage.py analyze` writes next to the CSV tables and PNG/SVG figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from analysis import stats
from analysis.contents import contents_insert
from analysis.design import amendment_line, design_json_write, design_of_slug, dry_run_of
from analysis.exclusions import ExclusionRules
from analysis.exports import table_lines
from analysis.html_tables import html_table, number_text
from analysis.snapshots import PageRender
from studies.models import Study
from studies.planned_analysis import further_tests

from . import figures

MAIN_COLUMNS = [
    "scope", "group", "test", "procedure", "comparison", "n", "small_sample", "chi2", "dof", "z", "p", "p_adjusted",
    "significant", "cramers_v", "top_share", "top_share_baseline", "change", "difference", "ci_low", "ci_high",
    "design_effect", "min_expected", "p_exact",
]  # fmt: skip
# The same columns in the order pages show them: what a reader looks for first (which comparison, the effect,
# the planned p and whether it is significant) before the details, so a desktop screen shows it unscrolled.
PAGE_COLUMNS = [
    "scope", "group", "comparison", "test", "n", "top_share", "top_share_baseline", "difference", "ci_low",
    "ci_high", "change", "p_adjusted", "significant", "small_sample", "p", "p_exact", "procedure", "z", "chi2",
    "dof", "cramers_v", "design_effect", "min_expected",
]  # fmt: skip


def exclusions_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The exclusions table for a page: the counts per condition first (headed by the condition's name), then the
    test; the rules' definitions are listed above the table, so they are left out of it."""
    if frame.empty:
        return frame
    per = [c for c in frame.columns if c.startswith("participants_")]
    out = frame[["rule", *per, "test", "p", "differs", "chi2", "dof", "participants", "ratings", "note"]]
    out = out.assign(
        differs=[
            ("yes" if d else "no") if t else "" for d, t in zip(out["differs"], out["test"], strict=True)
        ]
    )
    return out.rename(columns={c: c.removeprefix("participants_") for c in per} | {"participants": "total"})


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
            figs[name] = mark_safe(figures.figure_inline(analysis, name))  # noqa: S308 — our own SVG
    ordinal = analysis.ordinal
    main = main_table(analysis)
    return {
        "analysis": analysis,
        "design": design_of_slug(analysis.study_slug),
        "placeholders": dry_run_of(Study.objects.filter(slug=analysis.study_slug).first()),
        "figures": figs,
        "figure_alts": figures.figure_alts(analysis),
        "headline": headline_lines(analysis),
        "rules": analysis.rules.describe(),
        "declared_rules": _declared_description(analysis),
        "exclusions_html": html_table(
            exclusions_display(analysis.exclusions),
            caption="Participants excluded by each rule, per condition, and the test",
        ),
        "sensitivity_html": html_table(
            analysis.sensitivity, caption="The headline without and with the exclusions"
        ),
        "distribution_html": html_table(analysis.distribution, label="Ratings by condition"),
        "distribution_by_valence_html": html_table(
            analysis.distribution_by_valence, label="Ratings by valence"
        ),
        "distribution_by_emotion_html": html_table(
            analysis.distribution_by_emotion, label="Ratings by emotion"
        ),
        "change_html": html_table(
            change_in_percent(analysis.bootstrap_change), label="Change against the baseline"
        ),
        "change_by_valence_html": html_table(
            change_in_percent(analysis.bootstrap_change_by_valence),
            label="Change against the baseline by valence",
        ),
        "main_html": html_table(
            main, columns=PAGE_COLUMNS, label="Main tests", readable=True, labels=adjusted_labels(analysis)
        ),
        "primary_line": stats.primary_line(analysis.primary_test),
        "planned_tests_line": planned_tests_line(analysis),
        "small_sample_min": stats.SMALL_SAMPLE_MIN_EXPECTED,
        "small_sample_tests": int(main["small_sample"].sum()) if "small_sample" in main.columns else 0,
        "pairwise_2xk_html": html_table(
            analysis.tests[analysis.tests["test"] == stats.TEST_2XK]
            if not analysis.tests.empty
            else analysis.tests,
            columns=PAGE_COLUMNS,
            label="2 × scale chi-square tests",
            readable=True,
            labels=adjusted_labels(analysis),
        ),
        "ordinal": ordinal,
        "ordinal_html": html_table(ordinal.coefficients, label="Proportional-odds model coefficients")
        if ordinal is not None
        else "",
        "agreement": analysis.agreement,
        "table_names": ["main_tests", *analysis.tables()],
        # A follow-up wave's (kinds/rating/waves.py): its family's studies and the drift test.
        "family_html": html_table(analysis.family) if hasattr(analysis, "family") else "",
        "drift_html": html_table(analysis.drift) if hasattr(analysis, "drift") else "",
        "drift_warning": getattr(analysis, "drift_warning", ""),
    }


CHANGE_PERCENT_COLUMNS = {"change": "change (%)", "ci_low": "95 % CI low (%)", "ci_high": "95 % CI high (%)"}


def change_in_percent(frame: pd.DataFrame) -> pd.DataFrame:
    """A bootstrap change table as pages show it: in percent, as its figure is drawn (the CSV keeps fractions)."""
    if frame is None or frame.empty:
        return frame
    present = [c for c in CHANGE_PERCENT_COLUMNS if c in frame.columns]
    shown = frame.assign(**{c: (100 * frame[c]).round(1) for c in present})
    return shown.rename(columns={c: CHANGE_PERCENT_COLUMNS[c] for c in present})


def headline_lines(analysis) -> list[str]:
    """The result first, in words: for each condition, the primary test against the baseline (its top share, the
    difference in points with its 95 % interval, the relative change, the planned correction's p)."""
    if analysis.empty:
        return []
    main = main_table(analysis)
    if main.empty or "test" not in main.columns:
        return []
    primary = analysis.primary_rows()
    primary = primary[primary["scope"] == "overall"] if "scope" in primary.columns else primary
    top, out = analysis.scale.top_label, []

    def number(row: dict, key: str) -> float | None:
        value = row.get(key)
        return None if value is None or value != value else float(value)  # absent or NaN: not computed

    for row in primary.to_dict(orient="records"):
        condition = str(row["comparison"]).split(" vs ")[0]
        share, base = number(row, "top_share"), number(row, "top_share_baseline")
        if share is None or base is None:
            out.append(f"{condition}: no comparison with {analysis.baseline} (too few ratings).")
            continue
        text = f"{condition}: {100 * share:.1f} % {top} against {100 * base:.1f} % for {analysis.baseline}"
        difference, low, high = (number(row, k) for k in ("difference", "ci_low", "ci_high"))
        if difference is not None:
            text += f", {100 * difference:+.1f} points"
            if low is not None and high is not None:
                text += f" (95 % CI {100 * low:+.1f} to {100 * high:+.1f})"
        change = number(row, "change")
        if change is not None:
            text += f", {100 * change:+.1f} % relative"
        p = number(row, "p_adjusted")
        if p is not None:
            verdict = "significant" if row.get("significant") is True else "not significant"
            text += (
                f"; p ({analysis.correction_name}) = {number_text(p)}, {verdict} at α = {analysis.alpha:g}"
            )
        out.append(text + ".")
    return out


def adjusted_labels(analysis) -> dict[str, str]:
    """The adjusted p-value's and the significance column's headings name the planned correction and α."""
    return {
        "p_adjusted": f"p ({analysis.correction_name})",
        "significant": f"Significant (α = {analysis.alpha:g})",
    }


def planned_line(analysis) -> str:
    """Which α and correction the analysis applied, and where they come from (the report, the dashboard)."""
    return (
        f"α = {analysis.alpha:g}; multiple-comparison correction: {analysis.correction_name}, within each family of "
        f"tests; from the planned analysis of {analysis.planned_source}. {planned_tests_line(analysis)}"
    )


def planned_tests_line(analysis) -> str:
    """The declared primary test, then the secondary ones and the researcher's further tests."""
    secondary = [test["name"] for test in analysis.planned.get("secondary_tests") or []]
    tests = "; ".join([*secondary, *further_tests(analysis.planned)]) or "none listed"
    return f"Primary test: {analysis.primary_test['name']}. Secondary tests planned: {tests}."


def _declared_description(analysis) -> dict[str, str]:
    # The analysis refused an invalid declaration already, so this cannot raise here.
    return ExclusionRules.from_declared(analysis.declared_rules).describe()


def _md_cell(value) -> str:
    if value is None:
        return ""
    return number_text(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    if frame is None or frame.empty:
        return "No rows.\n"
    columns = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in frame.itertuples(index=False, name=None):
        lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def report_markdown(analysis) -> str:
    """The report's text in Markdown: exclusions (per condition, with their test and warnings), the sensitivity
    line, the distribution and the main tests. Figures and the longer tables are in the HTML report and CSVs."""
    out = [f"# Analysis of {analysis.study_title} ({analysis.study_slug})", ""]
    out += [*design_markdown(design_of_slug(analysis.study_slug)), ""]
    out.append(
        f"Conditions: {', '.join(analysis.conditions)}; baseline **{analysis.baseline}**; ratings analysed: "
        f"{analysis.n_rows} of {analysis.n_rows_before}."
    )
    out += [
        "",
        f"Planned analysis applied: {planned_line(analysis)}",
        "",
        stats.primary_line(analysis.primary_test),
    ]
    if getattr(analysis, "drift_warning", ""):
        out += ["", f"> **Warning.** {analysis.drift_warning}" + "\n"]
    out += ["", *[f"> **Warning.** {w}" + "\n" for w in analysis.warnings]]
    out += [f"> Note: {n}" + "\n" for n in analysis.notes]
    source = "the study's declared rules" if analysis.rules_declared else "rules overridden for this analysis"
    out += ["## Exclusions", "", f"Applied: {source}.", ""]
    out += [f"- **{rule}**: {definition}" for rule, definition in analysis.rules.describe().items()]
    if not analysis.rules_declared:
        out += ["", "Declared by the study:", ""]
        out += [f"- {rule}: {definition}" for rule, definition in _declared_description(analysis).items()]
    out += ["", markdown_table(analysis.exclusions)]
    out += ["## Sensitivity: the headline with and without exclusions", ""]
    out += [f"- {line}" for line in analysis.sensitivity_lines] + ["", markdown_table(analysis.sensitivity)]
    if getattr(analysis, "authenticity_lines", None):
        out += [
            "## Sensitivity: the headline with and without the participants the authenticity score flags",
            "",
        ]
        out += [f"- {line}" for line in analysis.authenticity_lines]
        if not analysis.authenticity_sensitivity.empty:
            out += ["", markdown_table(analysis.authenticity_sensitivity)]
    if not analysis.empty:
        out += ["## Ratings by condition", "", markdown_table(analysis.distribution)]
        out += ["## Main tests", "", markdown_table(main_table(analysis))]
    if hasattr(analysis, "family"):
        out += ["## Family: every condition of every wave", "", markdown_table(analysis.family)]
        out += ["## Rater drift: the re-rated baseline against its original ratings", ""]
        out += [markdown_table(analysis.drift)]
    return "\n".join(out)


def design_markdown(design: dict | None) -> list[str]:
    """The design the report cites: its hash and every amendment."""
    if design is None:
        return ["Design: not frozen yet (a draft study): these figures cite no pre-registered design."]
    lines = [f"Frozen design SHA-256 `{design['sha256']}` ({design['reason']}, {design['frozen_at']})."]
    if not design["amendments"]:
        return [*lines, "", "No amendments."]
    return [
        *lines,
        "",
        "Amendments since launch:",
        "",
        *(f"- {amendment_line(a)}" for a in design["amendments"]),
    ]


def exclusion_lines(analysis) -> list[str]:
    """The exclusions in a few plain lines (the `analyze` command prints them): per rule the participants and
    ratings it removed, per condition, the test of whether the rates differ, then the warnings, the notes and the
    sensitivity line."""
    frame = analysis.exclusions
    conditions = [c.removeprefix("participants_") for c in frame.columns if c.startswith("participants_")]
    source = "declared by the study" if analysis.rules_declared else "overridden for this analysis"
    out = [f"Exclusion rules ({source}):"]
    for _, line in frame.iterrows():
        per = ", ".join(f"{c} {int(line[f'participants_{c}'])}" for c in conditions)
        text = f"  {line['rule']}: {int(line['participants'])} participants, {int(line['ratings'])} ratings ({per})"
        if line["test"]:
            text += f"; {line['test']} p = {line['p']:.3g} (χ² = {line['chi2']:.2f}, df {int(line['dof'])})"
        elif line["note"]:
            text += f"; {line['note']}"
        out.append(text)
    out += [f"WARNING: {w}" for w in analysis.warnings]
    out += [f"note: {n}" for n in analysis.notes]
    out += analysis.sensitivity_lines
    out += getattr(analysis, "authenticity_lines", [])
    return out


def page_render(analysis) -> PageRender:
    """The dashboard's body, its figures and report.html of one analysis, drawn once (`analysis.snapshots`)."""
    svgs = {} if analysis.empty else {name: figures.figure_inline(analysis, name) for name in figures.FIGURES}
    context = report_context(analysis, inline_figures=False)
    context["figures"] = {name: mark_safe(svg) for name, svg in svgs.items()}  # noqa: S308 — our own SVG
    # report.html is the same context in its own page: drawn and rendered here once, not on each download.
    body = render_to_string("analysis/_waves.html", context) + render_to_string(
        "analysis/_body.html", context
    )
    return PageRender(figures=svgs, body_html=body, report_html=report_html(analysis, context=context))


def report_html(analysis, *, context: dict | None = None) -> str:
    """report.html: the analysis in one self-contained page, figures embedded (what `analyze` writes and the
    dashboard's download serves)."""
    return contents_insert(
        render_to_string("analysis/report.html", context or report_context(analysis, inline_figures=True))
    )


def report_write(*, analysis, out_dir: Path) -> list[Path]:
    """Write every table as CSV, every figure as PNG and SVG, report.html (figures embedded, no external files)
    and report.md. Returns the paths written."""
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
    path = out_dir / "report.html"
    path.write_text(report_html(analysis, context=context), encoding="utf-8")
    written.append(path)
    path = out_dir / "report.md"
    path.write_text(report_markdown(analysis), encoding="utf-8")
    written.append(path)
    return written
