"""A researcher's whole path through the admin alone, in headless Chromium: log in, create a study, import a corpus,
add an LLM condition with a provider on a loopback server, test the connection, generate, review, preview as a
participant, launch, watch the live status while a participant (on a phone, in a browser of their own) rates,
close, analyse and export the ratings CSV. Every admin and analysis page visited passes axe-core (no serious or
critical violation); with SCREENSHOTS=DIR each step leaves a screenshot there (desktop, and the main pages on a
phone too; see tests/screenshots.py)."""

from __future__ import annotations

import csv
import io
import json
import re
import time

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from generation.models import ResponseEdit
from studies.models import Participant, Rating, Response, Study
from tests.a11y import axe_violations
from tests.generation.conftest import TEST_KEY, json_response, openai_body
from tests.ratings.test_participant_pages import walk
from tests.screenshots import screenshot
from tests.studies.helpers import public_csv, public_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"
SLUG = "empathy-replication"
FLAGGED = "As an AI language model, I cannot feel, but I am sorry."
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


@pytest.fixture
def in_process_generation(settings, monkeypatch):
    """No broker, as under `make run`: generation started in the admin runs on threads of the web process."""
    from config.celery import app

    monkeypatch.setenv("TEST_GEN_API_KEY", TEST_KEY)
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    settings.REDIS_URL = ""
    yield
    app.conf.task_always_eager = eager


class Path_:
    """The researcher's browser: screenshots and axe on every page it looks at."""

    def __init__(self, page, base: str):
        self.page, self.base = page, base
        self.violations: list[str] = []
        self.wide: list[str] = []  # pages that scroll sideways
        self.n = 0

    def look(self, name: str, *, phone: bool = False) -> None:
        self.violations += axe_violations(self.page)
        self.n += 1
        screenshot(self.page, f"researcher-{self.n:02d}-{name}-desktop")
        self.wide += self._wider_than_the_screen(name)
        if phone:
            self.page.set_viewport_size(PHONE)
            screenshot(self.page, f"researcher-{self.n:02d}-{name}-phone")
            self.wide += self._wider_than_the_screen(name)
            self.page.set_viewport_size(DESKTOP)

    def _wider_than_the_screen(self, name: str) -> list[str]:
        width = self.page.evaluate("document.documentElement.scrollWidth")
        screen = self.page.viewport_size["width"]
        return [f"{name}: {width} px wide at {screen} px"] if width > screen else []

    def go(self, path: str) -> None:
        response = self.page.goto(self.base + path)
        assert response.status == 200, (path, response.status)


