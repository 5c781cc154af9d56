"""A participant's ticket: which participant a browser is, for the in-place answer, without reading its session.

The session (server-side, keyed by an unguessable cookie) names the participant of each study the browser
enrolled in (`views._remember`). Reading it costs a round trip to Redis; an answer posted in the background has
nothing else to ask Redis (its rate limit is counted by its own statement, studies/migrations/0014), so the
same fact travels in a cookie of its own, signed with the site's key: the ticket. It is set wherever the session
learns the participant (`remember`, then `attach` on the response), holds the participant's id signed for one
study (the salt names the study's slug) with the time it was signed, and is sent only to that study's pages
(the cookie's path). It expires with the session (`SESSION_COOKIE_AGE`) and is as private as the session's
cookie (HttpOnly, and Secure and SameSite as the session's).

Only `ratings/answer_path.py` reads it. Without a valid ticket (an older browser, another study's, tampered
with, expired) the answer reads the session as before. The session stays the record: the ticket is never the
only way to a participant, and nothing that reads the session reads the ticket.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.urls import reverse

_PENDING = "ratings_ticket"  # on a request: the (slug, participant id) whose ticket its response carries


def _signer(slug: str) -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=f"ratings.ticket:{slug}")


def remember(request, *, slug: str, participant_id: int) -> None:
    """The response to `request` carries the ticket of participant `participant_id` of study `slug`."""
    setattr(request, _PENDING, (slug, participant_id))


def attach(request, response) -> None:
    """Sets the ticket `remember` asked for on `response`."""
    pending = getattr(request, _PENDING, None)
    if pending is None:
        return
    slug, participant_id = pending
    response.set_cookie(
        settings.PARTICIPANT_TICKET_COOKIE_NAME,
        _signer(slug).sign(str(participant_id)),
        max_age=None if settings.SESSION_EXPIRE_AT_BROWSER_CLOSE else settings.SESSION_COOKIE_AGE,
        path=reverse("ratings:entry", kwargs={"slug": slug}),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite=settings.SESSION_COOKIE_SAMESITE,
    )


def participant_id(request, *, slug: str) -> int | None:
    """The participant of study `slug` the request's ticket names, or None (no ticket, or not a valid one for
    this study)."""
    value = request.COOKIES.get(settings.PARTICIPANT_TICKET_COOKIE_NAME)
    if not value:
        return None
    try:
        return int(_signer(slug).unsign(value, max_age=settings.SESSION_COOKIE_AGE))
    except (signing.BadSignature, ValueError):
        return None
