"""OpenAI-compatible chat completions (OpenAI, vLLM, TGI, Ollama, llama.cpp, Together, Gemini's compatible
endpoint) through the official `openai` SDK, with OpenAI's Batch API (`/v1/files` and `/v1/batches`: a day's
turnaround at half the price) where the endpoint offers it."""

from __future__ import annotations

import json
from decimal import Decimal

from generation.providers.base import (
    BatchAPI,
    BatchLine,
    BatchState,
    BatchSubmitted,
    Moderation,
    Reply,
    status_error,
)
from generation.providers.sdk import SDKAdapter

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
OPEN_STATES = frozenset({"validating", "in_progress", "finalizing", "cancelling"})


class OpenAICompatAdapter(SDKAdapter, BatchAPI):
    kind = "openai"
    label = "OpenAI-compatible (OpenAI, vLLM, TGI, Ollama, llama.cpp, Together, Gemini)"
    sdk_name = "openai"
    client_class = "OpenAI"
    async_client_class = "AsyncOpenAI"
    price_factor = Decimal("0.5")  # OpenAI bills Batch API tokens at half the synchronous price

    def request_build(self, *, model: str, system: str, messages: list[dict], params: dict) -> dict:
        body = {
            "model": model,
            "messages": ([{"role": "system", "content": system}] if system else []) + list(messages),
        }
        for name in ("temperature", "top_p", "max_tokens", "seed", "stop"):
            if name in params:
                body[name] = params[name]
        return body

    def create_method(self, client):
        return client.chat.completions.with_raw_response.create

    def reply_parse(self, data: dict) -> Reply:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content")
        if isinstance(text, list):  # some compatible servers return content parts
            text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
        usage_in, usage_out = self.usage_read(data)
        return Reply(
            text=text or "",
            finish_reason=choice.get("finish_reason") or "",
            model_returned=data.get("model") or "",
            system_fingerprint=data.get("system_fingerprint") or "",
            response_id=data.get("id") or "",
            usage_in=usage_in,
            usage_out=usage_out,
        )

    def usage_read(self, data: dict) -> tuple[int | None, int | None]:
        usage = data.get("usage") or {}
        return usage.get("prompt_tokens"), usage.get("completion_tokens")

    def stream_create(self, client):
        return client.chat.completions.create

    def stream_body(self, body: dict) -> dict:
        """Server-sent chunks, the usage asked for in the last one (`stream_options.include_usage`)."""
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def stream_start(self) -> dict:
        return {"finish_reason": "", "model": "", "id": "", "system_fingerprint": "", "usage": None}

    def stream_event(self, data: dict, end: dict) -> str | None:
        for key in ("model", "id", "system_fingerprint"):
            end[key] = data.get(key) or end[key]
        end["usage"] = data.get("usage") or end["usage"]
        texts = []
        for choice in data.get("choices") or []:
            texts.append((choice.get("delta") or {}).get("content") or "")
            end["finish_reason"] = choice.get("finish_reason") or end["finish_reason"]
        return "".join(texts)

    def stream_end(self, end: dict) -> Reply:
        usage_in, usage_out = self.usage_read(end)
        return Reply(
            text="",
            finish_reason=end["finish_reason"],
            model_returned=end["model"],
            system_fingerprint=end["system_fingerprint"],
            response_id=end["id"],
            usage_in=usage_in,
            usage_out=usage_out,
        )

    def moderate(self, *, provider, api_key: str, text: str, model: str, timeout: float) -> Moderation:
        """`POST /v1/moderations` through the SDK."""
        with self.errors_classified(provider):
            answer = self.client(provider, api_key).moderations.create(
                model=model, input=text, timeout=timeout
            )
        result = answer.results[0]
        flagged = tuple(
            sorted(name for name, on in result.categories.model_dump(by_alias=True).items() if on)
        )
        return Moderation(flagged=bool(result.flagged), categories=flagged, model=answer.model or model)

    # --- Batch API ----------------------------------------------------------------------------------------

    def batch_submit(
        self, *, provider, api_key: str, requests: list[tuple[str, dict]], metadata: dict
    ) -> BatchSubmitted:
        lines = [
            json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body})
            for custom_id, body in requests
        ]
        client = self.client(provider, api_key)
        with self.errors_classified(provider):
            uploaded = client.files.create(
                file=("requests.jsonl", "\n".join(lines).encode()), purpose="batch"
            )
            created = client.batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata=metadata,
            )
        return BatchSubmitted(batch_id=created.id, status=created.status or "", input_file_id=uploaded.id)

    def batch_state(self, *, provider, api_key: str, batch_id: str) -> BatchState:
        with self.errors_classified(provider):
            remote = self.client(provider, api_key).batches.retrieve(batch_id)
        errors = getattr(getattr(remote, "errors", None), "data", None) or []
        return BatchState(
            status=remote.status,
            ended=remote.status not in OPEN_STATES,
            completed=remote.status == "completed",
            output_file_id=remote.output_file_id or "",
            error_file_id=remote.error_file_id or "",
            errors=[f"{getattr(e, 'code', '')}: {getattr(e, 'message', e)}" for e in errors],
        )

    def batch_results(self, *, provider, api_key: str, state: BatchState) -> list[BatchLine]:
        client = self.client(provider, api_key)
        with self.errors_classified(provider):
            texts = [client.files.content(f).text for f in (state.output_file_id, state.error_file_id) if f]
        return [self._batch_line(line) for text in texts for line in text.splitlines() if line.strip()]

    def _batch_line(self, line: str) -> BatchLine:
        try:
            record = json.loads(line)
            custom_id = str(record["custom_id"])
        except (ValueError, KeyError, TypeError):
            return BatchLine(custom_id="")
        response = record.get("response") or {}
        status_code = response.get("status_code")
        body = response.get("body")
        if status_code == 200 and isinstance(body, dict):
            return BatchLine(custom_id=custom_id, body=body)
        error = record.get("error") or (body.get("error") if isinstance(body, dict) else None)
        message = error.get("message", "") if isinstance(error, dict) else str(error or "")
        status = status_code if isinstance(status_code, int) else 500  # no status: the batch failed the line
        return BatchLine(custom_id=custom_id, error=status_error(status, message))
