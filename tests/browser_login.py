"""Signing a browser test's page in through the site's own login form."""

from __future__ import annotations

LOGIN_TIMEOUT_MS = 30_000  # the first admin page compiles its templates on a busy machine


def sign_in(
    page, base_url: str, username: str, password: str, *, next_path="", login_path="/admin/login/", lands=""
):
    """Fills and submits the login form at `login_path` (`?next=next_path` when given) and waits for the page it
    lands on: `lands` (a URL pattern), else `next_path`, else the admin's home."""
    page.set_default_timeout(LOGIN_TIMEOUT_MS)
    page.goto(f"{base_url}{login_path}" + (f"?next={next_path}" if next_path else ""))
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lands or (f"**{next_path}" if next_path else f"{base_url}/admin/"))
    return page
