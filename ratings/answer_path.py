"""The in-place answer's own path: one request, one round trip to Redis, one SQL statement.

Ten of a participant's eleven requests are answers posted in the background by the item page's script
(static/ratings/participant.js). `InPlaceAnswerMiddleware` takes those POSTs ahead of the session,
authentication, messages and login-throttling middleware, which an answer does not need, and does itself
what the answer does need from them, with the same code:

* the CSRF check (Django's `CsrfViewMiddleware`, called as the middleware calls it);
* the participant, named by their ticket (ratings/tickets.py), or by the session (a browser enrolled
  before tickets), read in the rate limiter's round trip to Redis (`config.ratelimit.rate_limit_refusal`:
  the same per-participant limit, counted once); an answer with the ticket is not counted there: its
  statement counts the same limit on the participant's row (studies/migrations/0014), so it makes no
  round trip to Redis; an answer that stores a rating is not counted, only refused once the window is full
  (0017);
* the honeypot and the form's fields (a filled honeypot or a bad form goes the usual way, which refuses it);
* `never_cache`, `Vary: Cookie`, `X-Frame-Options` and `Content-Length` on the reply (the middleware before it in
  MIDDLEWARE — request id and access log, body limit, CSP, security headers — still runs).

The consent and instructions forms, also posted in the background, take the same way past the middleware (the
same checks and headers, the session saved as SessionMiddleware saves it) and are then stored by their pages'
own code (`views.step_in_place`, what the view calls for them). A rating study's two are first offered to one
statement each: the consent agreed to, to one UPDATE that moves the participant on and returns their row and
their study's (`consent_in_place`; the reply the instructions page, from the shared pages' cache); the
instructions of a study that goes on to the items, to `rating_items_begin_in_place` (studies/migrations/0012:
the step moved and the first item shown; the reply the item page's shell with the item beside it, as the
view's, `shared_pages.item_in_place`); the instructions posted with the consent (`agreed=1`: participant.js
showed them from the consent page, `shared_pages.consent_page`) to one statement that takes the consent as that
UPDATE does and then calls that function (`rating_consent_begin_in_place`, studies/migrations/0020). Any other step's form goes to Django untouched. With the participant's
ticket, that one statement is tried before the rate limiter and is not counted by it: it moves a participant on
from each step once, so it adds two requests to a participant's whole budget, and every other post of these
forms (a repeat, a decline) is counted as before; the consent and the instructions then make no round trip to
Redis.

The first answer, where the consent page carried the first item (`begun=1`: the page showed it without a
request, flow.steps_on_the_way), takes the consent and the instructions with it in the same one statement,
`rating_answer_begun_in_place` (studies/migrations/0021): each moved only from its own step, the first item
marked as shown when the page says it showed it, then the answer as below.

The answer itself is one statement on PostgreSQL, `rating_answer_in_place` (studies/migrations/0008): the
participant's row locked, the answer checked and stored exactly as `services.rating_submit` stores it, the
next item marked as shown and returned (or, after the last answer, the participant completed), in one round
trip whose plans PostgreSQL keeps. What it does not take (an attention check's answer, a participant not on
the items step or past the time limit, no participant in this session) writes nothing and goes on down the
usual path (`views.study_step`), as does every request on SQLite and every request it does not recognise. The reply is
the one `views.item_answer` sends (`selectors.item_payload`; the completion page, `views.page_in_place`).
"""

from __future__ import annotations

import io
import logging
import re
from functools import cache
from importlib import import_module

from django.conf import settings
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest, get_script_name
from django.db import IntegrityError, close_old_connections, connection
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import reverse, set_script_prefix
from django.utils import timezone
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.http import http_date
from django.utils.module_loading import import_string

from config.ratelimit import HONEYPOT_FIELD, current_window, rate_limit_refusal, too_many_requests
from studies import rows
from studies.balancing import consent_cutoff
from studies.models import Assignment, Participant, Study
from studies.participants import TOUCH_INTERVAL, participant_touch

from . import flow, tickets, views
from .forms import ItemAnswerForm
from .selectors import (
    CurrentItem,
    item_disguise_attention_check,
    item_payload,
    participant_get,
    session_key,
)
from .shared_pages import item_in_place

logger = logging.getLogger(__name__)

