"""The chat kind's figure: the PETS total per label, one line per source, each mean with its HC3 interval (the
interaction is lines that are not parallel). matplotlib with the Agg backend, text at analysis.figures' minimum
size; `figure_svg` gives the SVG a page puts inline, named by its caption."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from analysis.figures import MIN_FONT_PT, SCALE_COLOURS, SVG_HASHSALT, svg_inline  # noqa: E402

from .stats import OUTCOME_NAMES, ChatStats  # noqa: E402

FIGURE_ID = "figure-pets-by-cell"


def pets_by_cell(result: ChatStats, fmt: str, outcome: str = "pets") -> bytes:
    """The interaction plot of `outcome` as PNG or SVG bytes (the same result gives the same bytes)."""
    cells = result.cells[result.cells["outcome"] == outcome]
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT, "font.size": MIN_FONT_PT}):
        fig, ax = plt.subplots(figsize=(5.2, 3.4))
        try:
            x = list(range(len(result.labels)))
            for k, source in enumerate(result.sources):
                rows = cells[cells["source"] == source].set_index("label").loc[result.labels]
                offset = (k - (len(result.sources) - 1) / 2) * 0.06
                ax.errorbar(
                    [i + offset for i in x], rows["mean"],
                    yerr=[rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]],
                    marker="os^D"[k % 4], capsize=4, label=source, color=SCALE_COLOURS[(2 + k) % len(SCALE_COLOURS)],
                )  # fmt: skip
            ax.set_xticks(x, [f"label: {label}" for label in result.labels])
            ax.set_ylabel(f"{OUTCOME_NAMES[outcome]}, 0–100")
            ax.set_xlim(-0.5, len(x) - 0.5)
            ax.legend(title="source", frameon=False)
            fig.tight_layout()
            buffer = io.BytesIO()
            fig.savefig(
                buffer,
                format=fmt,
                dpi=150 if fmt == "png" else None,
                metadata={"Date": None} if fmt == "svg" else {},
            )
        finally:
            plt.close(fig)
    return buffer.getvalue()


def figure_svg(result: ChatStats) -> str:
    """The figure's SVG for a page, named by its caption (`FIGURE_ID`-caption)."""
    return svg_inline(pets_by_cell(result, "svg"), caption_id=f"{FIGURE_ID}-caption")


def figure_alt(result: ChatStats) -> str:
    """The figure in words: each cell's PETS mean and interval."""
    cells = result.cells[result.cells["outcome"] == "pets"]
    parts = [
        f"{r.source} with label {r.label}: {r['mean']:.1f} ({r.ci_low:.1f} to {r.ci_high:.1f}, n = {r.n})"
        for _, r in cells.iterrows()
    ]
    return "Mean PETS score (0–100) with 95 % intervals per source and label shown: " + "; ".join(parts) + "."
