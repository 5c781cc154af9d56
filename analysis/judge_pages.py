"""A judge report for people: the tables of analysis.judge_report in plain words, shares as percentages with their
intervals beside them (the CSV and JSON keep the raw numbers)."""

from __future__ import annotations

import math

import pandas as pd
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from analysis.html_tables import html_table
from analysis.judge_report import JudgeReport


def _num(x, digits: int = 2) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pct(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f} %"


def with_ci(value, low, high, *, pct: bool = False, digits: int = 2) -> str:
    """'0.62 (0.55 to 0.69)' or '49.3 % (45.1 to 53.4)'; the bare value when the interval is undefined."""
    fmt = _pct if pct else (lambda x: _num(x, digits))
    head = fmt(value)
    if not head:
        return "n/a"
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return head
    tail = f"{100 * low:.1f} to {100 * high:.1f}" if pct else f"{_num(low, digits)} to {_num(high, digits)}"
    return f"{head} ({tail})"


def _table(frame: pd.DataFrame, caption: str) -> SafeString:
    return html_table(frame, caption=caption, label=caption)


def stacked_table(frame: pd.DataFrame, caption: str) -> SafeString:
    """A table that stacks on a phone: each row becomes a card of "heading: value" lines (CSS in the page), so the
    figures that matter are read without scrolling sideways. Cells are escaped strings."""
    if frame.empty:
        return _table(frame, caption)
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in frame.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td data-label="{escape(c)}">{escape(v)}</td>' for c, v in zip(frame.columns, row, strict=True)
        )
        + "</tr>"
        for row in frame.astype(str).itertuples(index=False, name=None)
    )
    name = escape(caption)
    return mark_safe(
        f'<div class="table-scroll" tabindex="0" role="region" aria-label="{name}"><table class="data stack">'
        f"<caption>{name}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def agreement_html(report: JudgeReport) -> SafeString:
    frame = report.agreement()
    if frame.empty:
        return _table(frame, "Agreement")
    shown = pd.DataFrame(
        {
            "Coefficient": frame["coefficient"],
            "Judge–human (95 % CI)": [
                with_ci(r.judge_human, r.judge_human_ci_low, r.judge_human_ci_high)
                for r in frame.itertuples()
            ],
            "Human–human (95 % CI)": [
                with_ci(r.human_human, r.human_human_ci_low, r.human_human_ci_high)
                for r in frame.itertuples()
            ],
        }
    )
    return stacked_table(shown, "Agreement: the judge with people beside people with each other")


def breakdown_html(frame: pd.DataFrame, by: str, caption: str) -> SafeString:
    if frame.empty:
        return _table(frame, caption)
    shown = pd.DataFrame(
        {
            by.capitalize(): frame[by].astype(str),
            "Responses": frame["responses"],
            "Judge–human α": [
                with_ci(r["judge_human_alpha"], r["judge_human_alpha_ci_low"], r["judge_human_alpha_ci_high"])
                for _, r in frame.iterrows()
            ],
            "Human–human α": [
                with_ci(r["human_human_alpha"], r["human_human_alpha_ci_low"], r["human_human_alpha_ci_high"])
                for _, r in frame.iterrows()
            ],
            "Judge–human κ (linear)": [
                with_ci(
                    r["judge_human_kappa_linear"],
                    r["judge_human_kappa_linear_ci_low"],
                    r["judge_human_kappa_linear_ci_high"],
                )
                for _, r in frame.iterrows()
            ],
        }
    )
    return _table(shown, caption)


def length_html(report: JudgeReport) -> SafeString:
    frame = report.length_bias()
    if frame.empty:
        return _table(frame, "Length")
    names = {
        "judge_minus_human": "judge − people",
        "judge": "the judge's rating",
        "human": "people's mean rating",
    }
    shown = pd.DataFrame(
        {
            "Spearman r with length (words) of": frame["correlation_with_length"].map(names),
            "r (95 % CI)": [with_ci(r.r, r.ci_low, r.ci_high) for r in frame.itertuples()],
            "Responses": frame["n"],
        }
    )
    return _table(shown, "Length: does the judge favour longer or shorter responses than people do?")


def condition_bias_html(report: JudgeReport) -> SafeString:
    c = report.calibration
    if c is None or c.conditions.empty:
        return _table(pd.DataFrame(), "Conditions")
    frame = c.conditions
    shown = pd.DataFrame(
        {
            "Condition": frame["condition"],
            "Responses": frame["responses"],
            "Compared with": frame["vs"].fillna(""),
            "Judge's shift at the same human rating (points)": frame["shift"].map(lambda x: _num(x)),
            "Largest shift": frame["max_shift"].map(lambda x: _num(x)),
            "Stratified χ² (df)": [
                "" if pd.isna(r.chi2) else f"{r.chi2:.1f} ({int(r.dof)})" for r in frame.itertuples()
            ],
            "p (Holm)": frame["p_holm"].map(lambda x: "" if pd.isna(x) else f"{x:.3g}"),
        }
    )
    return _table(
        shown, "Conditions: does the judge rate one condition differently at the same human rating?"
    )


def _human_beside_ppi(frame: pd.DataFrame, what: str) -> dict[str, list[str]]:
    """The human-only and prediction-powered estimates of `frame`'s rows with their 95 % intervals, as two
    columns ("Human-only{what} (95 % CI)", "Prediction-powered{what} (95 % CI)")."""
    rows = list(frame.itertuples())
    return {
        f"Human-only{what} (95 % CI)": [
            with_ci(r.human_estimate, r.human_ci_low, r.human_ci_high, pct=True) for r in rows
        ],
        f"Prediction-powered{what} (95 % CI)": [
            with_ci(r.ppi_estimate, r.ppi_ci_low, r.ppi_ci_high, pct=True) for r in rows
        ],
    }


def ppi_shares_html(report: JudgeReport) -> SafeString:
    frame = report.shares
    if frame.empty:
        return _table(frame, "Shares")
    shown = pd.DataFrame(
        {
            "Condition": frame["condition"],
            "Rating": frame["value"],
            "Human ratings": frame["n_human"],
            "n (rated by both)": frame["n"],
            "N (judge only)": frame["N"],
            **_human_beside_ppi(frame, ""),
            "Width, PPI / human-only": frame["width_ratio"].map(lambda x: _num(x)),
        }
    )
    return _table(shown, "Each condition's shares: human-only beside prediction-powered")


def ppi_differences_html(report: JudgeReport) -> SafeString:
    frame = report.differences
    if frame.empty:
        return _table(frame, "Differences")
    shown = pd.DataFrame(
        {
            "Condition": frame["condition"],
            "Rating": frame["value"],
            **_human_beside_ppi(frame, " difference"),
        }
    )
    return _table(shown, f"Differences from {report.baseline}, in percentage points")


def screening_html(report: JudgeReport) -> SafeString:
    frame = report.screening
    if frame.empty:
        return _table(frame, "Screening")
    top = report.scale.top_label
    shown = pd.DataFrame(
        {
            "Rank": frame["rank"],
            "Condition": frame["condition"],
            "Responses judged": frame["responses_judged"],
            "Human ratings": frame["human_ratings"],
            f"Judge's {top} (95 % CI)": [
                with_ci(r[f"judge_{top}"], r[f"judge_{top}_ci_low"], r[f"judge_{top}_ci_high"], pct=True)
                for _, r in frame.iterrows()
            ],
        }
    )
    if f"corrected_{top}" in frame.columns:
        shown[f"Corrected {top} (95 % CI)"] = [
            with_ci(
                r[f"corrected_{top}"], r[f"corrected_{top}_ci_low"], r[f"corrected_{top}_ci_high"], pct=True
            )
            for _, r in frame.iterrows()
        ]
        shown["Human ratings needed"] = frame["human_ratings_needed"].map(_count)
        shown["With the judge"] = frame["ppi_ratings_needed"].map(_count)
        shown["Participants, with the judge"] = frame["ppi_participants_needed"].map(_count)
    return stacked_table(shown, "Screening: conditions people have not rated, ranked by the judge")


def _count(x) -> str:
    return "" if pd.isna(x) else str(int(x))


def judge_report_context(report: JudgeReport) -> dict:
    c = report.calibration
    return {
        "report": report,
        "calibration": c,
        "alt": c.alt_test if c else None,
        "agreement_html": agreement_html(report),
        "confusion_html": _table(report.confusion(), "Confusion: people's rating (rows) against the judge's"),
        "by_valence_html": breakdown_html(c.by_valence, "valence", "By valence") if c else "",
        "by_emotion_html": breakdown_html(c.by_emotion, "emotion", "By emotion") if c else "",
        "alt_html": _table(report.alt_test(), "Alternative annotator test, per annotator") if c else "",
        "length_html": length_html(report),
        "condition_bias_html": condition_bias_html(report),
        "ppi_shares_html": ppi_shares_html(report),
        "ppi_differences_html": ppi_differences_html(report),
        "screening_html": screening_html(report),
        "table_names": list(report.tables()),
    }
