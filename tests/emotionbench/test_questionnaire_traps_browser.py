"""The questionnaire's traps in Chromium, with every trap on: what a person sees asks for one of the instrument's
answers, which neither the page's text nor its accessibility tree holds; a screen reader's user finds the sound
through the accessibility tree, keeps the answers given so far, counts its beeps and passes with the keyboard;
axe finds nothing at any impact on a phone and a desktop (screenshots in /tmp for looking at)."""

import pytest
from playwright.sync_api import expect

from kinds.questionnaire.kind import QUESTIONNAIRE
from studies.authenticity import picture_answer
from studies.models import Participant, ParticipantAuthenticity, QuestionnaireRun
from tests.a11y import axe_violations
from tests.ratings.conftest import pages_seconds_apart  # noqa: F401 (the fixture, used below)
from tests.ratings.test_authenticity_browser import entry, read, tab_to
from tests.ratings.test_picture_browser import beeps_heard

from .test_participants import CHECK, _questionnaire_study

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("pages_seconds_apart"),
]
ALL_IMPACTS = ("minor", "moderate", "serious", "critical")


def _asks(text: str, label: str) -> bool:
    """Whether `text` says to choose `label` other than in the attention check's row (which may ask for the same
    answer: "To show you are reading, choose “…” in this row.")."""
    return text.count(f"choose \u201c{label}\u201d") > text.count(f"choose \u201c{label}\u201d in this row")


@pytest.mark.parametrize("phone", [True, False], ids=["390x844", "1280x800"])
def test_a_screen_reader_person_passes_the_questionnaire_picture_check_by_its_sound_axe_clean(
    live_server, page_at, write_json, phone
):
    study = _questionnaire_study(
        write_json, trap_picture=True, trap_hidden_instruction=True, trap_repeat_items=2
    )
    size = "phone" if phone else "desktop"
    pid = f"QEARS{int(phone)}"
    page = page_at("phone" if phone else "desktop", person=True)
    page.clock.install()
    page.goto(entry(live_server, study, pid))
    read(page, 3000)
    page.get_by_role("button", name="I agree, start the study").press("Enter")
    expect(page.locator("main h1")).to_have_text("How do you feel right now?", timeout=30_000)
    participant = Participant.objects.get(external_id=pid)
    options = QUESTIONNAIRE.picture_options(study)
    asked = picture_answer(study=study, participant_id=participant.pk, options=options)
    expect(page.locator("fieldset.q-item")).to_have_count(20 + 1 + 2 + 1)  # items, check, repeats, picture
    tree = page.locator("body").aria_snapshot()
    assert 'img "A picture check. If you cannot see the picture, follow the button' in tree
    assert "This is a check" not in tree and not _asks(tree, asked["label"])
    text = page.evaluate("document.body.textContent")
    assert "This is a check" not in text and not _asks(text, asked["label"])
    assert page.locator("svg.picture").bounding_box()["width"] > 200
    assert page.evaluate("document.documentElement.scrollWidth") <= (390 if phone else 1280)
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.locator("fieldset.q-picture").scroll_into_view_if_needed()
    page.screenshot(path=f"/tmp/authn-q-picture-{size}.png", full_page=False)
    # The rows first ("moderately"; the attention check as it asks), with the keyboard: Space on a row's radio.
    for fieldset in page.locator("fieldset.q-item").all():
        if "Answer as the picture asks" in fieldset.inner_text():
            continue
        wanted = CHECK.search(fieldset.inner_text())
        label = wanted.group(1) if wanted else "moderately"
        fieldset.get_by_role("radio", name=label, exact=True).focus()
        page.keyboard.press("Space")
        read(page, 600)
    # "I can't see the picture": the same page back with the sound, every answer kept.
    page.locator("fieldset.q-picture input[type=radio]").first.focus()
    tab_to(page, "I can\u2019t see the picture")
    page.keyboard.press("Enter")
    expect(page.locator("audio.picture-sound")).to_have_count(1, timeout=30_000)
    expect(page.locator("input[type=radio]:checked")).to_have_count(23)
    assert page.locator(".error-summary").count() == 0
    tree = page.locator("fieldset.q-picture").aria_snapshot()
    with open(f"/tmp/authn-q-sound-{size}.aria.txt", "w") as out:
        out.write(tree)
    assert "Listen to the sound and count its beeps" in tree
    assert "1 beep: very slightly or not at all" in tree and "5 beeps: extremely" in tree, tree
    assert "I can neither see the picture nor hear the sound" in tree and "Back to the picture" in tree
    assert not _asks(tree, asked["label"])
    assert axe_violations(page, impacts=ALL_IMPACTS) == []
    page.locator("fieldset.q-picture").scroll_into_view_if_needed()
    page.screenshot(path=f"/tmp/authn-q-sound-{size}.png", full_page=False)
    sound = page.request.get(live_server.url + page.locator("audio.picture-sound").get_attribute("src"))
    assert sound.ok and sound.headers["content-type"] == "audio/wav"
    beeps = beeps_heard(sound.body())
    assert options[beeps - 1]["label"] == asked["label"]  # the sound asks for what the picture asks
    read(page, 5000)
    # The check's row by the keyboard: Space on its first answer, then the arrow keys to the number heard.
    page.locator("fieldset.q-picture input[type=radio]").first.focus()
    page.keyboard.press("Space")
    for _ in range(beeps - 1):
        page.keyboard.press("ArrowRight")
    tab_to(page, "Continue")
    page.keyboard.press("Enter")
    expect(page.locator("main h1")).to_have_text("Imagine this situation", timeout=30_000)
    run = QuestionnaireRun.objects.get(participant=participant)
    assert run.traps["picture"] == asked["value"] and set(run.traps["repeat"].values()) == {3}
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert (row.picture, row.flagged) == ("passed", False), row.reasons
    assert list(row.pairs.values()) == [0, 0]
