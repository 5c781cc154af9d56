"""The test model: a provider kind that answers at once, here, with no network and no key, so a researcher can
walk the whole path (generation, review, judges, a questionnaire study, launch as a dry run, participants,
analysis) before choosing a real model. Its replies are plausible placeholders, chosen from a hash of the request
(the same request, the same reply; each prompt its own), never a model's words.

It reads what it is asked as a model would, and answers in the form asked:

* a questionnaire (EmotionBench: "only reply the numbers from 1 to 5", then the items numbered 1..n): one line
  "n. value" per item, in range; on PANAS's own words the negative feelings run higher after a scenario and the
  positive ones lower, as the published models' do;
* a pairwise judge (a request to answer "A, B or SAME"): one verdict, the longer reply preferred more often than
  not, as LLM judges do;
* a judge rating on a scale (a request to answer with "one of: Good, Okay, Bad", the study's labels): one label,
  higher for a reply that names the feeling and offers care;
* anything else (a condition's reply to a prompt): three stock sentences of an empathetic reply.

A judge's verdict and a questionnaire's numbers carry no mark of their own (the judge and the questionnaire read
the whole reply strictly); like every reply of the test model they are marked by where they come from: its
adapter says `placeholder = True`, the model it names is "... (test model: placeholder reply)", and
`registry.placeholder_kinds` names the provider kinds that do, for the admin's pages, the judge's run page, the
review list, the analysis and the exports (generation.selectors); a study with a condition on it launches only as
a confirmed dry run (generation.design's launch hook)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from generation.providers.base import HTTPReply, ProviderAdapter, Reply, StreamChunk

MODEL = "test-model"
OPENINGS = (
    "That sounds really hard.",
    "I'm so sorry you're going through this.",
    "Oh, that must have been a lot to take in.",
    "I can hear how much this matters to you.",
    "Thank you for telling me about it.",
    "That is a big thing to carry.",
)
MIDDLES = (
    "It makes sense that you feel this way.",
    "Anyone in your place would feel the same.",
    "Your feelings about it are completely understandable.",
    "It sounds like you have been dealing with this for a while.",
    "You clearly care a great deal about it.",
    "It's okay to take some time with it.",
)
CLOSINGS = (
    "I'm here if you want to talk more.",
    "How are you holding up?",
    "What would help most right now?",
    "Be gentle with yourself today.",
    "Is there someone close to you who can be with you?",
    "I hope things get a little easier soon.",
)

# PANAS's items (Watson, Clark & Tellegen, 1988), by the feeling's sign.
POSITIVE_FEELINGS = frozenset(
    "interested excited strong enthusiastic proud alert inspired determined attentive active".split()
)
NEGATIVE_FEELINGS = frozenset(
    "distressed upset guilty scared hostile irritable ashamed nervous jittery afraid".split()
)
# What a caring reply says: a reply with more of these is rated higher on a scale.
CARE_WORDS = re.compile(
    r"\b(sorry|understand\w*|feel\w*|hear|must|sounds|care|here for|hope|help|together)\b", re.IGNORECASE
)

_RANGE = re.compile(r"\b(?:from|of)\s+(-?\d+)\s+to\s+(-?\d+)\b", re.IGNORECASE)
_ITEM_LINE = re.compile(r"^\s*(\d+)\.\s+(\S.*)$", re.MULTILINE)
_VERDICT_ASKED = re.compile(r"\bA\s*,\s*B\s*,?\s*or\s+SAME\b")
_LABELS_ASKED = re.compile(r"\bone of\s*:\s*([^\n]+?)\.?\s*$", re.IGNORECASE | re.MULTILINE)
_REPLY = re.compile(r"^\s*Reply ([AB])\s*:\s*(.*)$", re.MULTILINE)
_RATED = re.compile(r"^\s*(?:The reply|Reply|Response)\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_SCENARIO = "Imagine you are the protagonist"  # how generation/questionnaire.py SITUATION_PREAMBLE begins


def _digest(body: dict) -> bytes:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).digest()


def _asked(body: dict) -> str:
    """Everything the request says to the model: its system prompt and its messages, in order."""
    parts = [str(m.get("content") or "") for m in body.get("messages") or [] if isinstance(m, dict)]
    return "\n".join([str(body.get("system") or ""), *parts])


def _questionnaire(text: str, digest: bytes) -> str | None:
    """One in-range number per numbered item, or None when the request is not a questionnaire."""
    found = _RANGE.search(text)
    items = _ITEM_LINE.findall(text)
    if found is None or len(items) < 2:
        return None
    low, high = sorted(int(n) for n in found.groups())
    scenario = _SCENARIO in text
    lines = []
    for i, (number, label) in enumerate(items):
        word = label.strip().casefold()
        jitter = digest[i % len(digest)] % 3 - 1  # -1, 0 or +1
        if word in NEGATIVE_FEELINGS:
            share = 0.65 if scenario else 0.1
        elif word in POSITIVE_FEELINGS:
            share = 0.25 if scenario else 0.55
        else:
            share = 0.5
        value = round(low + share * (high - low)) + jitter
        lines.append(f"{number}. {min(high, max(low, value))}")
    return "\n".join(lines)


def _verdict(text: str, digest: bytes) -> str | None:
    """A, B or SAME, or None when the request asks for no verdict."""
    if not _VERDICT_ASKED.search(text):
        return None
    replies = dict(_REPLY.findall(text))
    a, b = len(replies.get("A", "")), len(replies.get("B", ""))
    roll = digest[0] % 10
    if abs(a - b) <= 0.1 * max(a, b, 1) or roll == 9:
        return "SAME"
    longer, shorter = ("A", "B") if a > b else ("B", "A")
    return longer if roll < 7 else shorter


def _label(text: str, digest: bytes) -> str | None:
    """One of the labels the request lists ("one of: Good, Okay, Bad", best first), or None when it lists none:
    the best for a reply that names the feeling and offers care, lower for one that does less."""
    found = _LABELS_ASKED.findall(text)
    labels = [label.strip(" .") for label in found[-1].split(",")] if found else []
    labels = [label for label in labels if label]
    if len(labels) < 2:
        return None
    rated = _RATED.findall(text)
    care = len(CARE_WORDS.findall(rated[-1] if rated else text))
    rank = 0 if care >= 3 else 1 if care >= 1 else 2
    if digest[0] % 4 == 0:  # one answer in four a step lower, as judges disagree with themselves
        rank += 1
    return labels[min(len(labels) - 1, round(rank * (len(labels) - 1) / 2))]


def placeholder_reply(body: dict) -> str:
    """The test model's reply to a request body: in the form the request asks for (see the module's
    docstring), chosen by the request's hash."""
    digest = _digest(body)
    asked = _asked(body)
    for reader in (_questionnaire, _verdict, _label):
        reply = reader(asked, digest)
        if reply is not None:
            return reply
    return " ".join(part[digest[i] % len(part)] for i, part in enumerate((OPENINGS, MIDDLES, CLOSINGS)))


