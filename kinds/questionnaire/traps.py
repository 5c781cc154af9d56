"""The questionnaire kind's authenticity traps (the rules they share with every kind are in studies/authenticity.py):
where they sit on the first page ("as you feel now") among the instrument's rows, and what their answers tell.

Consistency pairs: the page's first `trap_repeat_items` items (in the participant's order) asked again after all
the others (`repeat-<item>` rows); the picture check: one row among them (`picture`), asking for one of the
instrument's answers (`QUESTIONNAIRE.picture_options`). Their answers are kept with the page's run
(`QuestionnaireRun.traps`), never among its answers. Not on the second page: its answers are meant to change.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from studies import authenticity
from studies.answers import InvalidValue
from studies.models import Instrument, Participant, QuestionnaireRun, Study

from .kind import QUESTIONNAIRE

PICTURE_FIELD = "picture"  # the picture check's row: a value of the scale, or PICTURE_SKIP
PICTURE_SKIP = "skip"  # "I can neither see the picture nor hear the sound"
NEITHER = "I can neither see the picture nor hear the sound"
PICTURE_VIEW = "picture_view"  # the button that shows the picture check as a sound (or back), answers kept


class QuestionnaireAnswerRejected(InvalidValue):
    """Answers that do not fit the instrument or the page's traps (a missing row, a value off the scale)."""


@dataclass(frozen=True)
class Layout:
    """A phase's page, row by row: ("item", n), ("check", None), ("repeat", n): item n asked again (a consistency
    pair), ("picture", None): the picture check."""

    rows: list[tuple[str, int | None]]

    @property
    def repeats(self) -> list[int]:
        return [n for kind, n in self.rows if kind == "repeat"]

    @property
    def picture(self) -> bool:
        return any(kind == "picture" for kind, _ in self.rows)


def traps_layout(*, participant: Participant, phase: str, order: list[int]) -> Layout:
    """The rows of a phase's page, the same on every showing (seeded by the participant): the items in their
    `order` with the attention check in the middle; on the first page ("as you feel now") the study's traps, placed
    by the rule every kind shares (`authenticity.traps_place`): its first `trap_repeat_items` items asked again
    after all the others, and the picture check among the rows, never first. Not on the second page: there the
    answers are meant to change."""
    rows: list[tuple[str, int | None]] = [("item", n) for n in order]
    rows.insert(len(order) // 2, ("check", None))
    if phase == QuestionnaireRun.Phase.DEFAULT:
        study = participant.study
        authenticity.traps_place(
            rows,
            study=study,
            shown=order,
            repeat=lambda n: ("repeat", n),
            picture=lambda: ("picture", None),
            rng=random.Random(f"{participant.seed}:{phase}:traps"),
        )
    return Layout(rows)


def questionnaire_picture_options(study: Study) -> list[dict]:
    return QUESTIONNAIRE.picture_options(study) or []


def traps_scored(
    locked: Participant, instrument: Instrument, answers: dict[int, int], layout: Layout, traps: dict
) -> dict:
    """The traps' answers of a page checked against its layout (QuestionnaireAnswerRejected: a repeated item or
    the picture check missing, or an answer off the scale) and what they tell: per repeated item whether its two
    answers lie far apart (`authenticity.pair_far`), the picture check's outcome. Inside the answer's lock."""
    repeat = traps.get("repeat") or {}
    if sorted(repeat) != sorted(layout.repeats):
        raise QuestionnaireAnswerRejected("every item asked again needs one answer")
    if any(not instrument.scale_min <= v <= instrument.scale_max for v in repeat.values()):
        raise QuestionnaireAnswerRejected("an answer is outside the scale")
    values = list(range(instrument.scale_min, instrument.scale_max + 1))
    # Keyed by the second showing's row on the page (from 1), as other kinds key theirs by page.
    scored: dict = {
        "far": {
            layout.rows.index(("repeat", n)) + 1: authenticity.pair_far(answers[n], repeat[n], values)
            for n in layout.repeats
        }
    }
    picture = traps.get("picture")
    if layout.picture:
        options = questionnaire_picture_options(locked.study)
        if picture != PICTURE_SKIP and str(picture) not in [o["value"] for o in options]:
            raise QuestionnaireAnswerRejected("the picture check needs one answer")
        scored["picture"] = authenticity.picture_outcome(
            study=locked.study,
            participant_id=locked.pk,
            options=options,
            value=picture,
            skipped=picture == PICTURE_SKIP,
        )
    elif picture is not None:
        raise QuestionnaireAnswerRejected("this page has no picture check")
    return scored
