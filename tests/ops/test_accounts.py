"""Accounts (staff, analysts): 12-character passwords, signed out when idle or after a working day, and a
Permissions-Policy on every page."""

import time

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

pytestmark = pytest.mark.django_db


def test_a_password_under_12_characters_is_refused():
    with pytest.raises(ValidationError, match="at least 12 characters"):
        validate_password("Tr0ub4dor&3")  # 11
    validate_password("correct horse battery")


def test_an_idle_account_is_signed_out_and_an_active_one_is_not(staff_client, monkeypatch, settings):
    settings.ACCOUNT_IDLE_TIMEOUT_SECONDS = 1800
    now = [1_800_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    assert staff_client.get("/admin/").status_code == 200
    now[0] += 1700  # active within the limit
    assert staff_client.get("/admin/").status_code == 200
    now[0] += 1801  # idle longer than the limit
    response = staff_client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert "_auth_user_id" not in staff_client.session


def test_a_session_ends_after_its_maximum_however_active(staff_client, monkeypatch, settings):
    settings.ACCOUNT_SESSION_MAX_SECONDS = 3600
    now = [1_800_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    for _ in range(4):
        assert staff_client.get("/admin/").status_code == 200
        now[0] += 600
    now[0] += 1300
    assert staff_client.get("/admin/").status_code == 302


def test_every_page_has_a_permissions_policy(client, staff_client):
    for response in (client.get("/admin/login/"), staff_client.get("/admin/"), client.get("/no-such-page/")):
        assert (
            "camera=()" in response["Permissions-Policy"]
            and "geolocation=()" in response["Permissions-Policy"]
        )
