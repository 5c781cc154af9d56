"""What a judge is asked and how its reply is read, one format per shape of answer; a study's kind names its format
(`StudyKind.judge_format`, one of the objects at the bottom; None for `SCALE`), so the judge's machinery (rows,
claims, retries, spend, batches, run pages, commands) is one for every kind and never asks which kind it serves.

* `SCALE` (the rating kind): one reply rated on the study's scale; one unit per response.
* `PAIRS` (the pairwise kind): two replies to one prompt, shown as A and B; the verdict is A, B or about the same,
  with "both inadequate" as a separate flag. Every pair of conditions on every prompt is one unit in each order
  (A/B and B/A), so a verdict that follows the position rather than the replies shows as a flip
  (kinds/pairwise/judge_analysis.py).

A unit is (response id, versus id or None): the JudgeRating row's `response` and `versus`.
"""

from __future__ import annotations

import re
from itertools import combinations, permutations
from typing import TYPE_CHECKING

from generation.providers import TransientProviderError
from studies.kinds import kind_of, resolved
from studies.models import RESPONSE_ELIGIBLE, Response

if TYPE_CHECKING:
    from studies.models import Condition, Study

Unit = tuple[int, int | None]

#: The fields of a response a scale rubric may use.
RUBRIC_PLACEHOLDERS = ("situation", "speaker_utterance", "emotion", "response", "scale")

# The seed study's definitions of Good / Okay / Bad, in our own words. {scale} lists the study's labels.
DEFAULT_RUBRIC = (
    "You rate how empathetic a reply is in a short conversation.\n\n"
    "A person described a situation in which they felt {emotion}, and said something about it. Someone replied.\n"
    "Rate the reply:\n"
    "- Good: the reply shows it understands what the person feels and why, and responds with care; it fits "
    "the situation and reads like something a caring person would say.\n"
    "- Okay: the reply is relevant and not unkind, but generic, shallow, or only partly acknowledges the feeling.\n"
    "- Bad: the reply misreads or ignores the feeling, is off-topic, dismissive, inappropriate, or incoherent.\n\n"
    "Situation: {situation}\n"
    "What they said: {speaker_utterance}\n"
    "The reply: {response}\n\n"
    "Answer with exactly one word, one of: {scale}."
)

#: The fields a pairwise rubric may use.
PAIR_PLACEHOLDERS = ("situation", "speaker_utterance", "emotion", "reply_a", "reply_b")

DEFAULT_PAIR_RUBRIC = (
    "You compare how empathetic two replies are in a short conversation.\n\n"
    "A person described a situation in which they felt {emotion}, and said something about it. Two people "
    "replied. A reply is more empathetic when it shows it understands what the person feels and why, and "
    "responds with care, in a way that fits the situation.\n\n"
    "Situation: {situation}\n"
    "What they said: {speaker_utterance}\n"
    "Reply A: {reply_a}\n"
    "Reply B: {reply_b}\n\n"
    "Which reply is more empathetic? Answer with exactly one of A, B or SAME (about equally empathetic). If both "
    "replies are inadequate (they misread or ignore the feeling, are dismissive, off-topic or incoherent), add "
    "BOTH INADEQUATE after it, as in: SAME BOTH INADEQUATE. Write nothing else."
)

# Verdict codes stored in JudgeRating.value for a comparison: the reply shown as A (`response`), as B (`versus`).
VERDICT_A, VERDICT_B, VERDICT_SAME = 1, 2, 3
VERDICT_NAMES = {VERDICT_A: "A", VERDICT_B: "B", VERDICT_SAME: "SAME"}


def scale_labels_problem(scale) -> str | None:
    """Why a judge cannot answer on this scale (labels missing or equal up to case), or None."""
    labels = [str(option.get("label", "")).strip() for option in scale or [] if isinstance(option, dict)]
    if len(labels) < 2 or not all(labels):
        return "the study's scale needs at least two labelled values for a judge to name one"
    if len({label.casefold() for label in labels}) != len(labels):
        return "the study's scale has two labels that differ only in case; a judge's reply could not tell them apart"
    return None


def _label_pattern(label: str) -> re.Pattern:
    words = [re.escape(w) for w in re.findall(r"\w+", label.casefold())]
    return re.compile(r"(?<!\w)" + r"\W+".join(words) + r"(?!\w)")


def reply_value(text: str, *, scale: list[dict]) -> int:
    """The scale value whose label the reply names, case-insensitively and whatever the punctuation or mark-up
    around it; a label inside a longer matching label counts once. TransientProviderError("unparseable") when it
    names none or several."""
    lowered = (text or "").casefold()
    spans = []  # (start, end, value)
    for option in scale:
        for match in _label_pattern(str(option["label"])).finditer(lowered):
            spans.append((match.start(), match.end(), int(option["value"])))
    # A match inside a longer matching label ("good" within "very good") is that label's, not its own.
    kept = {
        value
        for start, end, value in spans
        if not any(s <= start and end <= e and (e - s) > (end - start) for s, e, _ in spans)
    }
    if len(kept) == 1:
        return kept.pop()
    labels = ", ".join(str(option["label"]) for option in scale)
    shown = (text or "").strip()[:200]
    what = "names none of" if not kept else "names more than one of"
    raise TransientProviderError("unparseable", f"the reply {what} the labels ({labels}): {shown!r}")