_SQL = "SELECT * FROM rating_answer_in_place(%s, %s, %s, %s, %s, %s, %s, %s)"
_BEGIN_SQL = "SELECT * FROM rating_items_begin_in_place(%s, %s, %s)"
_CONSENT_BEGIN_SQL = "SELECT * FROM rating_consent_begin_in_place(%s, %s, %s, %s)"
_BEGUN_SQL = "SELECT * FROM rating_answer_begun_in_place(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
# In a request's environ: the answer front already tried this request and handed it to Django.
_HANDED_OVER = "ratings.answer_path.handed_over"
_MIDDLEWARE = "ratings.answer_path.InPlaceAnswerMiddleware"
# An answer's body is a few hundred bytes; anything much larger goes to Django and its limits.
_BODY_MAX = 16 * 1024
# Outcomes of rating_answer_in_place that end in a refusal: the error code and status `views.item_answer` sends.
_REFUSED = {"not_yours": ("NotYourItem", 403), "invalid_value": ("InvalidValue", 400)}
# The other steps whose forms the path takes when posted in the background: their pages store them with their
# own code (`views.step_in_place`), which needs nothing of the middleware it skips but the session.
_STEPS = frozenset({Participant.Step.CONSENT, Participant.Step.INSTRUCTIONS})
# The front's first look at a body: a form of one of those steps or an answer (the form's parser decides).
_TAKEN_BODY = re.compile(
    rb"(?:^|&)step=(?:%s)(?:&|$)"
    % b"|".join(sorted(re.escape(step.encode()) for step in (Participant.Step.ITEMS, *_STEPS)))
)


def answer_in_place(
    request, *, participant_id: int, slug: str, position: int, value: int, limit: int | None = None, now=None
) -> JsonResponse | None:
    """The reply to an in-place answer by participant `participant_id` of study `slug`, stored (or refused)
    by `rating_answer_in_place` in one statement; None, having written nothing, where the usual path must
    answer instead (see the module's docstring). The last answer's reply is the completion page, as the
    view sends it (`views.page_in_place`). With a `limit`, the statement counts the request against the
    participant's rate limit (`limit` requests a window) and refuses it beyond, as the limiter does (429)."""
    now = now or timezone.now()
    window, retry_after = current_window()
    answer = [position, value, now, TOUCH_INTERVAL, window, limit]
    post = request.POST
    try:
        with connection.cursor() as cursor:
            if post.get("begun") == "1":
                # The consent and the instructions the page took on the way, taken first in the same statement
                # (studies/migrations/0021, flow.steps_on_the_way).
                agreed, shown_ms = post.get("agreed") == "1", flow.shown_ms(post)
                cursor.execute(
                    _BEGUN_SQL, [participant_id, slug, agreed, shown_ms, consent_cutoff(now), *answer]
                )
            else:
                cursor.execute(_SQL, [participant_id, slug, *answer])
            row = cursor.fetchone()
    except IntegrityError:
        return None  # the OneToOne key refused a second rating: the usual path finds the stored one
    outcome = row[0]
    if outcome == "fallback":
        return None
    if outcome == "limited":
        logger.warning("rate limited", extra={"bucket": "participant", "path": request.path})
        return too_many_requests(request, retry_after=retry_after)
    if outcome == "completed":
        participant = participant_get(participant_id=participant_id, slug=slug)
        return views.page_in_place(request, participant)
    if outcome in _REFUSED:
        code, status = _REFUSED[outcome]
        return JsonResponse({"error": code}, status=status)
    (study_id, title, *shown) = row[1:]
    item = _item(Participant(id=participant_id, study_id=study_id), *shown)
    return JsonResponse({"saved": outcome in ("saved", "repeat"), "item": item_payload(item, title=title)})


