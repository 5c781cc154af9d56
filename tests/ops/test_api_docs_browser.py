"""/api/docs/ for people: axe-clean on a phone and a desktop (its operations open), a page that says how to sign
in for a browser turned away, JSON for API clients, and an analyst made by `analyst_token --create --password`
who signs in to the browser pages."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.test import Client
from playwright.sync_api import expect

from tests.a11y import axe_violations
from tests.screenshots import screenshot

ALL_IMPACTS = ("minor", "moderate", "serious", "critical")


@pytest.mark.django_db
def test_signed_out_a_browser_gets_a_page_with_a_sign_in_link_and_an_api_client_gets_json():
    page = Client().get("/api/docs/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    html = page.content.decode()
    assert (
        page.status_code == 401 and page["Content-Type"].startswith("text/html") and page["WWW-Authenticate"]
    )
    assert '<html lang="en">' in html and "<h1>Sign in to read the API documentation</h1>" in html
    assert 'href="/analysis/login/?next=%2Fapi%2Fdocs%2F"' in html
    for accept in ("application/json", "*/*"):  # not a browser: no page
        assert "Sign in" not in Client().get("/api/docs/", HTTP_ACCEPT=accept).content.decode()
    api = Client().get("/api/studies/", HTTP_ACCEPT="application/json")  # the API answers its clients in JSON
    assert api.status_code in (401, 403) and api["Content-Type"].startswith("application/json")
    script = Client().get("/api/docs/?script=", HTTP_ACCEPT="text/html")
    assert script.status_code in (401, 403) and "Sign in" not in script.content.decode()


@pytest.mark.django_db
def test_signed_in_without_the_right_a_browser_is_told_whom_to_ask(django_user_model):
    user = django_user_model.objects.create_user(username="visitor", password="visitor-pass-123")
    client = Client()
    client.force_login(user)
    page = client.get("/api/docs/", HTTP_ACCEPT="text/html")
    assert page.status_code == 403 and "Analysts group" in page.content.decode()


@pytest.mark.django_db
def test_analyst_token_create_with_password_makes_a_user_who_signs_in_to_the_browser_pages():
    out, err = io.StringIO(), io.StringIO()
    call_command("analyst_token", "newana", "--create", "--password", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert key and "\n" not in key  # stdout: the token alone, for scripts
    password = re.search(r"/analysis/login/: (\S+)", err.getvalue())[1]
    client = Client()
    signed_in = client.post("/analysis/login/", {"username": "newana", "password": password}, follow=True)
    assert signed_in.redirect_chain[-1][0] == "/analysis/"
    assert client.get("/api/docs/").status_code == 200
    err = io.StringIO()
    call_command("analyst_token", "tokenonly", "--create", stdout=io.StringIO(), stderr=err)
    assert "python manage.py changepassword tokenonly" in err.getvalue()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("viewport", ["phone", "desktop"])
def test_the_api_docs_pass_axe_signed_out_and_signed_in(live_server, page_at, staff_user, viewport):
    page = page_at(viewport)
    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator("h1")).to_have_text("Sign in to read the API documentation")
    screenshot(page, f"api-docs-signed-out-{viewport}")
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.get_by_role("link", name="Sign in").click()
    page.fill("#id_username", staff_user.username)
    page.fill("#id_password", "admin-pass-123")
    page.locator("form [type=submit]").click()
    page.wait_for_url(f"{live_server.url}/api/docs/")
    expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
    assert axe_violations(page) == []
    page.locator(".opblock-summary-control").first.click()
    expect(page.locator(".opblock-body").first).to_be_visible()
    page.wait_for_timeout(500)
    screenshot(page, f"api-docs-{viewport}")
    assert axe_violations(page) == []
