"""The pairwise kind's picture check in Chromium, as the rating kind's: what a person sees asks for one of the three
answers, which neither the page's text nor its accessibility tree holds; a screen reader's user finds the sound
through the accessibility tree, counts its beeps and passes; axe finds nothing at any impact with every trap on,
on a phone and a desktop (screenshots in /tmp for looking at)."""

import pytest
from playwright.sync_api import expect

from kinds.pairwise.traps import PICTURE_OPTIONS
from studies.authenticity import picture_answer
from studies.models import Participant, ParticipantAuthenticity
from tests.a11y import axe_violations
from tests.factories import pairwise_study_build
from tests.ratings.test_authenticity_browser import entry, read, tab_to
from tests.ratings.test_picture_browser import beeps_heard

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("pages_seconds_apart"),
]
ALL_IMPACTS = ("minor", "moderate", "serious", "critical")
TIE = "About the same"


@pytest.fixture
def study():
    # Every trap on: the hidden instruction, two consistency pairs, the picture check.
    return pairwise_study_build(
        conditions=3,
        prompts=8,
        items_per_participant=4,
        trap_picture=True,
        trap_hidden_instruction=True,
        trap_repeat_items=2,
    )


def _asked(study, pid: str) -> dict:
    participant = Participant.objects.get(external_id=pid)
    return picture_answer(study=study, participant_id=participant.pk, options=PICTURE_OPTIONS)


def _start(page, live_server, study, pid: str) -> None:
    page.goto(entry(live_server, study, pid))
    read(page, 3000)
    page.get_by_role("button", name="I agree, start the study").press("Enter")
    read(page, 3000)
    page.get_by_role("button", name="I have read the instructions, continue").press("Enter")
    expect(page.locator("main h1")).to_have_text("Pair 1 of 7")


def _answer_until_picture(page, shots: str | None = None) -> None:
    for number in range(1, 8):
        expect(page.locator("main h1")).to_have_text(f"Pair {number} of 7")
        if page.locator("svg.picture").count():
            return
        if shots and number == 1:
            assert axe_violations(page, impacts=ALL_IMPACTS) == []
            page.screenshot(path=f"/tmp/authn-pair-{shots}.png", full_page=True)
        read(page, 4000)
        page.get_by_role("button", name=TIE).click()
        expect(page.locator("main h1")).not_to_have_text(f"Pair {number} of 7", timeout=30_000)
    raise AssertionError("no picture page")


def _finish(page) -> None:
    heading = page.locator("main h1")
    while "Thank you" not in (shown := heading.inner_text()):
        read(page, 4000)
        page.get_by_role("button", name=TIE).click()
        expect(heading).not_to_have_text(shown, timeout=30_000)


@pytest.mark.parametrize("phone", [True, False], ids=["390x844", "1280x800"])
def test_a_screen_reader_person_passes_the_pairwise_picture_check_by_its_sound_axe_clean(
    live_server, person_page, study, phone
):
    size = "phone" if phone else "desktop"
    pid = f"PWEARS{int(phone)}"
    page = person_page(phone=phone)
    page.clock.install()
    _start(page, live_server, study, pid)
    _answer_until_picture(page, shots=size)
    asked = _asked(study, pid)
    tree = page.locator("body").aria_snapshot()
    assert 'img "A picture check. If you cannot see the picture, follow the link' in tree
    assert "This is a check" not in tree and f"choose \u201c{asked['label']}" not in tree
    assert "Both replies are inadequate" not in tree
    text = page.evaluate("document.body.textContent")
    assert "This is a check" not in text and f"\u201c{asked['label']}\u201d" not in text
    assert page.locator("svg.picture").bounding_box()["width"] > 200
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.screenshot(path=f"/tmp/authn-pair-picture-{size}.png", full_page=True)
    read(page, 3000)
    tab_to(page, "I can\u2019t see the picture")
    page.keyboard.press("Enter")
    expect(page.locator("audio.picture-sound")).to_have_count(1)
    tree = page.locator("main").aria_snapshot()
    with open(f"/tmp/authn-pair-sound-{size}.aria.txt", "w") as out:
        out.write(tree)
    assert "Listen to the sound and count its beeps" in tree
    assert "1 beep: A is more empathetic" in tree and "3 beeps: About the same" in tree, tree
    assert "I can neither see the picture nor hear the sound" in tree
    assert f"choose \u201c{asked['label']}" not in tree
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.screenshot(path=f"/tmp/authn-pair-sound-{size}.png", full_page=True)
    sound = page.request.get(live_server.url + page.locator("audio.picture-sound").get_attribute("src"))
    assert sound.ok and sound.headers["content-type"] == "audio/wav"
    heard = PICTURE_OPTIONS[beeps_heard(sound.body()) - 1]["label"]
    assert heard == asked["label"]  # the sound asks for what the picture asks
    read(page, 5000)
    tab_to(page, heard)
    page.keyboard.press("Enter")
    expect(page.locator("audio.picture-sound")).to_have_count(0)
    _finish(page)
    row = ParticipantAuthenticity.objects.get(participant__external_id=pid)
    assert (row.picture, row.flagged) == ("passed", False), row.reasons
    assert set(row.pairs.values()) == {0}  # "about the same" twice: consistent
    assert Participant.objects.get(external_id=pid).status == Participant.Status.COMPLETED