def items_begin_in_place(
    request, *, participant_id: int, slug: str, agreed: bool = False, now=None
) -> JsonResponse | None:
    """The reply to the instructions of rating study `slug` posted in the background by participant
    `participant_id`, who is taken to their first item by `rating_items_begin_in_place` in one statement
    (the reply `views.step_in_place` sends: `shared_pages.item_in_place`); None, having written nothing of the
    instructions, where the usual path must answer instead (a study that asks the TEQ next, a participant
    elsewhere). `agreed`: the consent came with them (shared_pages.consent_page), taken first as its own post
    takes it, in the same statement (`rating_consent_begin_in_place`, studies/migrations/0020)."""
    now = now or timezone.now()
    with connection.cursor() as cursor:
        if agreed:
            cursor.execute(_CONSENT_BEGIN_SQL, [participant_id, slug, now, consent_cutoff(now)])
        else:
            cursor.execute(_BEGIN_SQL, [participant_id, slug, now])
        row = cursor.fetchone()
    if row[0] != "begun":
        return None
    (study_id, title, scale, scale_question, is_preview, *shown) = row[1:]
    # Django's PostgreSQL backend reads jsonb as text: the field parses it, as for a model's own read.
    scale = Study._meta.get_field("scale").from_db_value(scale, None, connection)
    study = Study(
        id=study_id, slug=slug, title=title, kind="rating", scale=scale, scale_question=scale_question
    )
    participant = Participant(
        id=participant_id,
        study=study,
        status=Participant.Status.ACTIVE,
        step=Participant.Step.ITEMS,
        is_preview=is_preview,
    )
    return item_in_place(request, participant, _item(participant, *shown))


def consent_in_place(request, *, participant_id: int, slug: str, now=None) -> JsonResponse | None:
    """The reply to the consent form of rating study `slug` agreed to in the background by participant
    `participant_id`, who is moved on to the instructions by one UPDATE (`_consent_sql`); the reply is the
    instructions page, as the view sends it (`views.page_in_place`). None, having written nothing, where the
    usual path must answer instead (another kind, a participant elsewhere or whose hold has lapsed)."""
    now = now or timezone.now()
    row = rows.fetchone(
        _consent_sql(), [Participant.Step.INSTRUCTIONS, now, participant_id, slug, now, consent_cutoff(now)]
    )
    if row is None:
        return None
    participant, end = rows.instance(Participant, row)
    participant.study, _ = rows.instance(Study, row, end)
    return views.page_in_place(request, participant)


@cache
def _consent_sql() -> str:
    """The consent agreed to: `studies.participants.participant_advance` from the consent step to the rating
    kind's first step, the instructions, for a participant whose hold has not lapsed (`participant_touch`'s
    rule: seen within the study's time limit and within the consent's hold), as one UPDATE on PostgreSQL that
    returns the participant's new row and their study's (`participant_get`'s columns)."""
    p = lambda name: rows.column(Participant, name, "p")  # noqa: E731
    s = lambda name: rows.column(Study, name, "s")  # noqa: E731
    quote = connection.ops.quote_name
    set_ = lambda name: quote(Participant._meta.get_field(name).column)  # noqa: E731
    return (
        f"UPDATE {rows.table(Participant)} p SET {set_('step')} = %s, {set_('last_seen_at')} = %s"
        f" FROM {rows.table(Study)} s WHERE {p('id')} = %s AND {s('id')} = {p('study')} AND {s('slug')} = %s"
        f" AND {s('kind')} = 'rating' AND {p('status')} = '{Participant.Status.ACTIVE}'"
        f" AND {p('step')} = '{Participant.Step.CONSENT}'"
        f" AND {p('last_seen_at')} >= %s - make_interval(mins => {s('time_limit_minutes')})"
        f" AND {p('last_seen_at')} >= %s"
        f" RETURNING {rows.columns(Participant, 'p')}, {rows.columns(Study, 's')}"
    )


def _item(participant: Participant, item_id, position, kind, total, answered, *texts) -> CurrentItem:
    """The item a statement's row shows (its assignment, where it stands, its four texts), an attention check
    shown with one of the study's emotions as the view shows it."""
    emotion, situation, utterance, response = (text or "" for text in texts)
    item = CurrentItem(
        assignment=Assignment(id=item_id, position=position, kind=kind),
        number=answered + 1,
        total=total,
        emotion=emotion,
        situation=situation,
        utterance=utterance,
        response=response,
    )
    return item_disguise_attention_check(item=item, participant=participant)


def _answer_fields(post) -> dict | None:
    """The answer's position and value as `ItemAnswerForm` cleans them, for the plain integers a page
    sends; None for anything else (the view's form then judges it)."""
    fields = {}
    for name in ("position", "value"):
        field = ItemAnswerForm.base_fields[name]
        try:
            number = int(post.get(name, ""))
        except ValueError:
            return None
        if not field.min_value <= number <= field.max_value:
            return None
        fields[name] = number
    return fields


