"""The Perceived Empathy of Technology Scale (PETS; Schmidmaier, Rupp, Cvetanova & Mayer, CHI 2024; CC BY 4.0,
perceived-empathy-of-technology-scale.com): 10 items in two factors, Emotional Responsiveness (ER, 6 items) and
Understanding & Trust (UT, 4 items), each answered on a 0–100 slider from "strongly disagree" to "strongly agree",
in random order. The items say "the system"; here they say "my conversation partner", the same words whatever
the label shown, so the wording does not contradict (or repeat) the label factor. The wording was compared word
by word with the published items as public study implementations reproduce them; docs/chat.md says what could
and could not be checked."""

from __future__ import annotations

import random

ER = "er"
UT = "ut"
FACTORS = {ER: "Emotional Responsiveness", UT: "Understanding & Trust"}
PARTNER = "My conversation partner"

# (key, factor, text): the published items, "the system" read as the conversation partner.
PETS_ITEMS: tuple[tuple[str, str, str], ...] = (
    ("E1", ER, f"{PARTNER} considered my mental state."),
    ("E2", ER, f"{PARTNER} seemed emotionally intelligent."),
    ("E3", ER, f"{PARTNER} expressed emotions."),
    ("E4", ER, f"{PARTNER} sympathized with me."),
    ("E5", ER, f"{PARTNER} showed interest in me."),
    ("E6", ER, f"{PARTNER} supported me in coping with an emotional situation."),
    ("U1", UT, f"{PARTNER} understood my goals."),
    ("U2", UT, f"{PARTNER} understood my needs."),
    ("U3", UT, "I trusted my conversation partner."),
    ("U4", UT, f"{PARTNER} understood my intentions."),
)
KEYS = tuple(key for key, _, _ in PETS_ITEMS)
MIN, MAX = 0, 100


def pets_order(seed: int) -> list[str]:
    """The participant's item order: random, the same on every showing (seeded by the participant's seed)."""
    keys = list(KEYS)
    random.Random(f"pets-{seed}").shuffle(keys)
    return keys


def pets_scores(answers: dict[str, int]) -> dict[str, float]:
    """The factor scores: the mean of each factor's items (0–100). `answers` must hold every item."""
    return {
        factor: sum(answers[key] for key, f, _ in PETS_ITEMS if f == factor)
        / sum(1 for _, f, _ in PETS_ITEMS if f == factor)
        for factor in FACTORS
    }
