"""Anthropic's Messages API through the official `anthropic` SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from generation.providers.base import Reply, StreamChunk
from generation.providers.sdk import SDKAdapter


class AnthropicAdapter(SDKAdapter):
    kind = "anthropic"
    label = "Anthropic"
    sdk_name = "anthropic"
    client_class = "Anthropic"

    def request_build(self, *, model: str, system: str, messages: list[dict], params: dict) -> dict:
        body: dict[str, Any] = {"model": model, "max_tokens": int(params.get("max_tokens") or 1024)}
        if system:
            body["system"] = system
        body["messages"] = list(messages)
        for name in ("temperature", "top_p", "stop_sequences"):
            if name in params:
                body[name] = params[name]
        # Anthropic has no seed parameter: it is recorded in provenance by the caller, not sent.
        return body

    def create_method(self, client):
        return client.messages.with_raw_response.create

    def reply_parse(self, data: dict) -> Reply:
        if data.get("type") == "error":
            raise KeyError("error body with status 200")
        text = "".join(part.get("text", "") for part in data["content"] if part.get("type") == "text")
        usage_in, usage_out = self.usage_read(data)
        return Reply(
            text=text,
            finish_reason=data.get("stop_reason") or "",
            model_returned=data.get("model") or "",
            response_id=data.get("id") or "",
            usage_in=usage_in,
            usage_out=usage_out,
        )

    def usage_read(self, data: dict) -> tuple[int | None, int | None]:
        usage = data.get("usage") or {}
        return usage.get("input_tokens"), usage.get("output_tokens")

    def stream(self, *, provider, api_key: str, body: dict, timeout: float) -> Iterator[StreamChunk]:
        """Server-sent events of `body` sent with `stream: true`: the text deltas as they come, the id, model and
        input tokens from `message_start`, the stop reason and output tokens from `message_delta`; `timeout`
        bounds the wait for each event."""
        create = self.client(provider, api_key).messages.create
        end: dict[str, Any] = {"id": "", "model": "", "stop_reason": "", "usage": {}}
        with (
            self.errors_classified(provider),
            create(**self.arguments(create, {**body, "stream": True}), timeout=timeout) as events,
        ):
            for event in events:  # closed on the way out, also when the reader stops early
                data = event.model_dump(exclude_none=True)
                if data.get("type") == "message_start":
                    message = data.get("message") or {}
                    end["id"], end["model"] = message.get("id") or "", message.get("model") or ""
                    end["usage"].update(message.get("usage") or {})
                elif data.get("type") == "content_block_delta":
                    text = (data.get("delta") or {}).get("text")
                    if text:
                        yield StreamChunk(text=text)
                elif data.get("type") == "message_delta":
                    end["stop_reason"] = (data.get("delta") or {}).get("stop_reason") or end["stop_reason"]
                    end["usage"].update(data.get("usage") or {})
        usage_in, usage_out = self.usage_read(end)
        reply = Reply(
            text="",
            finish_reason=end["stop_reason"],
            model_returned=end["model"],
            response_id=end["id"],
            usage_in=usage_in,
            usage_out=usage_out,
        )
        yield StreamChunk(end=reply, raw=end)
