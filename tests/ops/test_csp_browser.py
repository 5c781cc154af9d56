"""Under the Content-Security-Policy, the participant flow, the admin, the analysis and the API docs work in
Chromium with no console error and no CSP violation."""

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from analysis.permissions import ANALYSTS_GROUP
from tests.analysis.builders import build_rating_study, participants_from_counts
from tests.factories import rating_study_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class Watch:
    """Console errors, uncaught exceptions and CSP violations of one page, with the URL they happened on."""

    def __init__(self, page):
        self.problems: list[str] = []
        page.on(
            "console",
            lambda msg: msg.type == "error" and self.problems.append(f"{msg.text} ({msg.location})"),
        )
        page.on("pageerror", lambda exc: self.problems.append(f"{page.url}: {exc}"))
        # Every document reports its own violations to the console as errors too; this catches them even
        # where a browser would not log them.
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => console.error("
            "'CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
        )

    def visit(self, page, url: str) -> None:
        response = page.goto(url)
        assert response is not None and response.status < 400, (url, response and response.status)
        assert "Content-Security-Policy" in {k.title() for k in response.headers}, url


def test_the_participant_flow_runs_under_the_csp(live_server, page):
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=3)
    watch = Watch(page)
    watch.visit(page, f"{live_server.url}/s/{study.slug}/?PROLIFIC_PID=CSP1&STUDY_ID=S1&SESSION_ID=X1")
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    for number in (1, 2, 3):
        expect(page.locator(".progress-text")).to_have_text(f"Item {number} of 3")
        page.keyboard.press("3")  # participant.js (the keyboard shortcuts) runs under the policy
    expect(page.locator("[data-completion-code]")).to_have_text("C0MPLETE")
    assert watch.problems == []


def test_the_admin_the_analysis_and_the_api_docs_run_under_the_csp(live_server, page, django_user_model):
    people = participants_from_counts("human", {1: 10, 2: 10, 3: 10}) + participants_from_counts(
        "gpt4", {1: 5, 2: 10, 3: 15}
    )
    study = build_rating_study(slug="csp", conditions=["human", "gpt4"], participants=people).study
    user = django_user_model.objects.create_user(
        username="analyst", password="analyst-pass-123", is_staff=True, is_superuser=True
    )
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])
    watch = Watch(page)
    watch.visit(page, f"{live_server.url}/analysis/login/")
    page.fill("#id_username", "analyst")
    page.fill("#id_password", "analyst-pass-123")
    page.locator("form [type=submit]").click()
    page.wait_for_url(f"{live_server.url}/analysis/")
    for path in (
        f"/analysis/{study.slug}/",
        "/admin/",
        "/admin/studies/study/",
        f"/admin/studies/study/{study.pk}/change/",
        "/admin/studies/study/import/",
        "/admin/auth/user/add/",
    ):
        watch.visit(page, live_server.url + path)
    watch.visit(page, f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Empathy studies API")
    assert watch.problems == []
