"""The Content-Security-Policy header, built once per process (config/middleware.py) and the same as
django-csp builds it on every response, including where a view changes or drops it."""

import pytest
from csp.utils import build_policy

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.ops.urls")]


def test_every_page_gets_the_policy_the_settings_give(client):
    policy = build_policy()
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert client.get("/form/")["Content-Security-Policy"] == policy
    assert client.get("/no-such-page/")["Content-Security-Policy"] == policy
    assert "Content-Security-Policy-Report-Only" not in client.get("/form/")


def test_a_view_that_widens_or_drops_the_policy_still_gets_its_own(client):
    more = client.get("/csp-more/")["Content-Security-Policy"]
    assert "https://images.example" in more and "script-src 'self'" in more
    assert "Content-Security-Policy" not in client.get("/csp-none/")
    assert "https://images.example" not in client.get("/form/")["Content-Security-Policy"]


def test_changed_settings_change_the_header(client, settings):
    client.get("/form/")  # the policy of the current settings, built and kept
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = {"DIRECTIVES": {"img-src": ["'self'"]}}
    response = client.get("/form/")
    assert response["Content-Security-Policy"] == "default-src 'none'" == build_policy()
    report_only = response["Content-Security-Policy-Report-Only"]
    assert "img-src 'self'" in report_only and report_only == build_policy(report_only=True)
