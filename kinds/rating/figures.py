"""Figures of a rating analysis (matplotlib, Agg backend, set by analysis/figures.py: no display, safe in web workers).

Every text of a figure is at least `MIN_FONT_PT` points, and a figure shown in a page (`figure_inline`) is drawn
at 1 px per point, so its smallest text is 11 px high on any screen: on a phone the figure scrolls sideways at
that size rather than shrinking to an unreadable one. Each figure has a text alternative (`figure_alt`) that
gives its numbers in words."""

from __future__ import annotations

import io

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from analysis.figures import MIN_FONT_PT, SCALE_COLOURS, SVG_HASHSALT, svg_inline

FIGURES = ("ratings_by_condition", "top_share_by_emotion", "change_vs_baseline")


def ratings_by_condition(analysis) -> Figure:
    """Stacked bars: % of each scale value per condition."""
    dist = analysis.distribution
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.55 * max(1, len(dist))), layout="constrained")
    left = np.zeros(len(dist))
    for i, label in enumerate(analysis.scale.labels):
        share = dist[f"pct_{label}"].fillna(0).to_numpy() if len(dist) else np.zeros(0)
        ax.barh(dist["condition"] if len(dist) else [], share, left=left, color=SCALE_COLOURS[i], label=label)
        for y, (x0, w) in enumerate(zip(left, share, strict=True)):
            if w >= 8:
                ax.text(x0 + w / 2, y, f"{w:.0f}%", ha="center", va="center", fontsize=MIN_FONT_PT)
        left = left + share
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("% of ratings")
    ax.set_title("Ratings by condition")
    fig.legend(ncols=len(analysis.scale.labels), loc="outside lower center", frameon=False)
    return fig


def top_share_by_emotion(analysis) -> Figure:
    """Heatmap: share of the top value (Good) by emotion × condition, each cell with its number of ratings (n)
    so a share from a handful of ratings is not read like one from hundreds."""
    label = analysis.scale.top_label
    by = analysis.distribution_by_emotion
    if by.empty:
        table = np.zeros((0, len(analysis.conditions)))
        counts = table
        emotions: list[str] = []
    else:
        pivot = by.pivot(index="emotion", columns="condition", values=f"pct_{label}")
        order = [c for c in analysis.conditions if c in pivot.columns]
        pivot = pivot.reindex(columns=order)
        emotions = [str(e) for e in pivot.index]
        table = pivot.to_numpy(dtype=float)
        counts = (
            by.pivot(index="emotion", columns="condition", values="ratings")
            .reindex(index=pivot.index, columns=order)
            .to_numpy(dtype=float)
        )
    columns = [c for c in analysis.conditions if by.empty or c in set(by["condition"])]
    fig, ax = plt.subplots(
        figsize=(2.4 + 1.5 * max(1, len(columns)), 1.6 + 0.42 * max(1, len(emotions))), layout="constrained"
    )
    image = ax.imshow(
        table if table.size else np.zeros((1, 1)), aspect="auto", cmap="Greens", vmin=0, vmax=100
    )
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(emotions)), emotions)
    for (r, c), v in np.ndenumerate(table):
        if not np.isnan(v):
            n = counts[r, c]
            ax.text(
                c,
                r,
                f"{v:.0f}% n={0 if np.isnan(n) else int(n)}",
                ha="center",
                va="center",
                fontsize=MIN_FONT_PT,
                color="white" if v > 60 else "black",
            )
    fig.colorbar(image, ax=ax, label=f"% {label}")
    ax.set_title(f"Share of {label} by emotion and condition\n(n: ratings per cell)")
    return fig


def change_vs_baseline(analysis) -> Figure:
    """Relative change of the top share against the baseline, overall and by valence, with bootstrap CIs."""
    frames = []
    if not analysis.bootstrap_change.empty:
        frames.append(analysis.bootstrap_change.assign(group="overall"))
    if not analysis.bootstrap_change_by_valence.empty:
        frames.append(analysis.bootstrap_change_by_valence)
    lines = [row for f in frames for row in f.to_dict(orient="records")]
    fig, ax = plt.subplots(figsize=(7, 1.0 + 0.4 * max(1, len(lines))), layout="constrained")
    for y, row in enumerate(lines):
        change, low, high = (100 * row[k] for k in ("change", "ci_low", "ci_high"))
        if change != change:  # not defined: the baseline's share is 0 (in this group); said on its row
            ax.text(0.01, y, _UNDEFINED.format(analysis=analysis), transform=ax.get_yaxis_transform(),
                    va="center", fontsize=MIN_FONT_PT, color="#444")  # fmt: skip
            continue
        ax.errorbar(
            change,
            y,
            xerr=[[max(0.0, change - low)], [max(0.0, high - change)]],
            fmt="o",
            color="#1e8449" if change >= 0 else "#c0392b",
            capsize=3,
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(lines)), [f"{r['condition']} ({r['group']})" for r in lines])
    ax.set_ylim(len(lines) - 0.5, -0.5)  # the first row on top, each row inside the frame
    ax.set_xlabel(
        f"% change in {analysis.scale.top_label} vs {analysis.baseline}\n(95% bootstrap CI, participants)"
    )
    ax.set_title(f"Change in the share of {analysis.scale.top_label} against {analysis.baseline}")
    return fig