class InPlaceAnswerMiddleware:
    """Answers the item page's background POSTs, and the consent and instructions forms posted in the
    background, on PostgreSQL without the rest of the middleware chain (see the module's docstring); hands
    every other request, and every post it does not take, to the chain."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.csrf = CsrfViewMiddleware(get_response)
        self.sessions = SessionMiddleware(get_response)
        self.session_store = import_module(settings.SESSION_ENGINE).SessionStore
        model = HttpResponse()
        add_never_cache_headers(model)
        self.never_cache = model["Cache-Control"]
        marker = "0slug0"
        self.step_path = re.compile(
            re.escape(reverse("ratings:step", kwargs={"slug": marker})).replace(marker, r"([-a-zA-Z0-9_]+)")
        )

    def __call__(self, request):
        response = None
        if (
            settings.PARTICIPANT_ANSWER_PATH
            and not request.META.get(_HANDED_OVER)
            and request.method == "POST"
            and connection.vendor == "postgresql"
            and "application/json" in request.headers.get("Accept", "")
        ):
            found = self.step_path.fullmatch(request.path_info)
            if found is not None:
                response = self.answer(request, found.group(1))
        if response is None:
            response = self.get_response(request)
            tickets.attach(request, response)  # an enrolment's or a resumption's: the participant's ticket
        return response

    def answer(self, request, slug: str):
        """An answer (`answer_in_place`) or a consent or instructions form (`step`) posted in the background to
        `slug`'s step page, after the checks the skipped middleware would make; None to hand it on."""
        post = request.POST
        step = post.get("step")
        if post.get(HONEYPOT_FIELD) or (step != Participant.Step.ITEMS and step not in _STEPS):
            return None
        fields = None
        if step == Participant.Step.ITEMS:
            fields = _answer_fields(post)
            if fields is None:
                return None
        self.csrf.process_request(request)
        if self.csrf.process_view(request, None, (), {"slug": slug}) is not None:
            return None  # refused: the usual path refuses it the same way, with its page
        # Read only when used: a browser with its ticket does not read it.
        request.session = self.session_store(request.COOKIES.get(settings.SESSION_COOKIE_NAME))
        ticket = tickets.participant_id(request, slug=slug)
        if ticket is not None and fields is not None:
            # Its rate limit counted by its statement; handed on (None), it is counted by the limiter there.
            limit = settings.RATELIMIT_PARTICIPANT if settings.RATELIMIT_ENABLED else None
            response = answer_in_place(request, participant_id=ticket, slug=slug, limit=limit, **fields)
        elif ticket is not None:
            # The consent agreed to, or the instructions done, by one statement: a step left once per
            # participant, so not counted (every other post of these forms is): no round trip to Redis.
            response = (
                self.step_moved(request, ticket, slug, step)
                or rate_limit_refusal(request, scope="participant")
                or self.step(request, ticket, slug)
            )
        else:
            # The limiter's round trip fetches the session too, where it is read.
            response = rate_limit_refusal(request, scope="participant") or self.by_session(
                request, slug, step, fields
            )
        if response is None:
            return None
        # never_cache's headers: Expires now, and Cache-Control as it writes it (the same on every reply).
        response.headers.setdefault("Expires", http_date())
        response.headers.setdefault("Cache-Control", self.never_cache)
        patch_vary_headers(response, ("Cookie",))
        response.headers.setdefault("X-Frame-Options", settings.X_FRAME_OPTIONS.upper())
        # As CommonMiddleware sets it; and a page that used the CSRF token may renew its cookie.
        response.headers.setdefault("Content-Length", str(len(response.content)))
        return self.csrf.process_response(request, response)

    def by_session(self, request, slug: str, step: str, fields: dict | None):
        """The answer (`fields`) or the step's form of the participant the session names (a browser that enrolled
        before tickets); None to hand it on."""
        participant_id = request.session.get(session_key(slug))
        if participant_id is None:
            return None
        if fields is not None:
            return answer_in_place(request, participant_id=participant_id, slug=slug, **fields)
        return self.step_moved(request, participant_id, slug, step) or self.step(
            request, participant_id, slug
        )

    @staticmethod
    def step_moved(request, participant_id: int, slug: str, step: str):
        """One statement where it can: the consent agreed to, or the instructions on to the first item; None,
        having written nothing, where it cannot."""
        if step == Participant.Step.INSTRUCTIONS and request.POST.get("begun") == "1":
            return None  # with the time its first item was shown: the page's own code (flow.steps_on_the_way)
        if step == Participant.Step.INSTRUCTIONS:
            # The consent agreed to on the way (shared_pages.consent_page) is taken first, as its own post.
            agreed = request.POST.get("agreed") == "1"
            return items_begin_in_place(request, participant_id=participant_id, slug=slug, agreed=agreed)
        if request.POST.get("decision") == "agree":
            return consent_in_place(request, participant_id=participant_id, slug=slug)
        return None

    def step(self, request, participant_id: int, slug: str):
        """Another step's form, stored by its page as `views.study_step` has it stored (the participant found
        and touched, then `views.step_in_place`); the session saved as SessionMiddleware saves it. None, having
        written nothing, when the participant is not in this study."""
        participant = participant_get(participant_id=participant_id, slug=slug)
        if participant is None:
            return None
        response = views.step_in_place(request, participant_touch(participant=participant))
        return self.sessions.process_response(request, response)