def test_a_researcher_runs_a_study_through_the_admin_alone(
    live_server, browser, page_at, httpserver, in_process_generation, tmp_path
):
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)

    # The loopback provider: one answer needs a review, the rest are fine.
    def chat(request):
        body = json.loads(request.get_data())
        if body.get("max_tokens") == 5:  # the connection test
            return json_response(openai_body("OK", model="gpt-loop-0613"))
        asked = body["messages"][-1]["content"]
        # Each prompt its own reply (one canned reply for every prompt would be flagged as such).
        situation = re.search(r"Situation (\d+),", asked)
        text = (
            FLAGGED
            if "Situation 2," in asked
            else f"That sounds so hard; I'm here for you (about {situation and situation.group(1)})."
        )
        return json_response(openai_body(text, model="gpt-loop-0613"))

    httpserver.expect_request("/v1/chat/completions").respond_with_handler(chat)

    page = page_at("desktop")
    page.set_default_timeout(30_000)  # the first admin pages compile their templates on a busy machine
    r = Path_(page, live_server.url)

    # 1. Log in.
    r.go("/admin/login/")
    r.look("login")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}/admin/")
    r.look("home")

    # 2. Create a study.
    r.go("/admin/studies/study/add/")
    page.locator("#id_title").press_sequentially("Empathy replication")
    expect(page.locator("#id_slug")).to_have_value(SLUG)  # filled from the title
    page.locator("#id_items_per_participant").fill("4")
    page.locator("#id_platform").select_option("none")
    page.locator("#id_completion_code").fill("C0DE2026")
    r.look("study-add")
    page.get_by_role("button", name="Save and continue editing").first.click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    assert list(Study.objects.values_list("slug", flat=True)) == [SLUG], page.locator(
        ".messagelist"
    ).inner_text()
    study = Study.objects.get(slug=SLUG)
    r.look("study-change", phone=True)

    # 3. Import a corpus (six prompts with the human baseline's responses).
    page.get_by_role("link", name="Import corpus").click()
    corpus = tmp_path / "corpus.csv"
    corpus.write_bytes(public_csv([row[:6] for row in public_rows(6)], header=[
        "dialog_id", "emotion", "sentiment", "situation", "speaker_uttr", "response_human"
    ]))  # fmt: skip
    expect(page.locator("#id_study_slug")).to_have_value(SLUG)
    page.locator("#id_file").set_input_files(str(corpus))
    r.look("import", phone=True)
    page.get_by_role("button", name="Import").click()
    expect(page.locator(".messagelist")).to_contain_text("6 prompts")
    assert study.prompts.count() == 6

    # 4. Add an LLM condition beside the imported human one.
    r.go(f"/admin/studies/study/{study.pk}/change/")
    r.look("study-with-corpus")
    page.locator("#conditions-group .add-row a").click()
    row = page.locator("#conditions-group tr.dynamic-conditions").last
    row.locator("input[name$='-name']").fill("gpt")
    row.locator("select[name$='-kind']").select_option("llm")
    page.get_by_role("button", name="Save and continue editing").first.click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert set(study.conditions.values_list("name", flat=True)) == {"human", "gpt"}

    # 5. A provider on the loopback server, tested before anything depends on it.
    r.go("/admin/generation/provider/add/")
    page.locator("#id_name").fill("loopback")
    page.locator("#id_base_url").fill(httpserver.url_for("/v1"))
    page.locator("#id_api_key_env").fill("TEST_GEN_API_KEY")
    r.look("provider-add")
    page.get_by_role("button", name="Save and continue editing").click()
    page.get_by_role("link", name="Test connection").first.click()
    page.get_by_label("Model to ask").fill("gpt-loop")
    page.get_by_role("button", name="Test connection").click()
    result = page.locator("#connection-result")
    expect(result).to_contain_text("It works.")
    expect(result).to_contain_text("gpt-loop-0613")
    assert TEST_KEY not in page.content()
    r.look("provider-test", phone=True)

    # 6. The condition's configuration, then generation from the study's own page.
    r.go("/admin/generation/llmconditionconfig/add/")
    page.locator("#id_condition").select_option(index=1)
    page.locator("#id_provider").select_option(label="loopback")
    page.locator("#id_model").fill("gpt-loop")
    page.locator("#id_system_prompt").fill("You are talking with someone who feels {emotion}.")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    r.look("llm-config", phone=True)
    r.go(f"/admin/studies/study/{study.pk}/change/")
    page.get_by_role("link", name="Generate LLM responses").click()
    r.look("generation-before")
    page.get_by_role("button", name="Start / resume all LLM conditions").click()
    expect(page.locator(".messagelist")).to_contain_text("Started: 6 new items")
    for _ in range(60):
        if Response.objects.filter(condition__name="gpt").count() == 6:
            break
        time.sleep(0.25)
    page.reload()
    expect(page.locator("#generation-progress")).to_contain_text("6 / 6")
    r.look("generation-done", phone=True)
    sent = json.loads(httpserver.log[-1][0].get_data())
    assert sent["messages"][0]["content"].startswith("You are talking with someone who feels ")
    assert "{emotion}" not in sent["messages"][0]["content"]

    # 7. Review: the flagged response is edited (with its audit trail).
    page.get_by_role("link", name="Review flagged responses").click()
    r.look("review-queue", phone=True)
    page.locator("#result_list tbody tr th a").first.click()
    page.locator("#id_text").fill("I'm so sorry. That sounds really hard.")
    r.look("review-edit")
    page.get_by_role("button", name="Save", exact=True).click()
    assert not Response.objects.filter(condition__study=study, review=Response.Review.FLAGGED).exists()
    edit = ResponseEdit.objects.get(response__condition__study=study)
    assert (edit.before, edit.editor_username) == (FLAGGED, "researcher")

    # 8. Preview as a participant (never counted).
    r.go(f"/s/{SLUG}/?preview=1")
    expect(page.get_by_role("button", name="I agree, start the study")).to_be_visible()
    screenshot(page, f"researcher-{r.n:02d}b-preview-desktop")

    # 9. Launch.
    r.go(f"/admin/studies/study/{study.pk}/change/")
    page.locator(".object-tools a.state-launch").click()
    r.look("launch")
    page.get_by_role("button", name="Launch").click()
    study.refresh_from_db()
    assert study.state == Study.State.LIVE
    link = page.locator("#participant-link").inner_text()

    # 10. The live status while a participant rates on their phone.
    r.go(f"/admin/studies/study/{study.pk}/status/")
    r.look("status-before", phone=True)
    participant = page_at("phone")
    participant.goto(link)
    participant.get_by_role("button", name="Start the study").click()
    expect(participant.get_by_role("button", name="I agree, start the study")).to_be_visible()
    steps = walk(participant, participant.url)
    assert steps[-1] == "done" and steps.count("items") == 4
    screenshot(participant, f"researcher-{r.n:02d}b-participant-done-phone")
    page.get_by_role("link", name="Refresh now").click()
    expect(page.locator("#participants-table")).to_contain_text("1")
    r.look("status-after", phone=True)
    assert Rating.objects.filter(assignment__participant__study=study).count() == 4
    assert Participant.objects.filter(study=study, is_preview=False).count() == 1

    # 11. Close.
    r.go(f"/admin/studies/study/{study.pk}/change/")
    page.locator(".object-tools a.state-close").click()
    r.look("close")
    page.get_by_role("button", name="Close").click()
    study.refresh_from_db()
    assert study.state == Study.State.CLOSED

    # 12. Analyse (the workers compute the dashboard ahead; here the test does what the worker would) and export.
    from analysis import snapshots

    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)
    r.go(f"/admin/studies/study/{study.pk}/change/")
    page.locator(".object-tools").get_by_role("link", name="Analysis").click()
    expect(page.locator("h1")).to_contain_text(study.title)
    r.look("dashboard", phone=True)
    with page.expect_download() as info:
        page.get_by_role("link", name="Ratings (long format, CSV)").click()
    with open(info.value.path(), encoding="utf-8") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    assert len(rows) == 4 and {row["condition"] for row in rows} <= {"human", "gpt"}

    assert r.violations == [], "\n".join(r.violations)
    assert r.wide == []
