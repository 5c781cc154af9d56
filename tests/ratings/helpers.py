"""Driving the participant flow through Django's test client, as a browser would."""

import json
import re

from django.test import Client

POSITION = re.compile(r'name="position" value="(\d+)"')
STEP = re.compile(r'name="step" value="([a-z_]+)"')
CSRF_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def carried(response, element_id: str) -> dict | None:
    """The JSON a participant page carries for its script in `<script id=element_id>` (the consent page's
    `next-step` and `first-item`: ratings/shared_pages.py `consent_page`), or None when it carries none."""
    found = re.search(
        rf'<script id="{element_id}" type="application/json">(.*?)</script>', response.content.decode(), re.S
    )
    return json.loads(found.group(1)) if found else None


def entry_url(study, pid=None, **params):
    query = {"PROLIFIC_PID": pid, "STUDY_ID": "STUDY1", "SESSION_ID": "SESSION1"} if pid else {}
    query.update(params)
    return f"/s/{study.slug}/", query


def enter(client: Client, study, pid=None, **params):
    url, query = entry_url(study, pid, **params)
    return client.get(url, query, follow=True)


def step_url(study):
    return f"/s/{study.slug}/step/"


def current_step(client, study):
    response = client.get(step_url(study))
    match = STEP.search(response.content.decode())
    return (match.group(1) if match else None), response


def post_step(client, study, **data):
    step, _ = current_step(client, study)
    return client.post(step_url(study), {"step": step, **data})


def consent_and_instructions(client, study):
    assert post_step(client, study, decision="agree").status_code == 302
    assert post_step(client, study).status_code == 302


def current_position(client, study):
    page = client.get(step_url(study)).content.decode()
    match = POSITION.search(page)
    return int(match.group(1)) if match else None


def answer_current(client, study, value):
    position = current_position(client, study)
    if position is None:
        return None, None
    return position, client.post(step_url(study), {"step": "items", "position": position, "value": value})


def item_positions(participant) -> list[int]:
    """The positions of a participant's pages, in order."""
    from studies.models import Assignment

    return list(
        Assignment.objects.filter(participant=participant)
        .order_by("position")
        .values_list("position", flat=True)
    )


def first_item(client: Client, study, pid: str = "PID1") -> str:
    """Enters `study` as `pid`, agrees to the consent form and passes the instructions; the page of their
    first item (read once: it marks the item as shown)."""
    enter(client, study, pid)
    consent_and_instructions(client, study)
    return client.get(step_url(study)).content.decode()


def at_first_item(study, pid: str = "PID1"):
    """A browser whose participant `pid` has consented and read the instructions: (browser, its item's
    position)."""
    browser = Client()
    enter(browser, study, pid)
    consent_and_instructions(browser, study)
    return browser, current_position(browser, study)


def another_tab(cookies) -> Client:
    """A second tab of the browser whose cookies these are (the same session and ticket)."""
    tab = Client()
    tab.cookies = cookies
    return tab
