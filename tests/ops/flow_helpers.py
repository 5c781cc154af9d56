"""Walking the real participant flow through Django's test client, as the abuse tests need it."""

from __future__ import annotations

import re

from django.test import Client

from studies.models import Condition, Participant, Study
from tests.factories import ConditionFactory, PromptFactory, ResponseFactory, StudyFactory

_HIDDEN = re.compile(r'<input type="hidden" name="(?P<name>[^"]+)" value="(?P<value>[^"]*)"')


def live_study(
    *, slug: str = "launch", items: int = 3, prompts: int = 8, situation: str | None = None
) -> Study:
    """A live Prolific rating study with two conditions and enough responses for several participants."""
    study = StudyFactory(
        slug=slug, state=Study.State.LIVE, platform=Study.Platform.PROLIFIC, items_per_participant=items
    )
    conditions = [
        ConditionFactory(study=study, name=name, kind=Condition.Kind.HUMAN) for name in ("human", "gpt4")
    ]
    for i in range(prompts):
        prompt = PromptFactory(study=study, **({"situation": situation} if situation else {}))
        for condition in conditions:
            ResponseFactory(prompt=prompt, condition=condition, text=f"reply {i} from {condition.name}")
    return study


def hidden_fields(html: str) -> dict[str, str]:
    """The page form's hidden fields, without the CSRF token (tests add it, or leave it out, themselves)."""
    return {m["name"]: m["value"] for m in _HIDDEN.finditer(html) if m["name"] != "csrfmiddlewaretoken"}


def enter(client: Client, study: Study, pid: str):
    return client.get(
        f"/s/{study.slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": "se"}, follow=True
    )


def post_step(client: Client, study: Study, data: dict, **extra):
    """POSTs to the step page with the CSRF token the page's cookie holds (what a browser form carries)."""
    token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else ""
    return client.post(f"/s/{study.slug}/step/", {"csrfmiddlewaretoken": token, **data}, **extra)


def to_first_item(client: Client, study: Study, pid: str) -> tuple[Participant, dict]:
    """Entry → consent (agree) → instructions: returns the participant and the first item page's fields."""
    enter(client, study, pid)
    post_step(client, study, {"step": "consent", "decision": "agree"})
    post_step(client, study, {"step": "instructions"})
    page = client.get(f"/s/{study.slug}/step/")
    fields = hidden_fields(page.content.decode())
    assert fields.get("step") == "items", page.content.decode()[:500]
    return Participant.objects.get(study=study, external_id=pid), fields
