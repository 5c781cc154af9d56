"""A researcher's whole path from the admin's home, in headless Chromium, with no JSON typed anywhere: log in, "New
study", its guided setup step by step (import a corpus, an LLM condition with a provider on a loopback server and
its key typed in the admin and its connection tested, its model picked from the provider's own list, generation,
review, consent in Markdown (a link rendered, a planted script and handler inert) and instructions, a worked example and an attention check chosen by label, exclusion rules as
switches, quotas against power, preview), launch, a frozen field amended from its link on the study's page, five participants from one address (each in a browser of their
own, on a phone), watch the live status, close, analyse, export the ratings and report.html, create an API token in the admin and read the
API with it, read the API's documentation, extend the study as a wave starting from a condition picked in a list,
and generate the wave's new condition with the test model (placeholder replies made locally, marked as such). Every admin, analysis
and API documentation page visited passes axe-core (no serious or critical violation) and fits the screen; with
SCREENSHOTS=DIR each step leaves a screenshot there at 1280×800 and the researcher's pages at 390×844 too
(tests/screenshots.py)."""

from __future__ import annotations

import csv
import io
import json
import re
import time
import urllib.error
import urllib.request

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect

from generation.models import LLMConditionConfig, Provider, ResponseEdit
from kinds.rating.models import Rating
from studies.models import Participant, Response, Study
from tests.a11y import axe_violations
from tests.generation.conftest import TEST_KEY, json_response, openai_body
from tests.ratings.test_participant_pages import walk
from tests.screenshots import screenshot
from tests.studies.helpers import public_csv, public_rows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"
SLUG = "empathy-replication"
FLAGGED = "As an AI language model, I cannot feel, but I am sorry."
# Markdown with a heading and a link, and HTML planted to run: it must stay text.
CONSENT = (
    "# Why we ask\nYou will rate a few short replies. Read [our study page](https://example.org/study).\n\n"
    "You may stop at any time.\n\n<script>window.planted = 1</script>\n\n"
    '<img src="x" onerror="window.planted = 2">'
)
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


@pytest.fixture
def in_process_generation(settings):
    """No broker, as under `make run`: generation started in the admin runs on threads of the web process."""
    from config.celery import app

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