class _HandOver(Exception):
    """The answer front's chain: this request goes to Django instead."""


class AnswerFront:
    """The WSGI application gunicorn serves (config/wsgi.py): in-place answers on PostgreSQL without Django's
    request handling around them; every other request goes to Django untouched.

    An answer runs through the middleware that stands before `InPlaceAnswerMiddleware` in MIDDLEWARE —
    the same classes, in the same order (request id and access log, body limit, Content-Security-Policy,
    security headers and the HTTPS redirect) — and then the middleware's own `answer`. What it does not take
    is handed to Django as it came (its body put back, the rate limit already counted, the answer not tried
    a second time), and so is anything that goes wrong on the way: an answer is stored exactly once whichever
    of the two finally answers. What this saves is Django's handler (its signals and the remaining middleware
    around the view): the answer itself is the same code with the same checks."""

    def __init__(self, django_app):
        self.django_app = django_app
        self.answerer = InPlaceAnswerMiddleware(self._hand_over)  # only its `answer` and `step_path` are used
        handler = self._answer
        for path in reversed(settings.MIDDLEWARE[: settings.MIDDLEWARE.index(_MIDDLEWARE)]):
            handler = import_string(path)(handler)
        self.chain = handler

    def __call__(self, environ, start_response):
        slug = self._slug(environ)
        if slug is not None:
            response = self._take(environ, slug)
            if response is not None:
                response._handler_class = type(self.django_app)  # its close() ends the request as Django's do
                start_response(
                    f"{response.status_code} {response.reason_phrase}",
                    [
                        *response.items(),
                        *(("Set-Cookie", c.output(header="")) for c in response.cookies.values()),
                    ],
                )
                return response
        return self.django_app(environ, start_response)

    def _slug(self, environ) -> str | None:
        """The study's slug when the request looks like an in-place answer the path may take, else None."""
        if (
            environ.get("REQUEST_METHOD") != "POST"
            or "application/json" not in environ.get("HTTP_ACCEPT", "")
            or not environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded")
            or not settings.PARTICIPANT_ANSWER_PATH
            or connection.vendor != "postgresql"
        ):
            return None
        try:
            if not 0 < int(environ.get("CONTENT_LENGTH") or 0) <= _BODY_MAX:
                return None
        except ValueError:
            return None
        found = self.answerer.step_path.fullmatch(environ.get("PATH_INFO", ""))
        return found.group(1) if found else None

    def _take(self, environ, slug: str):
        set_script_prefix(get_script_name(environ))
        request = WSGIRequest(environ)
        request.answer_slug = slug
        # No health check (a `SELECT 1` before the first statement): a broken connection fails the answer's one
        # statement instead, and the answer then goes to Django, which checks and replaces the connection.
        connection.health_check_done = True
        try:
            request.get_host()  # a host not allowed: Django's 400
            # Read once, so that Django can be handed it again. A form of a step the path does not take goes
            # straight to Django, whose middleware then runs once, not twice.
            if _TAKEN_BODY.search(request.body) is None:
                raise _HandOver
            return self.chain(request)
        except (_HandOver, DisallowedHost):
            pass
        except Exception:
            logger.exception(
                "the answer path failed; the answer goes to Django", extra={"path": request.path}
            )
            close_old_connections()
        if hasattr(request, "_body"):
            environ["wsgi.input"] = io.BytesIO(request._body)
        environ[_HANDED_OVER] = True
        return None

    def _answer(self, request):
        response = self.answerer.answer(request, request.answer_slug)
        return self._hand_over(request) if response is None else response

    @staticmethod
    def _hand_over(request):
        raise _HandOver
