"""Creating the Prolific study from ours, and publishing, pausing, resuming and stopping it.

Every function makes its HTTP calls outside any transaction and writes what Prolific answered afterwards.
"""

from __future__ import annotations

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from studies.models import Condition, Study

from .client import ProlificClient, ProlificError
from .models import ProlificStudy

PLACEHOLDERS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"


class LaunchError(Exception):
    """The action cannot be taken (nothing was sent to Prolific, nothing written)."""


# What each button asks of Prolific, and which states it may be pressed in.
ACTIONS = {
    "publish": ("PUBLISH", {ProlificStudy.State.UNPUBLISHED}),
    "pause": ("PAUSE", {ProlificStudy.State.ACTIVE}),
    "resume": ("START", {ProlificStudy.State.PAUSED}),
    "stop": ("STOP", {ProlificStudy.State.ACTIVE, ProlificStudy.State.PAUSED}),
}


def places_for(study: Study) -> int:
    """Places on Prolific: the sum of the conditions' quotas (each condition's own, or the study's)."""
    return sum(
        condition.effective_quota
        for condition in Condition.objects.filter(study=study).select_related("study")
    )


def external_study_url(link: ProlificStudy) -> str:
    path = reverse("ratings:entry", kwargs={"slug": link.study.slug})
    return f"{link.site_url.rstrip('/')}{path}?{PLACEHOLDERS}"


def completion_codes(study: Study) -> list[dict]:
    """One completion code per outcome we give participants, each with Prolific's action for it.

    Every code is left for review on Prolific: with auto-approve on, we approve in bulk ourselves, after
    checking our own records (see `recruiting.submissions`), so a timed-out or unfinished submission is
    never approved because it typed a code. Failed checks: always left for the admin's decision. Screened out (consent declined): also left
    for review, since screening-out payments need workspace features we cannot assume."""
    codes = []
    if study.completion_code:
        codes.append(
            {
                "code": study.completion_code,
                "code_type": "COMPLETED",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            }
        )
    if study.failed_checks_code and study.failed_checks_code != study.completion_code:
        codes.append(
            {
                "code": study.failed_checks_code,
                "code_type": "FAILED_ATTENTION_CHECK",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            }
        )
    if study.screened_out_code:
        codes.append(
            {
                "code": study.screened_out_code,
                "code_type": "NO_CONSENT",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            }
        )
    return codes


def study_payload(link: ProlificStudy) -> dict:
    study = link.study
    payload = {
        "name": link.prolific_name,
        "internal_name": study.slug,
        "description": link.prolific_description,
        "external_study_url": external_study_url(link),
        "prolific_id_option": "url_parameters",
        "completion_codes": completion_codes(study),
        "estimated_completion_time": link.estimated_minutes,
        "maximum_allowed_time": max(link.estimated_minutes * 3, study.time_limit_minutes),
        "reward": link.reward,
        "total_available_places": places_for(study),
        "device_compatibility": list(link.devices),
    }
    if link.filters:
        payload["filters"] = list(link.filters)  # the audience (prescreeners): recruiting/filters.py
    return payload


def prolific_study_create(*, link: ProlificStudy, client: ProlificClient | None = None) -> ProlificStudy:
    """Creates the Prolific study as a draft (UNPUBLISHED) and stores its id. Refuses a study already
    created, or one without a completion code (Prolific requires one)."""
    if link.prolific_study_id:
        raise LaunchError(f"Study {link.study.slug} is already on Prolific as {link.prolific_study_id}.")
    if not link.study.completion_code:
        raise LaunchError("Give the study a completion code first: Prolific needs one.")
    payload = study_payload(link)
    if payload["total_available_places"] < 1:
        raise LaunchError("The study has no conditions, so no places: add conditions with quotas first.")
    client = client or ProlificClient.for_link(link)
    answer = client.study_create(payload)
    study_id = answer.get("id")
    if not study_id:
        raise ProlificError("Prolific created the study but returned no id.")
    with transaction.atomic():
        # Conditional: a double click that created two drafts keeps the first id (the second stays a draft).
        updated = ProlificStudy.objects.filter(pk=link.pk, prolific_study_id="").update(
            prolific_study_id=study_id,
            state=answer.get("status") or ProlificStudy.State.UNPUBLISHED,
            state_at=timezone.now(),
            places=payload["total_available_places"],
        )
        if updated:
            # The entry refuses a link naming another STUDY_ID (ratings/entry_guard.py) from now on.
            Study.objects.filter(pk=link.study_id).update(platform_study_id=study_id)
    link.refresh_from_db()
    if not updated:
        raise LaunchError(f"Study {link.study.slug} was created on Prolific by another request meanwhile.")
    return link


def prolific_study_act(
    *, link: ProlificStudy, action: str, client: ProlificClient | None = None
) -> ProlificStudy:
    """Publishes, pauses, resumes or stops the Prolific study (`action` is one of ACTIONS). Publishing and
    resuming first make the places follow the quotas."""
    if action not in ACTIONS:
        raise LaunchError(f"Unknown action {action!r}.")
    prolific_action, allowed = ACTIONS[action]
    if not link.prolific_study_id:
        raise LaunchError("Create the study on Prolific first.")
    if link.state not in allowed:
        raise LaunchError(f"Cannot {action} a study that is {link.get_state_display().lower()} on Prolific.")
    client = client or ProlificClient.for_link(link)
    if action in ("publish", "resume"):
        prolific_places_sync(link=link, client=client)
    answer = client.study_transition(link.prolific_study_id, prolific_action)
    new_state = (
        answer.get("status")
        or {
            "PUBLISH": ProlificStudy.State.ACTIVE,
            "PAUSE": ProlificStudy.State.PAUSED,
            "START": ProlificStudy.State.ACTIVE,
            "STOP": ProlificStudy.State.AWAITING_REVIEW,
        }[prolific_action]
    )
    ProlificStudy.objects.filter(pk=link.pk).update(state=new_state, state_at=timezone.now())
    link.refresh_from_db()
    return link


def prolific_places_sync(*, link: ProlificStudy, client: ProlificClient | None = None) -> bool:
    """Makes Prolific's places equal the sum of our quotas (a PATCH only when they differ). Returns whether
    a change was sent."""
    places = places_for(link.study)
    if not link.prolific_study_id or places == link.places:
        return False
    client = client or ProlificClient.for_link(link)
    client.study_update(link.prolific_study_id, {"total_available_places": places})
    ProlificStudy.objects.filter(pk=link.pk).update(places=places)
    link.places = places
    return True
