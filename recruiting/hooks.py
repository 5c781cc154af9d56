"""Subscribing this site to Prolific's webhooks from the platform, and verifying the subscriptions.

Prolific's hooks endpoints (public API reference, "Webhooks"): a subscription is per workspace and event type,
created with `POST hooks/subscriptions/` ({workspace_id, event_type, target_url}); Prolific answers with the
subscription's id and an `X-Hook-Secret` header, which confirms it (`POST hooks/subscriptions/<id>/`
{secret}). `GET hooks/subscriptions/?workspace_id=…` lists them with `is_enabled`.

`hooks_subscribe` makes sure each event type this app handles is subscribed to this study's webhook address and
enabled: an enabled subscription already there is kept (run it as often as wanted); a missing one is created
and confirmed. Then it lists them again and reports what Prolific says (`verified`). The workspace's signing
secret itself (`POST hooks/secrets/`) is not created here: it must be put in the environment variable the
study names, and replacing it would break the deployment's current one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import reverse

from .client import ProlificClient
from .models import ProlificStudy
from .webhooks import STUDY_EVENT, SUBMISSION_EVENT

EVENT_TYPES = (SUBMISSION_EVENT, STUDY_EVENT)


class HooksError(Exception):
    """The subscriptions cannot be made; the message says what to do."""


@dataclass
class HooksReport:
    target_url: str
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)  # enabled on Prolific, read back after the changes
    missing: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"Webhooks to {self.target_url}: {len(self.verified)} of {len(EVENT_TYPES)} event types verified on Prolific"
        if self.created:
            text += f" (subscribed now: {', '.join(self.created)})"
        if self.missing:
            text += f". Not enabled on Prolific: {', '.join(self.missing)} — run this again, or check the workspace's webhooks on Prolific"
        return text + "."


def webhook_target_url(link: ProlificStudy) -> str:
    path = reverse("recruiting:prolific-webhook", kwargs={"slug": link.study.slug})
    return f"{link.site_url.rstrip('/')}{path}"


def _ours(subscriptions: list[dict], target_url: str) -> dict[str, dict]:
    return {s.get("event_type", ""): s for s in subscriptions if s.get("target_url") == target_url}


def hooks_subscribe(*, link: ProlificStudy, client: ProlificClient | None = None) -> HooksReport:
    """Subscribes (and confirms) each event type this app handles, then verifies them (see the module)."""
    if not link.workspace_id:
        raise HooksError("Enter the study's Prolific workspace id first (in the form above), then subscribe.")
    target_url = webhook_target_url(link)
    if not target_url.startswith("https://"):
        raise HooksError(
            f"Prolific only calls https addresses; this study's site address gives {target_url}."
        )
    client = client or ProlificClient.for_link(link)
    report = HooksReport(target_url=target_url)
    existing = _ours(client.hook_subscriptions(link.workspace_id), target_url)
    for event_type in EVENT_TYPES:
        if existing.get(event_type, {}).get("is_enabled"):
            report.kept.append(event_type)
            continue
        if event_type in existing and existing[event_type].get("id"):
            subscription_id, secret = existing[event_type]["id"], ""
        else:
            body, secret = client.hook_subscribe(link.workspace_id, event_type, target_url)
            subscription_id = body.get("id") or _ours(body.get("results", []), target_url).get(
                event_type, {}
            ).get("id", "")
            report.created.append(event_type)
        if subscription_id and secret:
            client.hook_confirm(subscription_id, secret)
    verified = _ours(client.hook_subscriptions(link.workspace_id), target_url)
    for event_type in EVENT_TYPES:
        (report.verified if verified.get(event_type, {}).get("is_enabled") else report.missing).append(
            event_type
        )
    return report
