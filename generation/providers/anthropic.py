"""Anthropic's Messages API through the official `anthropic` SDK."""

from __future__ import annotations

from typing import Any

from generation.providers.base import Reply
from generation.providers.sdk import SDKAdapter


class AnthropicAdapter(SDKAdapter):
    kind = "anthropic"
    label = "Anthropic"
    sdk_name = "anthropic"
    client_class = "Anthropic"
    async_client_class = "AsyncAnthropic"

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

    def stream_create(self, client):
        """Server-sent events: the text deltas as they come, the id, model and input tokens from
        `message_start`, the stop reason and output tokens from `message_delta`."""
        return client.messages.create

    def stream_start(self) -> dict:
        return {"id": "", "model": "", "stop_reason": "", "usage": {}}

    def stream_event(self, data: dict, end: dict) -> str | None:
        if data.get("type") == "message_start":
            message = data.get("message") or {}
            end["id"], end["model"] = message.get("id") or "", message.get("model") or ""
            end["usage"].update(message.get("usage") or {})
        elif data.get("type") == "content_block_delta":
            return (data.get("delta") or {}).get("text")
        elif data.get("type") == "message_delta":
            end["stop_reason"] = (data.get("delta") or {}).get("stop_reason") or end["stop_reason"]
            end["usage"].update(data.get("usage") or {})
        return None

    def stream_end(self, end: dict) -> Reply:
        usage_in, usage_out = self.usage_read(end)
        return Reply(
            text="",
            finish_reason=end["stop_reason"],
            model_returned=end["model"],
            response_id=end["id"],
            usage_in=usage_in,
            usage_out=usage_out,
        )
