"""The picture check's sound: the same check for a person who cannot see the picture (docs/participants.md).

"I can't see the picture" leads to the item page with the sound in place of the picture (`?check=sound`): a short
recording of beeps, as many as the position of the answer the picture asks for (studies/authenticity.py
`picture_answer`: one beep for the scale's first answer, two for the second...). A person using a screen reader
plays it with the page's audio control and counts; software reading the page's text, DOM or accessibility tree
finds only the control, and picks an answer as on any item. The beeps' pitch, length, spacing and the quiet
noise under them are drawn per participant, so no two participants' recordings are the same bytes and none names
its count. Like the picture, a program built to decode it could (count bursts of sound): the check catches the
agents that work from the page's text. Served by the item page itself (`?sound=wav`), only to the participant whose
current page is the picture check, never cached.
"""

from __future__ import annotations

import io
import math
import random
import struct
import wave

from django.http import HttpResponse
from django.utils.crypto import salted_hmac

from studies import authenticity
from studies.models import Study

RATE = 8000  # samples a second: a telephone's, enough for beeps


def beeps_asked(study: Study, participant_id: int) -> int:
    """How many beeps the participant's sound plays: the position (from 1) of the answer the check asks for."""
    asked = authenticity.picture_answer(study=study, participant_id=participant_id)
    return [option["value"] for option in study.scale].index(asked["value"]) + 1


def sound_make(*, study: Study, participant_id: int) -> bytes:
    """The participant's recording (16-bit mono WAV): a moment of quiet, the beeps, a moment of quiet."""
    rng = random.Random(salted_hmac("picture-sound", f"{study.pk}:{participant_id}").hexdigest())
    pitch, length = rng.uniform(480, 900), rng.uniform(0.14, 0.22)
    samples: list[float] = [0.0] * int(RATE * rng.uniform(0.4, 0.8))
    for _ in range(beeps_asked(study, participant_id)):
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


def sound_response(participant) -> HttpResponse:
    """The participant's recording, for the item page's `?sound=wav` while their current page is the picture check
    (kinds/rating/pages.py `item_get`); never cached."""
    response = HttpResponse(
        sound_make(study=participant.study, participant_id=participant.pk), content_type="audio/wav"
    )
    response["Cache-Control"] = "no-store"
    return response
