"""EmotionBench's fixed data and the helpers every EmotionBench import shares."""

from __future__ import annotations

from dataclasses import dataclass, field

# The eight negative emotions of EmotionBench, in the paper's order. Data, not code paths: everything that
# loops over emotions reads this tuple.
EMOTIONS: tuple[str, ...] = (
    "Anger",
    "Anxiety",
    "Depression",
    "Frustration",
    "Jealousy",
    "Guilt",
    "Fear",
    "Embarrassment",
)
# Other spellings found in the published files (crowd.xlsx headers).
EMOTION_ALIASES: dict[str, str] = {"Angry": "Anger", "Jealous": "Jealousy"}

# PANAS anchors (Watson, Clark & Tellegen 1988), for files that do not carry them.
PANAS_ANCHORS: list[str] = [
    "very slightly or not at all",
    "a little",
    "moderately",
    "quite a bit",
    "extremely",
]

SITUATION_PROMPT_PREFIX = "Imagine you are the protagonist in the scenario:"


class EmotionBenchImportError(ValueError):
    """A file that cannot be imported; the message says where the problem is."""


_QUOTES = str.maketrans({'"': "'", "\u201c": "'", "\u201d": "'", "\u2018": "'", "\u2019": "'"})


def normalise_text(text: str) -> str:
    """For matching texts: whitespace, case and the kind of quote marks do not count."""
    return " ".join(str(text).translate(_QUOTES).casefold().split())


def emotion_canonical(*, name: str) -> str | None:
    """The canonical emotion for a spelling, or None if it is not one of the eight."""
    name = name.strip()
    if name in EMOTIONS:
        return name
    return EMOTION_ALIASES.get(name)


@dataclass
class ImportSummary:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"created {self.created}, updated {self.updated}, unchanged {self.unchanged}", *self.notes]
