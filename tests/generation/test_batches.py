"""OpenAI's Batch API against a loopback server speaking its wire format (files upload, batch create and retrieve,
file content): submitted items are held by the batch, collected once, stored with provenance at half price;
refused lines fail with their reason, everything else goes back to ordinary generation."""

import json
import re
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from werkzeug import Response as WResponse

from generation import batches
from generation.models import GenerationBatch, GenerationItem, ResponseProvenance
from generation.services.prompts import GenerationSetupError, generation_conditions
from studies.models import Response

from .conftest import json_response, make_provider, make_study, openai_body

pytestmark = pytest.mark.django_db


class FakeBatchAPI:
    """The four endpoints of OpenAI's Batch API a submission and its collection use."""

    def __init__(self, httpserver):
        self.files: dict[str, str] = {}
        self.batches: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.refuse_upload = False
        httpserver.expect_request("/v1/files", method="POST").respond_with_handler(self.upload)
        httpserver.expect_request("/v1/batches", method="POST").respond_with_handler(self.create)
        httpserver.expect_request(re.compile(r"^/v1/batches/[\w-]+$"), method="GET").respond_with_handler(
            self.retrieve
        )
        httpserver.expect_request(
            re.compile(r"^/v1/files/[\w-]+/content$"), method="GET"
        ).respond_with_handler(self.content)

    def upload(self, request):
        if self.refuse_upload:
            return json_response(
                {"error": {"message": "Invalid file format", "type": "invalid_request"}}, 400
            )
        assert request.form["purpose"] == "batch"
        file_id = f"file-in{len(self.files)}"
        self.files[file_id] = request.files["file"].read().decode()
        self.requests = [json.loads(line) for line in self.files[file_id].splitlines()]
        return json_response(
            {
                "id": file_id,
                "object": "file",
                "bytes": len(self.files[file_id]),
                "created_at": 1700000000,
                "filename": "requests.jsonl",
                "purpose": "batch",
                "status": "processed",
            }
        )

    def create(self, request):
        body = request.get_json()
        batch_id = f"batch_{len(self.batches)}"
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": body["completion_window"],
            "status": "validating",
            "created_at": 1700000000,
            "metadata": body.get("metadata"),
        }
        return json_response(self.batches[batch_id])

    def retrieve(self, request):
        return json_response(self.batches[request.path.rsplit("/", 1)[1]])

    def content(self, request):
        return WResponse(self.files[request.path.split("/")[3]], content_type="application/octet-stream")

    def finish(self, batch_id, answer, status="completed"):
        """Ends the batch: `answer(line)` gives (status_code, body) or None (the line is missing)."""
        output, errors = [], []
        for line in self.requests:
            answered = answer(line)
            if answered is None:
                continue
            code, body = answered
            record = {"id": f"r-{line['custom_id']}", "custom_id": line["custom_id"], "error": None}
            record["response"] = {"status_code": code, "request_id": "req", "body": body}
            (output if code == 200 else errors).append(json.dumps(record))
        self.files["file-out"] = "\n".join(output)
        self.files["file-err"] = "\n".join(errors)
        self.batches[batch_id].update(status=status, output_file_id="file-out", error_file_id="file-err")


@pytest.fixture
def batch_api(httpserver):
    return FakeBatchAPI(httpserver)


def _study(httpserver, n_prompts=5):
    provider = make_provider(httpserver, kind="openai")
    study = make_study(provider=provider, n_prompts=n_prompts)
    return study, generation_conditions(study=study)


