"""Helpers of the chat-demo walks: choosing the source a test walks, reading an export, giving the PETS answers."""

from __future__ import annotations

import csv
import io

from playwright.sync_api import expect

from analysis.exports import export_lines
from generation.providers.placeholder import PlaceholderAdapter
from kinds.chat.demo import MODEL_SOURCE, PERSON
from kinds.chat.models import ChatSettings
from kinds.chat.pets import KEYS
from studies.demo import seed
from studies.demo.seed import DemoInfo, demo_seed
from studies.kinds import kind_named
from studies.models import Condition

PETS_GIVEN = [7, 93, 0, 100, 42, 58, 13, 66, 25, 81]  # the sliders' values, in the order they are shown


def sources_enrolling(study, name: str) -> None:
    """chat-demo's new participants all go to one of its two sources (`MODEL_SOURCE` or `PERSON`): a test that
    walks one source closes the other to enrolment, as a researcher can."""
    sources = Condition.objects.filter(study=study, name__in=[MODEL_SOURCE, PERSON])
    assert sources.count() == 2
    sources.exclude(name=name).update(enrolling=False)
    sources.filter(name=name).update(enrolling=True)


def demo_live(settings, tmp_path, live_server, monkeypatch, source: str) -> DemoInfo:
    """`make run`'s demo seeded on the live test server, chat-demo's new participants going to `source`; the test
    model a little faster than in the demo (10 ms a word), the minimum reply wait 300 ms. Only the chat kind's demo
    is seeded: the others (900 published ratings among them) would cost each test seconds before its browser
    opened; tests/studies/test_seed_demo.py and tests/kinds/chat/test_walk.py check the whole seed."""
    settings.VAR_DIR = tmp_path
    monkeypatch.setattr(PlaceholderAdapter, "word_seconds", 0.01)
    monkeypatch.setattr(seed, "registered_kinds", lambda: [kind_named("chat")])
    info = demo_seed(base_url=live_server.url)
    ChatSettings.objects.filter(study__slug="chat-demo").update(min_reply_wait_ms=300)
    sources_enrolling(info.kind_studies["chat"], source)
    return info


def export_rows(study, what: str) -> list[dict]:
    """The rows of one of the study's CSV exports, as the researcher downloads it."""
    return list(csv.DictReader(io.StringIO("".join(export_lines(study=study, what=what)))))


def pets_give(page) -> dict[str, int]:
    """Moves every PETS slider, in the order shown, to its value of PETS_GIVEN: {item key: value}."""
    sliders = page.locator("input[type=range]")
    expect(sliders).to_have_count(len(KEYS))
    given = {}
    for i, value in enumerate(PETS_GIVEN):
        slider = sliders.nth(i)
        slider.fill(str(value))
        given[slider.get_attribute("name").removeprefix("pets_")] = value
    return given


def http_errors(page) -> list[str]:
    """The responses of status 400 or more the page receives from now on: a list that fills as the page runs."""
    errors: list[str] = []
    page.on(
        "response",
        lambda r: errors.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 400 else None,
    )
    return errors
