"""Prolific's webhooks: the signature check, storing each event once, and processing it.

Prolific signs each request: `X-Prolific-Request-Signature` is base64(HMAC-SHA256(secret, timestamp + body))
with the UNIX time of the request in `X-Prolific-Request-Timestamp`. Each event carries `X-Event-ID`, the
same across redeliveries (delivery is at least once), and `X-Timestamp`, when the event happened.

The view only checks, stores and enqueues (`webhook_event_ingest`); a Celery task does the work
(`webhook_event_process`). Processing claims the event with a conditional UPDATE, so two workers handed the
same event process it once.

What the signature does not cover is not trusted:

* `X-Event-ID` is not signed, so a captured request re-sent with a new event id would look new. Each stored
  event also keeps the SHA-256 of its signature, which is unique: the signature covers the timestamp and the
  body, so a replay carries the same one and is refused (409), with nothing stored or processed. An event id
  longer than its column is refused (400), never stored cut.
* `X-Timestamp` (when the event happened) is not signed either. Events are ordered by the signed request
  timestamp: X-Timestamp may only place an event earlier than it (a redelivery of an old event keeps its
  place), never later. A signed timestamp more than SIGNATURE_FUTURE_SKEW_SECONDS ahead of our clock is
  refused (401), as is one older than SIGNATURE_TOLERANCE_SECONDS.
* A body PostgreSQL cannot store (a NUL character, ``\\u0000``, anywhere in it) is refused with a 400 saying so.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from studies.models import Participant

from .client import ProlificClient, ProlificError
from .models import ProlificStudy, ProlificSubmission, WebhookEvent
from .submissions import submission_status_apply, submissions_approve

log = logging.getLogger(__name__)

# A signed request older than this is refused: a captured request cannot be replayed later.
SIGNATURE_TOLERANCE_SECONDS = 300
# … and one from further in the future than this (clock skew between Prolific and us).
SIGNATURE_FUTURE_SKEW_SECONDS = 30
SUBMISSION_EVENT = "submission.status.change"
STUDY_EVENT = "study.status.change"
EVENT_ID_MAX = WebhookEvent._meta.get_field("event_id").max_length
# What a caller is told when the site cannot check signatures: nothing about its configuration.
UNAVAILABLE = "The webhook is not available; try again later."


class WebhookRejected(Exception):
    """The request is not a valid Prolific event; `status` is the HTTP answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def signature_for(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def signature_check(*, link: ProlificStudy, headers, body: bytes, now: float | None = None) -> float:
    """The signed timestamp of a request carrying Prolific's valid, fresh signature; WebhookRejected otherwise."""
    secret = os.environ.get(link.webhook_secret_env, "")
    if not secret:
        # Refuse rather than accept unsigned events: a missing secret is a configuration error to fix. The
        # operator reads which variable in the log; the caller, who may be anyone, learns nothing of it.
        log.error(
            "prolific: webhook for %s refused: the environment variable %s (its secret) is not set",
            link.study.slug,
            link.webhook_secret_env,
        )
        raise WebhookRejected(UNAVAILABLE, status=503)
    signature = headers.get("X-Prolific-Request-Signature", "")
    timestamp = headers.get("X-Prolific-Request-Timestamp", "")
    if not signature or not timestamp:
        raise WebhookRejected("Unsigned request.", status=401)
    try:
        sent = float(timestamp)
    except ValueError:
        raise WebhookRejected("Malformed timestamp.", status=401) from None
    now = now or time.time()
    if now - sent > SIGNATURE_TOLERANCE_SECONDS:
        raise WebhookRejected("Stale timestamp.", status=401)
    if sent - now > SIGNATURE_FUTURE_SKEW_SECONDS:
        raise WebhookRejected("Timestamp in the future.", status=401)
    if not hmac.compare_digest(signature_for(secret, timestamp, body), signature):
        raise WebhookRejected("Bad signature.", status=401)
    return sent


def _stated_time(value: str) -> datetime | None:
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        return datetime.fromtimestamp(number / 1000 if number > 1e11 else number, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _event_time(stated: str, *, signed: float) -> datetime:
    """When the event happened, for ordering: X-Timestamp (unsigned) when it is no later than the signed
    request time, the signed time otherwise."""
    signed_at = datetime.fromtimestamp(signed, tz=UTC)
    at = _stated_time(stated)
    return at if at is not None and at <= signed_at else signed_at


def _has_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


@dataclass
class Ingested:
    event: WebhookEvent
    new: bool


def webhook_event_ingest(*, link: ProlificStudy, headers, body: bytes) -> Ingested:
    """Checks the signature and stores the event once. A redelivery (same `X-Event-ID`) only counts the
    delivery; the caller enqueues processing for a new event only."""
    signed = signature_check(link=link, headers=headers, body=body)
    try:
        payload = json.loads(body)
    except ValueError:
        raise WebhookRejected("The body is not JSON.") from None
    if _has_nul(payload):
        raise WebhookRejected("The body contains a NUL character (\\u0000), which cannot be stored.")
    if not isinstance(payload, dict) or not payload.get("event_type") or not payload.get("resource_id"):
        raise WebhookRejected("The body has no event_type or resource_id.")
    event_id = headers.get("X-Event-ID", "") or headers.get("X-Event-Id", "")
    if not event_id:
        raise WebhookRejected("No X-Event-ID header.")
    if len(event_id) > EVENT_ID_MAX:
        raise WebhookRejected(f"X-Event-ID is longer than {EVENT_ID_MAX} characters.")
    signature_hash = hashlib.sha256(headers.get("X-Prolific-Request-Signature", "").encode()).hexdigest()
    try:
        with transaction.atomic():
            event = WebhookEvent.objects.create(
                event_id=event_id,
                signature_hash=signature_hash,
                link=link,
                event_type=str(payload["event_type"])[:64],
                resource_id=str(payload["resource_id"])[:64],
                body=payload,
                event_time=_event_time(headers.get("X-Timestamp", ""), signed=signed),
            )
        return Ingested(event=event, new=True)
    except IntegrityError:
        if not WebhookEvent.objects.filter(event_id=event_id).exists():
            # The signature of a stored event under another event id: a captured request replayed. Prolific's
            # own redeliveries carry the same event id (and are signed afresh).
            raise WebhookRejected(
                "Replayed request: this signature was already received with another event id.", status=409
            ) from None
        WebhookEvent.objects.filter(event_id=event_id).update(deliveries=F("deliveries") + 1)
        return Ingested(event=WebhookEvent.objects.get(event_id=event_id), new=False)


def _claim(event_id: int) -> WebhookEvent | None:
    """Claims an unprocessed event for this worker (conditional UPDATE), or None if another has it.

    Marking it processed *before* the work would lose the work if the worker died, so the claim and the
    work share one transaction: a second worker's UPDATE waits on the first's row lock and then finds the
    event processed; a worker that dies rolls back and the event stays unprocessed for a retry."""
    if not WebhookEvent.objects.filter(pk=event_id, processed_at__isnull=True).update(
        processed_at=timezone.now()
    ):
        return None
    return WebhookEvent.objects.select_related("link", "link__study").get(pk=event_id)


def _submission_event(event: WebhookEvent) -> str:
    """Applies a submission's new status. The payload names no study (Prolific's subscriptions are per
    workspace), so a submission is only taken as this study's when we know it already, or when one of this
    study's participants arrived with it (SESSION_ID) or with its participant id; anything else is left to
    reconciliation, which reads this study's own submissions."""
    link, body = event.link, event.body
    submission_id, status = event.resource_id, str(body.get("status", ""))
    pid = str(body.get("participant_id", ""))
    known = ProlificSubmission.objects.filter(submission_id=submission_id).values_list(
        "link_id", "prolific_pid"
    )
    known = known.first()
    if known is not None:
        if known[0] != link.pk:
            return f"submission of another study: ignored {status}"
        pid = pid or known[1]
    elif not (
        Participant.objects.filter(study=link.study, platform_session_id=submission_id).exists()
        or (pid and Participant.objects.filter(study=link.study, external_id=pid).exists())
    ):
        return f"{status}: unknown submission, left for reconciliation"
    result = submission_status_apply(
        link=link,
        submission_id=submission_id,
        pid=pid,
        status=status,
        at=event.event_time,
        event_id=event.event_id,
    )
    freed = ", place freed" if result.freed else ""
    return f"{status}: {'applied' if result.changed else 'already known'}{freed}"


def _study_event(event: WebhookEvent) -> str:
    link, status = event.link, str(event.body.get("status", ""))
    if event.resource_id != link.prolific_study_id or status not in ProlificStudy.State.values:
        return f"ignored study status {status!r} for {event.resource_id}"
    updated = ProlificStudy.objects.filter(pk=link.pk).exclude(
        state_at__gt=event.event_time or timezone.now()
    )
    updated.update(state=status, state_at=event.event_time or timezone.now())
    return f"study {status}"


def webhook_event_process(*, event_id: int) -> str | None:
    """Does what the event says, exactly once (see `_claim`). Returns the outcome, or None when another
    worker processed it. Approval calls to Prolific happen after the transaction commits."""
    with transaction.atomic():
        event = _claim(event_id)
        if event is None:
            return None
        if event.event_type == SUBMISSION_EVENT:
            outcome = _submission_event(event)
        elif event.event_type == STUDY_EVENT:
            outcome = _study_event(event)
        else:
            outcome = f"ignored {event.event_type}"
        WebhookEvent.objects.filter(pk=event.pk).update(outcome=outcome[:200])
    link = event.link
    if event.event_type == SUBMISSION_EVENT and link.auto_approve and "AWAITING REVIEW" in outcome:
        try:
            submissions_approve(link=link, client=ProlificClient.for_link(link))
        except ProlificError as exc:  # reconciliation approves later; the event itself is done
            log.warning("prolific: approval after event %s failed: %s", event.event_id, exc)
    return outcome
