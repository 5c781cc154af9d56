"""The picture check in Chromium: what a person sees asks for an answer that neither the page's text nor its
accessibility tree holds; axe finds nothing at any impact on a phone and a desktop; a keyboard-only person
completes it (by the answer they see, or by its sound: count the beeps), and so does a browser without JavaScript."""

import io
import struct
import wave

import pytest
from playwright.sync_api import expect

from studies.authenticity import picture_answer
from studies.models import Participant, ParticipantAuthenticity
from tests.a11y import axe_violations
from tests.factories import rating_study_build
from tests.ratings.test_authenticity_browser import consent_by_keyboard, entry, read, tab_to

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("pages_seconds_apart"),  # the pages read on their own clock (below)
]
ALL_IMPACTS = ("minor", "moderate", "serious", "critical")


@pytest.fixture
def study():
    return rating_study_build(
        conditions=1, prompts=6, items_per_participant=3, trap_picture=True, trap_hidden_instruction=True
    )


def _asked(study, pid: str) -> dict:
    return picture_answer(
        study=study, participant_id=Participant.objects.get(external_id=pid).pk, options=study.scale
    )


def _start(page, live_server, study, pid: str) -> None:
    page.goto(entry(live_server, study, pid))
    page.get_by_role("button", name="I agree, start the study").click()
    page.get_by_role("button", name="I have read the instructions, continue").click()
    expect(page.locator("h1")).to_have_text("Item 1 of 4")


def _to_the_picture(page, answer) -> None:
    """Answers item pages with `answer(page)` until the picture page is shown."""
    for number in range(1, 5):
        expect(page.locator("h1")).to_have_text(f"Item {number} of 4")
        if page.locator("svg.picture").count():
            return
        answer(page)
    raise AssertionError("no picture page")


def _finish(page, answer) -> None:
    """Answers with `answer(page)` until the completion page, each time waiting for the next page's heading."""
    heading = page.locator("main h1")
    while "Thank you" not in (shown := heading.inner_text()):
        answer(page)
        expect(heading).not_to_have_text(shown)


@pytest.mark.parametrize("phone", [True, False], ids=["390x844", "1280x800"])
def test_the_picture_holds_no_answer_in_text_or_accessibility_tree_and_axe_is_clean(
    live_server, person_page, study, phone
):
    page = person_page(phone=phone)
    _start(page, live_server, study, f"LOOK{int(phone)}")
    _to_the_picture(page, lambda p: p.get_by_role("button", name="Okay").click())
    label = _asked(study, f"LOOK{int(phone)}")["label"]
    tree = page.locator("body").aria_snapshot()
    assert "check:" not in tree and f"choose \u201c{label}" not in tree and "choose " + label not in tree
    assert 'img "A picture check. If you cannot see the picture, follow the link' in tree
    assert "I can\u2019t see the picture" in tree
    text = page.evaluate("document.body.textContent")
    assert "This is a check" not in text and f"\u201c{label}\u201d" not in text
    svg = page.evaluate("document.querySelector('svg.picture').outerHTML")
    assert "<text" not in svg and "<title" not in svg and "<desc" not in svg
    assert page.locator("svg.picture").bounding_box()["width"] > 200  # shown, large enough to read
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.screenshot(path=f"/tmp/picture-check-{'phone' if phone else 'desktop'}.png", full_page=True)


def test_a_keyboard_only_person_answers_the_picture_by_what_they_see(live_server, person_page, study):
    page = person_page()
    consent_by_keyboard(page, live_server, study, "KEYS")
    read(page, 600)
    tab_to(page, "I have read the instructions")
    page.keyboard.press("Enter")

    def key(p):
        read(p, 1600)
        p.keyboard.press("2")

    _to_the_picture(page, key)
    asked = _asked(study, "KEYS")
    read(page, 1600)
    tab_to(page, asked["label"])
    page.keyboard.press("Enter")
    expect(page.locator("svg.picture")).to_have_count(0)
    _finish(page, key)
    row = ParticipantAuthenticity.objects.get(participant__external_id="KEYS")
    assert (row.picture, row.score, row.flagged) == ("passed", 100, False), row.reasons
    assert Participant.objects.get(external_id="KEYS").status == Participant.Status.COMPLETED