def test_a_researcher_runs_a_study_from_the_home_page_without_typing_json(
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
    httpserver.expect_request("/v1/models").respond_with_json(
        {
            "object": "list",
            "data": [{"id": name, "object": "model"} for name in ("gpt-loop", "gpt-loop-mini")],
        }
    )

    page = page_at("desktop")
    page.set_default_timeout(30_000)  # the first admin pages compile their templates on a busy machine
    r = Path_(page, live_server.url)

    def setup_step(name: str) -> None:
        page.get_by_role("navigation", name="Setup steps").get_by_role("link", name=re.compile(name)).click()
        expect(page.locator("#step-title")).to_contain_text(name)
        r.look(f"setup-{name.split()[0].lower()}", phone=True)

    # 1. Log in: the home page lists the studies first, with "New study".
    r.go("/admin/login/")
    r.look("login")
    page.get_by_label("Username").fill("researcher")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}/admin/")
    expect(page.get_by_role("heading", name="Your studies", exact=True)).to_be_visible()
    r.look("home", phone=True)

    # 2. New study: a draft, then its setup.
    page.get_by_role("link", name="New study").click()
    page.get_by_label("Title").fill("Empathy replication")
    page.get_by_label("Kind of study").select_option("rating")
    page.get_by_label("Recruiting platform").select_option("none")
    r.look("new-study", phone=True)
    page.get_by_role("button", name="Create the draft").click()
    expect(page.locator(".messagelist")).to_contain_text(f"Created the draft “{SLUG}”")
    study = Study.objects.get(slug=SLUG)
    expect(page.locator(".setup-steps")).to_contain_text("Corpus: prompts and responses")
    r.look("setup", phone=True)

    # 3. Step 1, the corpus: six prompts with the human baseline's responses.
    setup_step("Corpus")
    page.get_by_role("link", name="Import a corpus").click()
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

    # 4. Step 2, conditions and their models: an LLM condition beside the imported human one...
    r.go(f"/admin/studies/study/{study.pk}/setup/conditions/")
    page.get_by_role("link", name="Add or change conditions").click()
    page.locator("#conditions-group .add-row a").click()
    row = page.locator("#conditions-group tr.dynamic-conditions").last
    row.locator("input[name$='-name']").fill("gpt")
    row.locator("select[name$='-kind']").select_option("llm")
    page.locator("#id_items_per_participant").fill("4")
    page.get_by_role("button", name="Save and continue editing").first.click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert set(study.conditions.values_list("name", flat=True)) == {"human", "gpt"}
    r.look("study-change", phone=True)
    assert page.locator("textarea[name=scale], textarea[name=exclusion_rules]").count() == 0  # no JSON boxes

    # ... a provider on the loopback server, its key typed in the admin (never shown again), tested at once ...
    r.go("/admin/generation/provider/add/")
    page.locator("#id_name").fill("loopback")
    page.locator("#id_base_url").fill(httpserver.url_for("/v1"))
    page.locator("#id_api_key").fill(TEST_KEY)
    r.look("provider-add", phone=True)
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    assert page.locator("#id_api_key").input_value() == "" and TEST_KEY not in page.content()
    page.get_by_role("link", name="Test connection").first.click()
    expect(page.locator("#id_model-models-note")).to_contain_text("2 models listed by the provider")
    page.get_by_label("Model to ask").fill("gpt-loop")
    page.get_by_role("button", name="Test connection").click()
    result = page.locator("#connection-result")
    expect(result).to_contain_text("It works.")
    expect(result).to_contain_text("gpt-loop-0613")
    assert TEST_KEY not in page.content()
    r.look("provider-test", phone=True)

    # ... its model, picked from the provider's own list, from the step's link (the condition chosen already) ...
    r.go(f"/admin/studies/study/{study.pk}/setup/conditions/")
    expect(page.locator(".setup-advice")).to_contain_text("condition 'gpt' has no model yet")
    page.get_by_role("link", name="Choose the model of “gpt”").click()
    expect(page.locator("#id_condition option:checked")).to_contain_text("gpt")
    page.locator("#id_provider").select_option(value=str(Provider.objects.get(name="loopback").pk))
    expect(page.locator("#id_model-models-note")).to_contain_text("2 models listed by the provider")
    listed = page.locator("#id_model-models option").evaluate_all("options => options.map(o => o.value)")
    assert listed == ["gpt-loop", "gpt-loop-mini"]
    page.locator("#id_model").fill(listed[0])
    page.locator("#id_system_prompt").fill("You are talking with someone who feels {emotion}.")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    r.look("llm-config", phone=True)

    # ... then generation and review, from the same step.
    r.go(f"/admin/studies/study/{study.pk}/setup/conditions/")
    page.get_by_role("link", name="Generate and review LLM responses").click()
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
    page.get_by_role("link", name="Review flagged responses").click()
    r.look("review-queue", phone=True)
    page.locator("#result_list tbody tr th a").first.click()
    page.locator("#id_text").fill("I'm so sorry. That sounds really hard.")
    r.look("review-edit")
    page.get_by_role("button", name="Save", exact=True).click()
    assert not Response.objects.filter(condition__study=study, review=Response.Review.FLAGGED).exists()
    edit = ResponseEdit.objects.get(response__condition__study=study)
    assert (edit.before, edit.editor_username) == (FLAGGED, "researcher")
    r.go(f"/admin/studies/study/{study.pk}/setup/conditions/")
    expect(page.locator(".setup-steps li.current")).to_contain_text("done")

    # 5. Step 3, consent and instructions, and a worked example rated by its label: forms, not JSON.
    setup_step("Consent and instructions")
    expect(page.locator(".problems")).to_contain_text("the consent text is empty")
    page.get_by_role("link", name="Edit the texts").click()
    page.locator(".markdown-template summary").click()  # the consent template, put in the box by its button
    page.get_by_role("button", name="Put this template in the box").click()
    expect(page.locator("#id_consent_text")).to_have_value(re.compile(r"^# What this study is about"))
    page.locator("#id_consent_text").fill(CONSENT)
    page.locator("#id_instructions_text").fill("Say how empathetic each reply is.")
    page.locator("#id_worked_examples_0").fill("sad")
    page.locator("#id_worked_examples_1").fill("My dog died last week.")
    page.locator("#id_worked_examples_2").fill("I still expect him at the door.")
    page.locator("#id_worked_examples_3").fill("I'm so sorry. He was family.")
    page.locator("#id_worked_examples_4").select_option(label="Good")
    page.locator("#id_worked_examples_5").fill("It names the loss and stays with the speaker.")

    # 6. Step 4, checks: an attention check whose expected answer is chosen by its label; exclusion switches.
    page.locator("#attention_checks-group .add-row a").click()
    check = page.locator("#attention_checks-group .dynamic-attention_checks").last
    check.locator("input[name$='-after_item']").fill("2")
    check.locator("select[name$='-expected_value']").select_option(label="Okay")
    check.locator("textarea[name$='-situation']").fill("My sister flies home next week.")
    check.locator("textarea[name$='-speaker_utterance']").fill("I keep counting the days.")
    check.locator("textarea[name$='-response_text']").fill(
        "To show you are reading, please choose Okay here."
    )
    page.get_by_label("Exclude participants answering too fast").check()
    page.locator("#id_completion_code").fill("C0DE2026")
    page.get_by_role("button", name="Save and continue editing").first.click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    study.refresh_from_db()
    assert study.worked_examples[0]["rating"] == 3 and study.exclusion_rules["too_fast"] == {
        "min_median_ms": 1500
    }
    assert study.attention_checks.get().expected_value == 2

    # 7. Step 5, quotas against power and coverage; step 6, the preview (never counted).
    r.go(f"/admin/studies/study/{study.pk}/setup/")
    setup_step("Quotas, power and coverage")
    expect(page.locator(".quota-notes")).to_contain_text("gpt: the quota of 200 per condition")
    # Power on the researcher's own assumptions: the published study's shares until others are typed.
    expect(page.locator("#power-shares")).to_contain_text("the shares are the published study")
    needed = page.locator(".launch-power tbody tr").first.locator("td").nth(1).inner_text()
    page.get_by_label("gpt (%)").fill("12, 38, 50")
    page.get_by_role("button", name="Recompute power").click()
    expect(page.locator(".launch-power")).to_contain_text(
        "Bad 12.0 %, Okay 38.0 %, Good 50.0 % (typed on this page)"
    )
    assert page.locator(".launch-power tbody tr").first.locator("td").nth(1).inner_text() != needed
    r.look("setup-quotas-typed", phone=True)
    setup_step("Preview")
    with page.expect_popup() as popup:
        page.get_by_role("link", name="Preview as participant").click()
    preview = popup.value
    expect(preview.get_by_role("button", name="I agree, start the study")).to_be_visible()
    prose = preview.locator(".prose")
    expect(prose.get_by_role("heading", name="Why we ask", level=2)).to_be_visible()
    link = prose.get_by_role("link", name="our study page")
    assert link.get_attribute("href") == "https://example.org/study"
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert prose.locator("script, img, [onerror]").count() == 0
    expect(prose).to_contain_text("<script>window.planted = 1</script>")  # shown as the text it is
    assert preview.evaluate("window.planted") is None
    expect(prose).to_contain_text("each page also records how it was answered")  # the fixed paragraph
    r.violations += axe_violations(preview)
    screenshot(preview, f"researcher-{r.n:02d}b-preview-desktop")
    preview.set_viewport_size(PHONE)
    screenshot(preview, f"researcher-{r.n:02d}b-preview-phone")
    preview.close()

    # 8. Step 7: nothing is missing; launch.
    setup_step("Recruiting and launch")
    expect(page.locator(".setup-state, .state-line")).to_contain_text("nothing stops its launch")
    page.locator(".setup-links").get_by_role("link", name="Launch").click()
    r.look("launch", phone=True)
    page.get_by_role("button", name="Launch").click()
    study.refresh_from_db()
    assert study.state == Study.State.LIVE
    link = page.locator("#participant-link").inner_text()

    # A frozen field, read-only on the live study's page, amended from its own link.
    expect(page.locator("#id_quota_per_condition")).to_be_disabled()
    assert (
        page.locator("select#id_kind").count() == 0
        and page.get_by_role("link", name="Import corpus").count() == 0
    )
    r.look("live-study", phone=True)
    page.get_by_role("link", name="Amend this field: Quota per condition").click()
    page.locator("#id_quota_per_condition").fill("150")
    page.locator("#id_reason").fill("The pilot showed that 150 participants per condition are enough.")
    r.look("amend", phone=True)
    page.get_by_role("button", name="Record the amendment").click()
    expect(page.locator(".messagelist")).to_contain_text("Amended quota_per_condition")
    study.refresh_from_db()
    assert study.quota_per_condition == 150

    # 9. Five participants from one address (the test's own), each on a phone in a browser of their own, while
    # the researcher watches the live status.
    r.go(f"/admin/studies/study/{study.pk}/status/")
    r.look("status-before", phone=True)
    for n in range(5):
        participant = page_at("phone")
        participant.goto(link)
        participant.get_by_role("button", name="Start the study").click()
        steps = walk(participant, participant.url)
        assert steps[-1] == "done" and steps.count("items") == 5, steps  # four responses and the check
        screenshot(participant, f"researcher-{r.n:02d}b-participant-{n}-done-phone")
        participant.context.close()
    page.get_by_role("link", name="Refresh now").click()
    expect(page.locator("#participants-table tfoot")).to_contain_text("5")
    # The declared rules while the study runs, as the analysis will apply them: these five answered in a blink.
    expect(page.locator("#flagged-table")).to_contain_text("too fast")
    r.look("status-after", phone=True)
    r.go(f"/admin/studies/participant/?study__id__exact={study.pk}")
    expect(page.locator("#result_list")).to_contain_text("too fast")
    r.look("participants-flagged", phone=True)
    assert Participant.objects.filter(study=study, is_preview=False, status="completed").count() == 5
    assert (
        Rating.objects.filter(assignment__participant__study=study, assignment__kind="response").count() == 20
    )

    # 10. Close.
    r.go(f"/admin/studies/study/{study.pk}/change/")
    page.locator(".object-tools a.state-close").click()
    r.look("close")
    page.get_by_role("button", name="Close").click()
    study.refresh_from_db()
    assert study.state == Study.State.CLOSED

    # 11. Analyse (the workers compute the dashboard ahead; here the test does what the worker would) and export.
    from analysis import snapshots

    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)
    r.go("/admin/")
    expect(page.locator(".home-studies")).to_contain_text("Closed")
    page.locator(".home-studies").get_by_role("link", name=f"Analysis of {SLUG}").click()
    expect(page.locator("h1")).to_contain_text(study.title)
    r.look("dashboard", phone=True)
    with page.expect_download() as info:
        page.get_by_role("link", name="Ratings (long format, CSV)").click()
    with open(info.value.path(), encoding="utf-8") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    assert len(rows) == 20 and {row["condition"] for row in rows} <= {"human", "gpt"}
    with page.expect_download() as info:
        page.get_by_role("link", name="report.html").click()
    assert info.value.suggested_filename.endswith(".html")
    with open(info.value.path(), encoding="utf-8") as fh:
        report = fh.read()
    assert f"({SLUG})" in report and "<table" in report  # the analysis in one file
    # An API token from the admin, shown once, read by a script.
    r.go("/admin/analysis/analysttoken/add/")
    page.get_by_label("Study").select_option(value=str(study.pk))
    page.get_by_label("Valid for (days)").fill("7")
    r.look("token-add", phone=True)
    page.get_by_role("button", name="Save", exact=True).click()
    key = page.locator("#token-key").input_value()
    r.look("token-issued", phone=True)
    api = f"{live_server.url}/api/studies/{SLUG}/"
    with urllib.request.urlopen(
        urllib.request.Request(api, headers={"Authorization": f"Token {key}"})
    ) as got:
        assert json.load(got)["participants"] == 5
    export = urllib.request.Request(api + "exports/ratings.csv", headers={"Authorization": f"Token {key}"})
    with urllib.request.urlopen(export) as got:
        assert len(list(csv.DictReader(io.StringIO(got.read().decode())))) == 20
    refused = urllib.request.Request(api + "exports/ratings.csv", headers={"Authorization": "Token wrong"})
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(refused)
    assert answer.value.code == 401 and json.load(answer.value) == {"detail": "Invalid token."}
    r.go("/api/docs/")  # the same numbers through the API: its documentation, signed in as the researcher
    expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
    expect(page.locator(".token-help")).to_contain_text("Getting a token")
    r.look("api-docs", phone=True)

    # 12. Extend as a wave, starting from the parent's LLM condition picked in a list.
    r.go(f"/admin/studies/study/{study.pk}/change/")
    page.get_by_role("link", name="Extend as a wave").click()
    page.get_by_label("New conditions").fill("gpt6")
    page.get_by_label("Start from condition").select_option("gpt")
    r.look("extend", phone=True)
    page.get_by_role("button", name="Create the wave").click()
    expect(page.locator(".messagelist")).to_contain_text("Created the wave")
    wave = Study.objects.get(parent=study)
    assert LLMConditionConfig.objects.get(condition__study=wave, condition__name="gpt6").model == "gpt-loop"
    r.look("wave", phone=True)

    # 13. The wave's new condition answered by the test model: no key, no network, marked as placeholders.
    r.go("/admin/generation/provider/add/")
    page.locator("#id_name").fill("test-model")
    page.locator("#id_kind").select_option(label="Test model (replies generated locally)")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    config = LLMConditionConfig.objects.get(condition__study=wave, condition__name="gpt6")
    r.go(f"/admin/generation/llmconditionconfig/{config.pk}/change/")
    page.locator("#id_provider").select_option(label="test-model")
    page.locator("#id_model").fill("test-model")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    r.go(reverse("admin:generation_study", args=[wave.pk]))
    page.locator("#condition-gpt6").get_by_role("button", name="Start / resume").click()
    for _ in range(60):
        if Response.objects.filter(condition__study=wave, condition__name="gpt6").count() == 6:
            break
        time.sleep(0.25)
    page.reload()
    expect(page.locator("#condition-gpt6")).to_contain_text("6 / 6")
    expect(page.locator("#condition-gpt6")).to_contain_text("Test model: placeholder replies")
    r.look("test-model-generated", phone=True)
    texts = set(
        Response.objects.filter(condition__study=wave, condition__name="gpt6").values_list("text", flat=True)
    )
    assert len(texts) >= 5  # each prompt its own placeholder

    assert r.violations == [], "\n".join(r.violations)
    assert r.wide == []
