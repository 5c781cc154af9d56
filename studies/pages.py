"""A participant step's page (`StepPage`): what a kind names for each of its steps (`StudyKind.pages`), and the
participant front (ratings/flow.py, ratings/views.py) serves at `/s/<slug>/step/`.

A handler is `(request, participant) -> HttpResponse`; the front has already checked that the participant belongs
to the session, is active, and (for POST) that the form was posted from this step (the hidden `step` field), so
handlers only deal with their own page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse

from .models import Participant

Handler = Callable[[HttpRequest, Participant], HttpResponse]


@dataclass(frozen=True)
class StepPage:
    """`answer`, when a page has one, answers a background POST of the page's form (`Accept:
    application/json`, sent by static/ratings/participant.js) with a small JSON document instead of a
    redirect: what replaces the page in place, or where the browser goes next. Pages without it get
    `{"next": <the step page>}` for such a POST, and nothing is stored."""

    get: Handler
    post: Handler
    answer: Handler | None = None
