"""What every kind's figures share (matplotlib, Agg backend: no display, safe in web workers): the scale's colours,
the smallest text, the fixed salt that makes an SVG reproducible, and the SVG as a page puts it inline.

Every text of a figure is at least `MIN_FONT_PT` points, and a figure shown in a page is drawn at 1 px per point
(`svg_inline`), so its smallest text is 11 px high on any screen: on a phone the figure scrolls sideways at that
size rather than shrinking to an unreadable one. The rating kind's figures are kinds/rating/figures.py, the
chat kind's kinds/chat/figures.py."""

from __future__ import annotations

import math
import re

import matplotlib

matplotlib.use("Agg")

# Bad → Okay → Good: red, grey, green (distinguishable in grey-scale print too)
SCALE_COLOURS = ["#c0392b", "#bdbdbd", "#1e8449", "#2471a3", "#7d3c98"]
MIN_FONT_PT = 11
# Figures are reproducible byte for byte: no date in the SVG, its element ids drawn from a fixed salt, and the
# PNG's only text chunks are the ones written by the figure's kind (the design the figure cites, the software).
SVG_HASHSALT = "empathy-analysis"

_SVG_SIZE = re.compile(r'<svg([^>]*?) width="([0-9.]+)pt" height="([0-9.]+)pt"')


def svg_inline(svg_bytes: bytes, *, caption_id: str) -> str:
    """Matplotlib's SVG bytes as a page puts them inline: no XML prolog, 1 px per point, an image named by the
    element `caption_id` (any kind's figures)."""
    svg = svg_bytes.decode("utf-8")
    svg = svg[svg.index("<svg") :]
    return _SVG_SIZE.sub(
        lambda m: (
            f'<svg{m[1]} width="{math.ceil(float(m[2]))}" height="{math.ceil(float(m[3]))}" role="img" '
            f'aria-labelledby="{caption_id}"'
        ),
        svg,
        count=1,
    )
