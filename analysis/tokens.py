"""Analysts' API tokens: hashed, expiring, optionally limited to one study.

* Issued by `analyst_token_create` (the admin's *API tokens* page, analysis/admin.py, and `manage.py
  analyst_token` for scripts): a random 40-hex-character key, shown once; only its SHA-256 is stored
  (AnalystToken.key_hash), so a database dump reveals no usable token. DRF's own Token model is not used (its
  admin page is removed: its tokens were never accepted here).
* Valid until `expires_at` (settings.ANALYST_TOKEN_DAYS after issue, 90 by default); an expired token is
  refused with 401 and says so.
* A token limited to a study reads that study only; any token reads studies that are not drafts only (a draft
  is visible to staff through their session).
* Sent as before: ``Authorization: Token <key>``.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from analysis.models import AnalystToken
from studies.models import Study

#: last_used_at is written at most this often per token (not on every request).
LAST_USED_EVERY = timedelta(minutes=5)


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def analyst_token_create(
    *, user, study: Study | None = None, days: int | None = None
) -> tuple[AnalystToken, str]:
    """A new token for `user`: the stored row and the key (shown once; only its hash is kept)."""
    key = secrets.token_hex(20)
    token = AnalystToken.objects.create(
        user=user,
        key_hash=token_hash(key),
        prefix=key[:8],
        study=study,
        expires_at=timezone.now() + timedelta(days=days or settings.ANALYST_TOKEN_DAYS),
    )
    return token, key


def analyst_token_issue(*, user, study: Study | None = None, days: int | None = None) -> str:
    """A new token for `user`: returns the key alone."""
    return analyst_token_create(user=user, study=study, days=days)[1]


class HashedTokenAuthentication(TokenAuthentication):
    """DRF's ``Token <key>`` header, checked against the stored hashes and the expiry."""

    def authenticate_credentials(self, key):
        token = AnalystToken.objects.select_related("user", "study").filter(key_hash=token_hash(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        if token.expires_at <= now:
            raise exceptions.AuthenticationFailed(
                "This token has expired: create a new one in the admin (API tokens)."
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
            AnalystToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token


def token_studies(request, studies):
    """The studies a request may read: all of them with a session; with a token, its study (if limited) and
    never a draft."""
    token = getattr(request, "auth", None)
    if not isinstance(token, AnalystToken):
        return studies
    studies = studies.exclude(state=Study.State.DRAFT)
    return studies.filter(pk=token.study_id) if token.study_id else studies


def token_allows_slug(request, slug: str) -> bool:
    return token_studies(request, Study.objects.filter(slug=slug)).exists()
