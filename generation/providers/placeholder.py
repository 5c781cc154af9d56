"""The test model: a provider kind that answers at once, here, with no network and no key, so a researcher can
walk the whole path (generation, review, launch as a dry run, participants, analysis) before choosing a real
model. Its replies are plausible placeholders put together from short stock sentences, chosen from a hash of the
request (the same request, the same reply; each prompt its own), never a model's words.

Marked as such wherever they appear: its adapter says `placeholder = True`, and `registry.placeholder_kinds`
names the provider kinds that do, for the admin's pages, the review list, the analysis and the exports
(generation.selectors); a study with a condition on it launches only as a confirmed dry run
(generation.design's launch hook)."""

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


def placeholder_reply(body: dict) -> str:
    """A stock reply chosen by the request's hash: three sentences, one from each list."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).digest()
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