# A verdict: optional "Verdict:"/"Answer:", then A, B, SAME or ABOUT THE SAME, then optionally BOTH INADEQUATE;
# mark-up and punctuation between words are ignored, nothing else is allowed.
_VERDICT = re.compile(
    r"(?:(?:verdict|answer)\s+)?(a|b|same|about the same)(\s+both inadequate)?", re.IGNORECASE
)
_VERDICT_CODES = {"a": VERDICT_A, "b": VERDICT_B, "same": VERDICT_SAME, "about the same": VERDICT_SAME}


def verdict_read(text: str) -> tuple[int, bool]:
    """(verdict code, both inadequate) of a comparison's reply. Strict: the whole reply, once punctuation and
    mark-up are set aside, must be one verdict ("A", "**B**", "Verdict: SAME", "same; both inadequate");
    anything else is TransientProviderError("unparseable"), quoting the reply (retried, then the row fails)."""
    words = " ".join(re.findall(r"[a-z]+", (text or "").casefold()))
    match = _VERDICT.fullmatch(words)
    if match is None:
        shown = (text or "").strip()[:200]
        raise TransientProviderError(
            "unparseable", f"the reply is not one of A, B or SAME (optionally + BOTH INADEQUATE): {shown!r}"
        )
    return _VERDICT_CODES[match.group(1)], match.group(2) is not None


class ScaleFormat:
    """One reply rated on the study's scale (the seed study's Good / Okay / Bad)."""

    placeholders = RUBRIC_PLACEHOLDERS
    default_rubric = DEFAULT_RUBRIC
    answers = "each response's rating on the study's scale"  # the run page's description
    rates_scale = True  # its ratings are calibrated by analysis/judge_report.py

    def problems(self, study: Study) -> list[str]:
        problem = scale_labels_problem(study.scale)
        return [problem] if problem else []

    def fields(self, *, study: Study, response: Response, versus: Response | None) -> dict[str, str]:
        return {"response": response.text, "scale": ", ".join(str(o["label"]) for o in study.scale)}

    def responses_of(self, study: Study):
        """The responses it rates: every response of the study (a kind's format may rate others)."""
        return Response.objects.filter(condition__study=study)

    def read(self, text: str, *, study: Study) -> tuple[int, bool | None]:
        return reply_value(text, scale=study.scale), None

    def units(
        self, *, study: Study, conditions: list[Condition] | None = None, responses: set[int] | None = None
    ) -> list[Unit]:
        """Every response the format rates (`responses_of`; in `conditions`; among `responses` ids)."""
        found = self.responses_of(study)
        if conditions is not None:
            found = found.filter(condition__in=conditions)
        if responses is not None:
            found = found.filter(pk__in=responses)
        return [(pk, None) for pk in found.order_by("pk").values_list("pk", flat=True)]

    def unit_count(self, *, study: Study, conditions: list[Condition] | None = None) -> int:
        """How many units `units` gives (one COUNT: the run page asks on every refresh)."""
        found = self.responses_of(study)
        return (found if conditions is None else found.filter(condition__in=conditions)).count()


class PairFormat:
    """Two replies to one prompt compared, in both orders (see the module's docstring)."""

    placeholders = PAIR_PLACEHOLDERS
    default_rubric = DEFAULT_PAIR_RUBRIC
    answers = (
        "each pair's verdict in both orders: every two conditions' replies to a prompt compared, each shown as A "
        "once (a condition's row below counts the orders in which its reply was A)"
    )
    rates_scale = False

    def problems(self, study: Study) -> list[str]:
        return []

    def fields(self, *, study: Study, response: Response, versus: Response | None) -> dict[str, str]:
        if versus is None:
            raise ValueError("a comparison needs the reply shown as B")
        return {"reply_a": response.text, "reply_b": versus.text}

    def read(self, text: str, *, study: Study) -> tuple[int, bool | None]:
        return verdict_read(text)

    def units(
        self, *, study: Study, conditions: list[Condition] | None = None, responses: set[int] | None = None
    ) -> list[Unit]:
        """Every pair of two conditions' replies a participant could be shown (`RESPONSE_ELIGIBLE`) on the same
        prompt, in both orders; with `conditions`, the pairs involving one of them (a new model against the
        stored ones); with `responses` (ids), the pairs showing one of them (a reply just generated)."""
        replies: dict[int, dict[int, int]] = {}  # prompt -> condition -> response
        found = Response.objects.filter(RESPONSE_ELIGIBLE, condition__study=study).order_by("prompt_id", "pk")
        for prompt, condition, pk in found.values_list("prompt_id", "condition_id", "pk"):
            replies.setdefault(prompt, {})[condition] = pk
        wanted = None if conditions is None else {c.pk for c in conditions}
        units: list[Unit] = []
        for by_condition in replies.values():
            for pair in combinations(sorted(by_condition), 2):
                if wanted is not None and not wanted.intersection(pair):
                    continue
                if responses is not None and not responses.intersection(by_condition[c] for c in pair):
                    continue
                units.extend((by_condition[a], by_condition[b]) for a, b in permutations(pair))
        return units

    def unit_count(self, *, study: Study, conditions: list[Condition] | None = None) -> int:
        return len(self.units(study=study, conditions=conditions))


SCALE = ScaleFormat()
PAIRS = PairFormat()


def judge_format_of(study: Study) -> ScaleFormat | PairFormat:
    """The format of the judges of a study's kind (`StudyKind.judge_format`); ValueError for a kind that is not
    judged."""
    kind = kind_of(study)
    if not kind.judged:
        raise ValueError(f"judges do not answer {study.kind} studies")
    return SCALE if kind.judge_format is None else resolved(kind.judge_format)
