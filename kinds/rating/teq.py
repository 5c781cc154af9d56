"""The Toronto Empathy Questionnaire (Spreng, McKinnon, Mar & Levine, 2009, J. Pers. Assess. 91(1)).

16 statements answered Never / Rarely / Sometimes / Often / Always. Positively worded items score
0, 1, 2, 3, 4; the negatively worded items 2, 4, 7, 10, 11, 12, 14 and 15 are reverse-scored (4 … 0).
The total (0–64) is the sum; higher means more empathy.
"""

from __future__ import annotations

ITEMS: dict[int, str] = {
    1: "When someone else is feeling excited, I tend to get excited too.",
    2: "Other people's misfortunes do not disturb me a great deal.",
    3: "It upsets me to see someone being treated disrespectfully.",
    4: "I remain unaffected when someone close to me is happy.",
    5: "I enjoy making other people feel better.",
    6: "I have tender, concerned feelings for people less fortunate than me.",
    7: "When a friend starts to talk about his/her problems, I try to steer the conversation towards "
    "something else.",
    8: "I can tell when others are sad even when they do not say anything.",
    9: "I find that I am \u201cin tune\u201d with other people's moods.",
    10: "I do not feel sympathy for people who cause their own serious illnesses.",
    11: "I become irritated when someone cries.",
    12: "I am not really interested in how other people feel.",
    13: "I get a strong urge to help when I see someone who is upset.",
    14: "When I see someone being treated unfairly, I do not feel very much pity for them.",
    15: "I find it silly for people to cry out of happiness.",
    16: "When I see someone being taken advantage of, I feel kind of protective towards him/her.",
}

# Stored answer codes, in the order they are shown, with their labels.
OPTIONS: list[tuple[str, str]] = [
    ("never", "Never"),
    ("rarely", "Rarely"),
    ("sometimes", "Sometimes"),
    ("often", "Often"),
    ("always", "Always"),
]
_POINTS = {code: points for points, (code, _label) in enumerate(OPTIONS)}

REVERSE_SCORED: frozenset[int] = frozenset({2, 4, 7, 10, 11, 12, 14, 15})
MAX_SCORE = 4 * len(ITEMS)


def item_score(number: int, answer: str) -> int:
    """Points for one answer: 0–4, reversed for the negatively worded items."""
    points = _POINTS[answer]
    return 4 - points if number in REVERSE_SCORED else points


def teq_score(answers: dict[int, str]) -> int:
    """The TEQ total of a complete set of answers {item number: answer code}."""
    missing = set(ITEMS) - set(answers)
    if missing:
        raise ValueError(f"TEQ items {sorted(missing)} are unanswered.")
    return sum(item_score(number, answers[number]) for number in ITEMS)
