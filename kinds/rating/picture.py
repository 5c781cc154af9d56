"""The picture check's picture: what it asks for (studies/authenticity.py `picture_answer`), drawn as outlines.

The instruction is part of the picture: each line of text is turned into the outlines of its letters (DejaVu Sans,
which ships with matplotlib, through `TextPath`), written as SVG path data, and slanted, turned and moved a little
by a transform drawn for the participant, so the page holds no text node, title or description that says the
answer, and no two participants' path data are the same string. A person reads it at a glance; software reading
the page's text (`innerText`, the DOM, the accessibility tree) finds only numbers. An agent that looks at a
screenshot can read it, and a program built to decode glyph outlines could too: the check catches agents that
answer from the page's text, which are most of them (docs/participants.md).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

from django.utils.crypto import salted_hmac

from studies import authenticity
from studies.models import Study

SIZE = 28  # the letters' size in the picture's units
LINE = 44  # from one line's baseline to the next
MARGIN = 24


@dataclass(frozen=True)
class Picture:
    """The picture check's SVG, ready for the page: its view box and one path of letter outlines a line."""

    width: int
    height: int
    lines: list[str]  # SVG path data, one a line of the instruction


@lru_cache(maxsize=64)
def _outlines(text: str) -> tuple[float, tuple[tuple[str, tuple[tuple[float, float], ...]], ...]]:
    """The outlines of `text` (its width, and its segments: an SVG path command with its points, y up), kept:
    a study's few labels are laid out once per process, not once per participant. matplotlib is imported here,
    on the first picture a process draws, so no command or other page pays for it."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.path import Path
    from matplotlib.textpath import TextPath

    letters = {Path.MOVETO: "M", Path.LINETO: "L", Path.CURVE3: "Q", Path.CURVE4: "C", Path.CLOSEPOLY: "Z"}
    font = FontProperties(family="DejaVu Sans", weight="bold")
    path = TextPath((0, 0), text, size=SIZE, prop=font)
    segments = tuple(
        (
            letters[code],
            ()
            if code == Path.CLOSEPOLY
            else tuple((float(v[i]), float(v[i + 1])) for i in range(0, len(v), 2)),
        )
        for v, code in path.iter_segments(curves=True, simplify=False)
    )
    return float(path.get_extents().width), segments


def _path_data(segments, transform) -> str:
    """SVG path data of outline segments, each point mapped by `transform` (x, y) -> (x, y), one decimal."""
    return "".join(
        command + " ".join(f"{x:.1f} {y:.1f}" for x, y in (transform(*point) for point in points))
        for command, points in segments
    )


def picture_draw(*, study: Study, participant_id: int) -> Picture:
    """The participant's picture: "This is a check:" and "choose <the label asked for>", as letter outlines."""
    label = authenticity.picture_answer(study=study, participant_id=participant_id)["label"]
    texts = ["This is a check:", f"choose \u201c{label}\u201d"]
    rng = random.Random(salted_hmac("picture-drawing", f"{study.pk}:{participant_id}").hexdigest())
    outlines = [_outlines(text) for text in texts]
    width = int(max(line_width for line_width, _ in outlines) + 2 * MARGIN + 8)
    height = int(LINE * len(texts) + 2 * MARGIN)
    lines = []
    for index, (_, segments) in enumerate(outlines):
        slant, angle = rng.uniform(-0.12, 0.12), math.radians(rng.uniform(-1.5, 1.5))
        dx, dy = MARGIN + rng.uniform(0, 8), MARGIN + SIZE + index * LINE + rng.uniform(-2, 2)
        cos, sin = math.cos(angle), math.sin(angle)

        def transform(
            x: float, y: float, *, slant=slant, cos=cos, sin=sin, dx=dx, dy=dy
        ) -> tuple[float, float]:
            x = x + slant * y  # matplotlib's y points up, the picture's down
            return dx + x * cos + y * sin, dy + x * sin - y * cos

        lines.append(_path_data(segments, transform))
    return Picture(width=width, height=height, lines=lines)