def test_a_batch_holds_its_items_then_stores_refuses_and_gives_back_each_exactly_once(
    httpserver, api_key, batch_api
):
    study, conditions = _study(httpserver)
    [batch] = batches.batch_submit(study=study, conditions=conditions, started_by="ana")

    assert batch.status == "submitted" and batch.provider_batch_id == "batch_0" and batch.items_total == 5
    assert len(batch_api.requests) == 5
    first = batch_api.requests[0]
    assert first["url"] == "/v1/chat/completions" and first["body"]["model"] == "gpt-test"
    assert first["body"]["seed"] == 11 and "My dog passed away" in json.dumps(first["body"]["messages"])
    items = GenerationItem.objects.filter(condition=conditions[0])
    assert set(items.values_list("status", flat=True)) == {"running"}  # held: no worker calls them meanwhile
    assert batches.batch_poll(batch=batch).status == "submitted"  # still validating

    ids = [line["custom_id"] for line in batch_api.requests]

    def answer(line):
        if line["custom_id"] == ids[0]:
            return 400, {"error": {"message": "Invalid 'max_tokens'", "type": "invalid_request_error"}}
        if line["custom_id"] == ids[1]:
            return 500, {"error": {"message": "server error"}}
        if line["custom_id"] == ids[2]:
            return None  # missing from the output
        if line["custom_id"] == ids[4]:
            return 200, {"choices": []}  # a malformed body: given back, not stored
        return 200, openai_body(f"So sorry ({line['custom_id']}).")

    batch_api.finish("batch_0", answer)
    # Collected once: polling again changes nothing.
    collected = batches.batch_poll(batch=batch)
    again = batches.batch_poll(batch=collected)

    assert (collected.status, collected.items_stored, collected.items_failed, collected.items_returned) == (
        "completed",
        1,
        1,
        3,
    )
    assert again.items_stored == 1 and Response.objects.filter(condition=conditions[0]).count() == 1
    by_id = {f"item-{item.id}": item for item in items}
    assert by_id[ids[0]].status == "failed" and "Invalid 'max_tokens'" in by_id[ids[0]].last_error
    assert by_id[ids[1]].status == "pending" and "HTTP 500" in by_id[ids[1]].last_error
    assert by_id[ids[2]].status == "pending"
    assert by_id[ids[4]].status == "pending" and "malformed body" in by_id[ids[4]].last_error
    stored = by_id[ids[3]]
    assert stored.status == "done" and stored.response.text == f"So sorry ({ids[3]})."
    provenance = ResponseProvenance.objects.get(response=stored.response)
    assert provenance.request["_batch"] == "batch_0" and provenance.request["seed"] == 11
    assert (
        provenance.model_returned == "gpt-test-0613"
        and provenance.raw_response["usage"]["prompt_tokens"] == 120
    )
    full_price = Decimal(120) * Decimal("2.5") / 10**6 + Decimal(14) * Decimal(10) / 10**6
    assert provenance.cost == full_price / 2 and collected.cost == full_price / 2  # the batch price


def test_a_refused_upload_gives_every_item_back_and_says_why(httpserver, api_key, batch_api):
    study, conditions = _study(httpserver, n_prompts=3)
    batch_api.refuse_upload = True
    with pytest.raises(GenerationSetupError, match="Invalid file format"):
        batches.batch_submit(study=study, conditions=conditions)
    items = GenerationItem.objects.filter(condition=conditions[0])
    assert set(items.values_list("status", flat=True)) == {"pending"}
    assert set(items.values_list("attempts", flat=True)) == {0}
    batch = GenerationBatch.objects.get()
    assert batch.status == "failed" and "Invalid file format" in batch.error and batch.items_returned == 3


def test_an_expired_batch_gives_its_items_back_and_anthropic_providers_are_refused(
    httpserver, api_key, batch_api
):
    study, conditions = _study(httpserver, n_prompts=2)
    [batch] = batches.batch_submit(study=study, conditions=conditions)
    batch_api.finish("batch_0", lambda line: None, status="expired")
    ended = batches.batch_poll(batch=batch)
    assert ended.status == "failed" and "expired" in ended.error and ended.items_returned == 2
    assert set(GenerationItem.objects.values_list("status", flat=True)) == {"pending"}

    anthropic = make_provider(httpserver, kind="anthropic", name="claude")
    conditions[0].llm_config.provider = anthropic
    conditions[0].llm_config.save()
    with pytest.raises(GenerationSetupError, match="has no Batch API here"):
        batches.batch_submit(study=study, conditions=generation_conditions(study=study))


def test_the_command_submits_and_collects(httpserver, api_key, batch_api):
    _study(httpserver, n_prompts=2)
    out = StringIO()
    call_command("generate_responses", "gen-study", "--batch", stdout=out)
    assert "gpt: 2 items submitted as batch batch_0" in out.getvalue()
    batch_api.finish("batch_0", lambda line: (200, openai_body()))
    out = StringIO()
    call_command("generate_responses", "gen-study", "--batch-poll", stdout=out)
    assert "completed (completed), 2 items, 2 stored, 0 failed, 0 given back" in out.getvalue()
    assert GenerationItem.objects.filter(status="done").count() == 2


def test_the_admin_submits_collects_and_lists_batches(httpserver, api_key, batch_api, staff_client):
    study, conditions = _study(httpserver, n_prompts=3)
    url = f"/admin/generation/generationjob/study/{study.pk}/"
    page = staff_client.post(url, {"action": "batch_submit"}, follow=True).content.decode()
    assert "Submitted 3 items in 1 batches" in page and "batch_0" in page
    batch_api.finish("batch_0", lambda line: (200, openai_body()))
    page = staff_client.post(url, {"action": "batch_poll"}, follow=True).content.decode()
    assert "Checked the open batches." in page
    assert GenerationBatch.objects.get().status == "completed"
    assert Response.objects.filter(condition=conditions[0]).count() == 3
