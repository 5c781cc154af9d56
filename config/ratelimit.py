"""Abuse protection for participant pages: rate limits and a honeypot field.

Rate limits are sliding windows counted in Redis (one pipelined round trip per request), or in Django's
local-memory cache without Redis (`make run`). Each window's requests are counted under one key, and a
request is measured against the current window's count plus the previous window's weighted by how much of it
still lies within the last window's length (the sliding-window counter): a client can no longer make twice the
limit across a window's boundary, at the cost of one more GET in the same round trip. They fail open: when the store cannot be reached,
requests pass and a warning is logged — a participant must never lose a rating because it is down. The
same round trip fetches the participant's session from Redis (config/sessions.py), which the page reads
next: one round trip per participant request instead of two.

    @rate_limit("entry")        # per client IP (entry limit) and per participant
    @rate_limit("participant")  # per participant only (consent, instructions, answers)

The honeypot is a text field no person sees (moved off-screen, hidden from screen readers and the tab
order). `@honeypot` adds it to every POST form of the pages the view renders, and refuses a POST that
fills it — before the view runs, so nothing is stored.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
HONEYPOT_FIELD = "contact_me_by_fax_only"
_HONEYPOT_HTML = (
    '<div style="position:absolute;left:-10000px;top:auto;width:1px;height:1px;overflow:hidden" '
    f'aria-hidden="true"><label for="id_{HONEYPOT_FIELD}">Leave this field empty</label>'
    f'<input type="text" name="{HONEYPOT_FIELD}" id="id_{HONEYPOT_FIELD}" value="" tabindex="-1" '
    'autocomplete="off"></div>'
)
_POST_FORM_OPEN = re.compile(rb"<form\b[^>]*\bmethod=[\"']?post[\"']?[^>]*>", re.IGNORECASE)
_EXTERNAL_ACTION = re.compile(rb"\baction=[\"']?(https?:)?//", re.IGNORECASE)
_PARTICIPANT_PARAMS = ("PROLIFIC_PID", "workerId", "participant_id")


def client_ip(request) -> str:
    """The client's address. Behind RATELIMIT_TRUSTED_PROXIES proxies that append to X-Forwarded-For,
    the address the outermost trusted proxy saw; otherwise REMOTE_ADDR (a client-sent header is not
    trusted, or anyone could pick a fresh IP for every request)."""
    trusted = settings.RATELIMIT_TRUSTED_PROXIES
    if trusted > 0:
        hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
        if len(hops) >= trusted:
            return hops[-trusted]
    return request.META.get("REMOTE_ADDR", "")


def _participant_key(request, *, scope: str) -> str:
    """Who is asking: on the entry, the recruiting platform's id; on every other page the session cookie,
    else the participant's ticket (ratings/tickets.py: a participant's browser has no session), as it came
    (the query string is the client's to choose: reading it there let a made-up id reset the limit), else
    the IP."""
    if scope == "entry":
        for param in _PARTICIPANT_PARAMS:
            if request.GET.get(param):
                return "pid:" + request.GET[param]
    for prefix, cookie in (
        ("session:", settings.SESSION_COOKIE_NAME),
        ("ticket:", settings.PARTICIPANT_TICKET_COOKIE_NAME),
    ):
        value = request.COOKIES.get(cookie)
        if value:
            return prefix + value
    return "ip:" + client_ip(request)


_redis_clients: dict[str, object] = {}


def _now() -> float:
    """The limiter's clock (tests pin it, so that a minute's window cannot end in the middle of a test)."""
    return time.time()


def current_window(window_seconds: int = WINDOW_SECONDS) -> tuple[int, int]:
    """The fixed window the limits count in now (its number since the epoch) and the seconds until it ends,
    for a refusal's Retry-After."""
    now = _now()
    return int(now // window_seconds), int(window_seconds - now % window_seconds) + 1


def _redis():
    """A Redis client on REDIS_URL (one connection pool per process and address), or None without Redis."""
    url = settings.REDIS_URL
    if not url:
        return None
    client = _redis_clients.get(url)
    if client is None:
        import redis

        # Short timeouts: a hung Redis must not stall participant pages (the limiter fails open).
        client = _redis_clients[url] = redis.Redis.from_url(
            url, socket_connect_timeout=0.5, socket_timeout=0.5
        )
    return client


def _counts(
    keys: list[str], previous: list[str], *, ttl: int = WINDOW_SECONDS * 2, session=None
) -> tuple[list[int], list[int]]:
    """Adds one to each window counter and returns the new counts, with the counts of the `previous`
    windows' keys: one round trip to Redis (INCR and EXPIRE of every key, GET of every previous key, in one
    pipeline), or Django's cache when there is no Redis (`make run`). Given the request's `session`, the
    same round trip fetches its cached copy for it, when it can use one."""
    client = _redis()
    if client is not None:
        pipeline = client.pipeline(transaction=False)
        for key in keys:
            pipeline.incr(key)
            pipeline.expire(key, ttl)
        for key in previous:
            pipeline.get(key)
        session_key = None
        if session is not None and hasattr(session, "cached_copy_key"):
            session_key = session.cached_copy_key(settings.REDIS_URL)
        if session_key is not None:
            pipeline.get(session_key)
        replies = pipeline.execute()
        if session_key is not None:
            session.cached_copy_take(replies.pop())
        counted = 2 * len(keys)
        return replies[:counted:2], [int(value or 0) for value in replies[counted:]]
    counts = []
    for key in keys:
        cache.add(key, 0, timeout=ttl)
        counts.append(cache.incr(key))
    return counts, [int(cache.get(key) or 0) for key in previous]


def _hits(
    checks: list[tuple[str, str, int]], *, window_seconds: int = WINDOW_SECONDS, session=None
) -> tuple[str | None, int]:
    """Counts one request against each (bucket, identity, limit) in sliding windows of `window_seconds`
    (see the module's docstring); returns (the first bucket over its limit or None, seconds until the
    current window ends). Fails open (and the `session`, see `_counts`, then reads itself as usual)."""
    window, retry_after = current_window(window_seconds)
    # hashed: no participant ids in the store's keys
    stems = [
        f"rl:{bucket}:{hashlib.sha256(identity.encode()).hexdigest()[:32]}" for bucket, identity, _ in checks
    ]
    try:
        counts, before = _counts(
            [f"{stem}:{window}" for stem in stems],
            [f"{stem}:{window - 1}" for stem in stems],
            ttl=window_seconds * 2,
            session=session,
        )
    except Exception as exc:  # the store is down or timed out: let the request through
        logger.warning("rate limit store unavailable, allowing request", extra={"error": type(exc).__name__})
        return None, 0
    # The share of the previous window still inside the last `window_seconds`.
    overlap = min(retry_after, window_seconds) / window_seconds
    for (bucket, _identity, limit), count, previous in zip(checks, counts, before, strict=True):
        if count > limit or count + previous * overlap > limit:
            return bucket, retry_after
    return None, retry_after


def rate_limit(scope: str) -> Callable:
    """Limits a participant view. scope="entry": RATELIMIT_ENTRY_PER_IP per client IP and
    RATELIMIT_PARTICIPANT per participant, per minute; scope="participant": the per-participant limit
    only. Over the limit: a friendly 429 page with Retry-After, and the view does not run."""
    if scope not in {"entry", "participant"}:
        raise ValueError(f"unknown rate-limit scope {scope!r}")

    def decorator(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            refused = rate_limit_refusal(request, scope=scope)
            if refused is not None:
                return refused
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def rate_limit_refusal(request, *, scope: str):
    """Counts the request against `scope`'s limits (see `rate_limit`) once: the 429 page when it is over one,
    else None."""
    if not settings.RATELIMIT_ENABLED:
        return None
    checks = [("participant", _participant_key(request, scope=scope), settings.RATELIMIT_PARTICIPANT)]
    if scope == "entry":
        checks.insert(0, ("entry-ip", client_ip(request), settings.RATELIMIT_ENTRY_PER_IP))
    bucket, retry_after = _hits(checks, session=getattr(request, "session", None))
    if bucket is None:
        return None
    logger.warning("rate limited", extra={"bucket": bucket, "path": request.path})
    return too_many_requests(request, retry_after=retry_after)


def enrollment_refused(request, *, study_id: int, per_address: int | None) -> tuple[str | None, int]:
    """Counts one new enrollment (a participant id the study has not seen) against the study's limits:
    `per_address` new participants per client address (None: no such limit, the default: a lab, a campus or a
    mobile carrier puts many people behind one address) and RATELIMIT_ENROLL_PER_STUDY in all, in windows of
    RATELIMIT_ENROLL_WINDOW seconds. Returns the bucket that refused it ("enroll-ip" or "enroll-study"; None:
    allowed) and the seconds until its window ends. Fails open like every limit here."""
    if not settings.RATELIMIT_ENABLED:
        return None, 0
    checks = [("enroll-study", str(study_id), settings.RATELIMIT_ENROLL_PER_STUDY)]
    if per_address:
        checks.insert(0, ("enroll-ip", f"{study_id}:{client_ip(request)}", per_address))
    bucket, retry_after = _hits(checks, window_seconds=settings.RATELIMIT_ENROLL_WINDOW)
    if bucket is not None:
        logger.warning("enrollment limited", extra={"bucket": bucket, "path": request.path})
    return bucket, retry_after


def too_many_requests(request, *, retry_after: int):
    from django.http import HttpResponse

    response = HttpResponse(
        render_to_string("errors/429.html", {"retry_after": retry_after}, request=request), status=429
    )
    response["Retry-After"] = str(retry_after)
    return response


def honeypot(view: Callable) -> Callable:
    """Adds the honeypot field to the view's POST forms and refuses (400, nothing stored) a POST that
    fills it in."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        from django.http import HttpResponse

        if request.method == "POST" and request.POST.get(HONEYPOT_FIELD):
            logger.warning("honeypot filled, submission dropped", extra={"path": request.path})
            return HttpResponse(render_to_string("errors/form_rejected.html", request=request), status=400)
        response = view(request, *args, **kwargs)
        honeypot_add(response)
        return response

    return wrapped


def _with_honeypot(match: re.Match) -> bytes:
    opening = match.group(0)
    if _EXTERNAL_ACTION.search(opening):  # e.g. MTurk's externalSubmit: not ours to add fields to
        return opening
    return opening + _HONEYPOT_HTML.encode()


def honeypot_add(response) -> None:
    """Adds the honeypot field to the POST forms of an HTML response (`@honeypot` does it for every page its
    view renders; a view that sends a page inside a JSON reply calls it on the page first)."""
    if getattr(response, "streaming", False) or not response.get("Content-Type", "").startswith("text/html"):
        return
    if hasattr(response, "render") and not getattr(response, "is_rendered", True):
        response.render()
    content = response.content
    if b"<form" not in content.lower():
        return
    response.content = _POST_FORM_OPEN.sub(_with_honeypot, content)
    if response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))
