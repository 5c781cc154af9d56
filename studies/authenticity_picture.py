"""The picture check, for every kind that offers it: its picture and, for a person who cannot see it, its sound.

What it asks for is one of the kind's answers as its page shows them (`options`, each `{"value", "label"}`: the
rating kind's scale, the pairwise kind's three buttons), drawn per participant (studies/authenticity.py
`picture_answer`); the kind puts the check among its pages and scores the answer with `picture_outcome`.

The picture.

The instruction is part of the picture: each line of text is turned into the outlines of its letters (DejaVu Sans,
which ships with matplotlib, through `TextPath`), written as SVG path data, and slanted, turned and moved a little
by a transform drawn for the participant, so the page holds no text node, title or description that says the
answer, and no two participants' path data are the same string. A person reads it at a glance; software reading
the page's text (`innerText`, the DOM, the accessibility tree) finds only numbers. An agent that looks at a
screenshot can read it, and a program built to decode glyph outlines could too: the check catches agents that
answer from the page's text, which are most of them (docs/participants.md).
"""

from __future__ import annotations

import io
import math
import random
import struct
import wave
from dataclasses import dataclass
from functools import lru_cache

from django.http import HttpResponse
from django.utils.crypto import salted_hmac

from . import authenticity
from .models import Study

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


def picture_draw(*, study: Study, participant_id: int, options: list[dict]) -> Picture:
    """The participant's picture: "This is a check:" and "choose <the label asked for>", as letter outlines."""
    label = authenticity.picture_answer(study=study, participant_id=participant_id, options=options)["label"]
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


# --- the sound ---------------------------------------------------------------------------------------------
#
# "I can't see the picture" leads to the same page with the sound in place of the picture (`?check=sound`): a
# short recording of beeps, as many as the position of the answer the picture asks for (one beep for the first
# answer, two for the second...). A person using a screen reader plays it with the page's audio control and
# counts; software reading the page's text, DOM or accessibility tree finds only the control and picks an answer
# as on any page. The beeps' pitch, length, spacing and the quiet noise under them are drawn per participant, so
# no two participants' recordings are the same bytes and none names its count. Like the picture, a program built
# to decode it could (count bursts of sound): the check catches the agents that work from the page's text. Served
# by the kind's page itself (`?sound=wav`), only to the participant whose current page is the check, never cached.

RATE = 8000  # samples a second: a telephone's, enough for beeps


def beeps_asked(*, study: Study, participant_id: int, options: list[dict]) -> int:
    """How many beeps the participant's sound plays: the position (from 1) of the answer the check asks for."""
    asked = authenticity.picture_answer(study=study, participant_id=participant_id, options=options)
    return [option["value"] for option in options].index(asked["value"]) + 1


def sound_key(options: list[dict]) -> list[tuple[int, dict]]:
    """The sound page's key: each answer with its number of beeps."""
    return [(index + 1, option) for index, option in enumerate(options)]


def sound_make(*, study: Study, participant_id: int, options: list[dict]) -> bytes:
    """The participant's recording (16-bit mono WAV): a moment of quiet, the beeps, a moment of quiet."""
    rng = random.Random(salted_hmac("picture-sound", f"{study.pk}:{participant_id}").hexdigest())
    pitch, length = rng.uniform(480, 900), rng.uniform(0.14, 0.22)
    samples: list[float] = [0.0] * int(RATE * rng.uniform(0.4, 0.8))
    for _ in range(beeps_asked(study=study, participant_id=participant_id, options=options)):
        n = int(RATE * length)
        ramp = int(RATE * 0.01)  # soft edges: no clicks
        samples += [
            0.6 * math.sin(2 * math.pi * pitch * i / RATE) * min(1.0, i / ramp, (n - i) / ramp)
            for i in range(n)
        ]
        samples += [0.0] * int(RATE * rng.uniform(0.35, 0.5))
    samples += [0.0] * int(RATE * 0.4)
    out = io.BytesIO()
    with wave.open(out, "wb") as recording:
        recording.setnchannels(1)
        recording.setsampwidth(2)
        recording.setframerate(RATE)
        recording.writeframes(
            b"".join(
                struct.pack("<h", int(32767 * max(-1.0, min(1.0, s + rng.gauss(0, 0.01))))) for s in samples
            )
        )
    return out.getvalue()


def sound_response(participant, options: list[dict]) -> HttpResponse:
    """The participant's recording, for the kind's page `?sound=wav` while their current page is the picture
    check; never cached."""
    response = HttpResponse(
        sound_make(study=participant.study, participant_id=participant.pk, options=options),
        content_type="audio/wav",
    )
    response["Cache-Control"] = "no-store"
    return response


def picture_context(request, participant, options: list[dict]) -> dict:
    """What a kind's page shows for the picture check (templates/ratings/_picture.html and _picture_sound.html):
    the picture, or with `?check=sound` the sound and its key."""
    sound = request.GET.get("check") == "sound"
    return {
        "picture": picture_draw(study=participant.study, participant_id=participant.pk, options=options),
        "sound": sound,
        "sound_key": sound_key(options),
    }
