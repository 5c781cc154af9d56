"""The admin's messages live in the session (MESSAGE_STORAGE, config/settings.py): shown once, on the
page after the redirect, as with Django's default cookie storage."""

import pytest
from django.contrib.auth.models import Group

pytestmark = pytest.mark.django_db


def test_the_admin_shows_its_message_once_after_the_redirect(admin_client):
    response = admin_client.post("/admin/auth/group/add/", {"name": "Reviewers"}, follow=True)
    assert Group.objects.filter(name="Reviewers").exists()
    page = response.content.decode()
    assert "was added successfully" in page and "Reviewers" in page
    assert not any(cookie.startswith("messages") for cookie in response.cookies)
    assert "was added successfully" not in admin_client.get("/admin/auth/group/").content.decode()
