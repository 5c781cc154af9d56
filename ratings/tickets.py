"""A participant's ticket: which participant a browser is, in a signed cookie instead of a session.

A participant's browser keeps no session: writing one at enrolment cost a row in PostgreSQL and a round trip
to Redis, and reading it a round trip on every page. The participant of each study the browser enrolled in
(`views._remember`) travels in a cookie of its own, signed with the site's key: the ticket. It is set wherever
the browser becomes a participant (`remember`, then `attach` on the response), holds the participant's id
signed for one study (the salt names the study's slug) with the time it was signed, and is sent only to that
study's pages (the cookie's path). It expires as a session would (`SESSION_COOKIE_AGE`) and is as private as
the session's cookie (HttpOnly, and Secure and SameSite as the session's). Nobody can make one without the
site's key, so it names only the participant it was given to, as the session's unguessable key did.

`selectors.participant_id_for_request` reads it first; without a valid one (another study's, tampered with,
expired, or a browser that enrolled before tickets) the session is read as before. The session is still
written where it already names a participant (`views._remember`). `TicketMiddleware` sets the ticket on the response that enrolled or resumed them.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils.cache import patch_vary_headers

_PENDING = "ratings_ticket"  # on a request: the (slug, participant id) whose ticket its response carries
# On a request: (slug, the participant its ticket named) once read; its response then varies by Cookie.
_READ = "ratings_ticket_read"


def _signer(slug: str) -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=f"ratings.ticket:{slug}")


def remember(request, *, slug: str, participant_id: int) -> None:
    """The response to `request` carries the ticket of participant `participant_id` of study `slug`."""
    setattr(request, _PENDING, (slug, participant_id))


def attach(request, response) -> None:
    """Sets the ticket `remember` asked for on `response`; and `Vary: Cookie` where the request's ticket was
    read, as SessionMiddleware adds it where the session was."""
    if getattr(request, _READ, None) is not None:
        patch_vary_headers(response, ("Cookie",))
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
    this study). Checked once a request: asking again gets the first answer."""
    read = getattr(request, _READ, None)
    if read is not None and read[0] == slug:
        return read[1]
    named = _verified(request.COOKIES.get(settings.PARTICIPANT_TICKET_COOKIE_NAME), slug)
    setattr(request, _READ, (slug, named))
    return named


def _verified(value: str | None, slug: str) -> int | None:
    if not value:
        return None
    try:
        return int(_signer(slug).unsign(value, max_age=settings.SESSION_COOKIE_AGE))
    except (signing.BadSignature, ValueError):
        return None


class TicketMiddleware:
    """Sets the ticket a view asked for (`remember`) on its response, with `Vary: Cookie` where one was read."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        attach(request, response)
        return response