def figure_metadata(analysis, fmt: str) -> dict:
    """What a figure file says about itself: its study and the SHA-256 of the design it was computed under."""
    # getattr: a dashboard snapshot computed before analyses carried their planned analysis has no `planned`.
    sha = (getattr(analysis, "planned", None) or {}).get("design_sha256") or "not frozen (draft)"
    text = f"{analysis.study_slug}: design sha256 {sha}"
    if fmt == "svg":
        return {"Date": None, "Description": text}
    return {"Description": text}


def figure_render(analysis, name: str, fmt: str) -> bytes:
    """One named figure as PNG or SVG bytes; the same analysis gives the same bytes."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}")
    if fmt not in {"png", "svg"}:
        raise ValueError(f"unknown format {fmt!r}")
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT, "font.size": MIN_FONT_PT}):
        fig = globals()[name](analysis)
        buffer = io.BytesIO()
        try:
            fig.savefig(
                buffer,
                format=fmt,
                dpi=150 if fmt == "png" else None,
                metadata=figure_metadata(analysis, fmt),
            )
        finally:
            plt.close(fig)
    return buffer.getvalue()


def figure_inline(analysis, name: str) -> str:
    """A figure's SVG to put in a page: no XML prolog; drawn at 1 px per point (a `MIN_FONT_PT` text is then
    11 px high; pages let a figure wider than the screen scroll sideways); an image named by its caption, whose
    id is `figure-<name>-caption` (the page writes the caption: `figure_alt`)."""
    return svg_inline(figure_render(analysis, name, "svg"), caption_id=f"figure-{name}-caption")


# A relative change against a baseline with no top answer (in that group) is not a number.
_UNDEFINED = "not defined: no {analysis.scale.top_label} among the ratings of {analysis.baseline}"


def _pct(value: float) -> str:
    return "no data" if value != value else f"{value:.0f} %"


def figure_alt(analysis, name: str) -> str:
    """The figure's numbers in words: its text alternative, shown as its caption."""
    top = analysis.scale.top_label
    if name == "ratings_by_condition":
        parts = []
        for row in analysis.distribution.to_dict(orient="records"):
            shares = ", ".join(
                f"{label} {_pct(row.get(f'pct_{label}', float('nan')))}" for label in analysis.scale.labels
            )
            parts.append(f"{row['condition']}: {shares}")
        return "Ratings by condition, as a share of each condition's ratings. " + "; ".join(parts) + "."
    if name == "change_vs_baseline":
        parts = []
        for group, frame in (
            ("overall", analysis.bootstrap_change),
            (None, analysis.bootstrap_change_by_valence),
        ):
            for row in frame.to_dict(orient="records"):
                where = group or row["group"]
                if row["change"] != row["change"]:
                    parts.append(f"{row['condition']} ({where}) {_UNDEFINED.format(analysis=analysis)}")
                    continue
                parts.append(
                    f"{row['condition']} ({where}) {100 * row['change']:+.1f} % "
                    f"(95 % CI {100 * row['ci_low']:+.1f} to {100 * row['ci_high']:+.1f})"
                )
        return (
            f"Relative change in the share of {top} against {analysis.baseline}, with 95 % bootstrap intervals "
            "(participants resampled): "
            + ("; ".join(parts) or "none")
            + ". The table below gives the same numbers."
        )
    if name == "top_share_by_emotion":
        by = analysis.distribution_by_emotion
        emotions = by["emotion"].nunique() if not by.empty else 0
        return (
            f"Share of {top} for each of {emotions} emotion{'' if emotions == 1 else 's'} (rows) and each condition (columns), darker for a "
            "larger share, each cell with its number of ratings. The table “Distribution by emotion” below "
            "gives every number."
        )
    raise ValueError(f"unknown figure {name!r}")


def figure_alts(analysis) -> dict[str, str]:
    return {} if analysis.empty else {name: figure_alt(analysis, name) for name in FIGURES}