class PlaceholderAdapter(ProviderAdapter):
    kind = "test"
    label = "Test model (replies generated locally)"
    placeholder: ClassVar[bool] = True
    word_seconds: ClassVar[float] = 0.04  # between the words of a streamed reply

    def request_build(self, *, model: str, system: str, messages: list[dict], params: dict) -> dict:
        body: dict[str, Any] = {"model": model, "messages": []}
        if system:
            body["messages"].append({"role": "system", "content": system})
        body["messages"] += list(messages)
        body.update(params)
        return body

    def send(self, *, provider, api_key: str, body: dict) -> HTTPReply:
        text = placeholder_reply(body)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        reply = {
            "id": f"test-{digest}",
            "model": f"{body.get('model') or MODEL} (test model: placeholder reply)",
            "text": text,
            "finish_reason": "stop",
        }
        return HTTPReply(status=200, text=json.dumps(reply))

    def stream(self, *, provider, api_key: str, body: dict, timeout: float) -> Iterator[StreamChunk]:
        """The placeholder reply streamed a word at a time, `word_seconds` apart (a live conversation's demo and
        tests: no network, no key), then its end with an estimate of the tokens."""
        data = json.loads(self.send(provider=provider, api_key=api_key, body=body).text)
        for word in re.findall(r"\S+\s*", data["text"]):
            time.sleep(self.word_seconds)
            yield StreamChunk(text=word)
        usage_in = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4 + 8
        end = Reply(
            text="",
            finish_reason=data["finish_reason"],
            model_returned=data["model"],
            response_id=data["id"],
            usage_in=usage_in,
            usage_out=len(data["text"].split()),
        )
        yield StreamChunk(end=end, raw=data)

    def reply_parse(self, data: dict) -> Reply:
        return Reply(
            text=data["text"],
            finish_reason=data["finish_reason"],
            model_returned=data["model"],
            response_id=data["id"],
        )

    def models_list(self, *, provider, api_key: str, timeout: float, limit: int = 500) -> list[str]:
        return [MODEL]