def beeps_heard(wav: bytes) -> int:
    """Counts the beeps in a recording, as a listener does: bursts of sound between moments of quiet."""
    with wave.open(io.BytesIO(wav)) as recording:
        frames = recording.readframes(recording.getnframes())
    samples = struct.unpack(f"<{len(frames) // 2}h", frames)
    window = [max(abs(s) for s in samples[i : i + 80]) for i in range(0, len(samples), 80)]
    loud = [level > 8000 for level in window]
    return sum(1 for before, now in zip([False, *loud], loud, strict=False) if now and not before)


@pytest.mark.parametrize("phone", [True, False], ids=["390x844", "1280x800"])
def test_a_screen_reader_person_who_cannot_see_the_picture_passes_it_by_sound(
    live_server, person_page, study, phone
):
    """The accessibility tree (what a screen reader reads) leads from the picture to its sound; the person plays
    it, counts the beeps and answers with the keyboard alone, as a screen reader's user does; axe is clean."""
    pid = f"EARS{int(phone)}"
    page = person_page(phone=phone)
    page.clock.install()
    _start(page, live_server, study, pid)

    def okay(p):
        read(p, 1600)
        p.get_by_role("button", name="Okay").press("Enter")  # a screen reader's activation: no pointer

    _to_the_picture(page, okay)
    read(page, 1600)
    tab_to(page, "I can\u2019t see the picture")
    page.keyboard.press("Enter")
    expect(page.locator("audio.picture-sound")).to_have_count(1)
    tree = page.locator("main").aria_snapshot()
    assert "Listen to the sound and count its beeps" in tree and "1 beep: Good" in tree, tree
    assert "I can neither see the picture nor hear the sound" in tree
    label = _asked(study, pid)["label"]
    assert f"choose \u201c{label}" not in tree and "This is a check" not in tree
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.screenshot(path=f"/tmp/picture-sound-{'phone' if phone else 'desktop'}.png", full_page=True)
    sound = page.request.get(live_server.url + page.locator("audio.picture-sound").get_attribute("src"))
    assert sound.ok and sound.headers["content-type"] == "audio/wav"
    beeps = beeps_heard(sound.body())
    scale = [option["label"] for option in study.scale]
    assert scale[beeps - 1] == label  # the sound asks for what the picture asks
    read(page, 4000)
    tab_to(page, label)
    page.keyboard.press("Enter")
    expect(page.locator("audio.picture-sound")).to_have_count(0)
    _finish(page, okay)
    row = ParticipantAuthenticity.objects.get(participant__external_id=pid)
    assert (row.picture, row.score, row.flagged) == ("passed", 100, False), row.reasons


def test_neither_the_picture_nor_the_sound_is_a_light_reason_never_a_flag_alone(
    live_server, person_page, study
):
    page = person_page()
    _start(page, live_server, study, "NEITHER")
    _to_the_picture(page, lambda p: p.get_by_role("button", name="Okay").click())
    page.get_by_role("link", name="I can\u2019t see the picture").click()
    page.get_by_role("button", name="I can neither see the picture nor hear the sound").click()
    expect(page.locator("audio.picture-sound")).to_have_count(0)
    row = ParticipantAuthenticity.objects.get(participant__external_id="NEITHER")
    assert row.picture == "neither" and not row.flagged


def test_the_sound_is_only_for_the_participant_on_their_picture_check(client, study):
    assert (
        client.get(f"/s/{study.slug}/step/?check=sound&sound=wav").status_code == 302
    )  # nobody: to the entry


def test_without_javascript_the_picture_page_is_a_plain_post(live_server, person_page, study):
    page = person_page(javascript=False)
    _start(page, live_server, study, "NOJS")
    _to_the_picture(page, lambda p: p.get_by_role("button", name="Okay").click())
    asked = _asked(study, "NOJS")
    page.get_by_role("button", name=asked["label"], exact=True).click()
    expect(page.locator("svg.picture")).to_have_count(0)
    _finish(page, lambda p: p.get_by_role("button", name="Okay").click())
    assert Participant.objects.get(external_id="NOJS").status == Participant.Status.COMPLETED
    row = ParticipantAuthenticity.objects.get(participant__external_id="NOJS")
    # A browser without JavaScript still fetched the consent page's stylesheet: "no signals" alone, no score.
    assert (row.picture, row.loaded, row.score, row.flagged) == ("passed", True, None, False), row.reasons
