"""The questionnaire kind's authenticity traps, the same protection as the rating and pairwise kinds': consistency
pairs (items of the first page asked again after all the others) and the picture check with its sound, placed by
the rule every kind shares (`authenticity.traps_place`), scored by the one rule (studies/authenticity.py) and never
part of the instrument's answers."""

import re

import pytest

from kinds.questionnaire.pages import questionnaire_layout, questionnaire_submit
from studies.authenticity import picture_answer
from studies.models import Participant, ParticipantAuthenticity, QuestionnaireAnswer, QuestionnaireRun
from tests.concurrency import race

from .test_participants import CHECK, STEP, _questionnaire_study, _step

ANCHORS = ["very slightly or not at all", "a little", "moderately", "quite a bit", "extremely"]
FIELD = re.compile(r'name="((?:item|repeat)-\d+|check|picture)" value="1"')


def _enter(client, study, pid="PID1") -> Participant:
    client.get(f"/s/{study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID=X1")
    client.post(f"/s/{study.slug}/step/", {"step": "consent", "decision": "agree"})
    return Participant.objects.get(external_id=pid)


def _asked(study, participant) -> dict:
    from kinds.questionnaire.kind import QUESTIONNAIRE

    return picture_answer(
        study=study, participant_id=participant.pk, options=QUESTIONNAIRE.picture_options(study)
    )


def _fill(page: str, *, value=3, repeat=None, picture=None) -> dict:
    """Every row of the page: the items `value`, the repeated items `repeat` (default: the same), the attention
    check as it asks, the picture check `picture` (when the page has it)."""
    data = {"step": STEP.search(page).group(1)}
    for name in FIELD.findall(page):
        if name.startswith("item-"):
            data[name] = value
        elif name.startswith("repeat-"):
            data[name] = value if repeat is None else repeat
        elif name == "check":
            data[name] = ANCHORS.index(CHECK.search(page).group(1)) + 1
        elif picture is not None:
            data[name] = picture
    return data


@pytest.fixture
def study(write_json):
    return _questionnaire_study(write_json, trap_repeat_items=2, trap_picture=True, randomise_item_order=True)


@pytest.mark.django_db
def test_the_first_page_asks_its_first_items_again_last_and_the_picture_never_first(client, study):
    participant = _enter(client, study)
    step, page = _step(client, study)
    assert step == "q_default"
    layout = questionnaire_layout(participant=participant, phase="default")
    items = [n for kind, n in layout.rows if kind == "item"]
    assert len(items) == 20 and layout.repeats == items[:2]  # the first two in the participant's order
    last_item = max(i for i, (kind, _) in enumerate(layout.rows) if kind == "item")
    assert all(layout.rows.index(("repeat", n)) > last_item for n in layout.repeats)
    assert 0 < layout.rows.index(("picture", None))
    names = FIELD.findall(page)
    assert names == [
        {"item": f"item-{n}", "repeat": f"repeat-{n}", "check": "check", "picture": "picture"}[kind]
        for kind, n in layout.rows
    ]
    # The picture's instruction is outlines only: the page's text never says which answer it asks for.
    text = re.sub(r"<[^>]+>", " ", re.sub(r'd="[^"]*"', "", page))
    label = _asked(study, participant)["label"]
    # (The attention check's row may ask for the same answer: "choose “…” in this row".)
    asks = text.count(f"choose \u201c{label}\u201d") - text.count(f"choose \u201c{label}\u201d in this row")
    assert 'class="picture"' in page and asks == 0
    # The second page (after the situation) has neither: its answers are meant to change.
    evoked = questionnaire_layout(participant=participant, phase="evoked")
    assert [kind for kind, _ in evoked.rows].count("item") == 20 and len(evoked.rows) == 21


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("first", "second", "far"),
    [(3, 3, False), (2, 4, False), (1, 4, True), (5, 1, True)],
    ids=["same", "two-apart", "three-apart", "ends"],
)
def test_a_repeated_item_is_far_only_more_than_half_the_scale_apart_and_never_an_answer(
    client, study, first, second, far
):
    participant = _enter(client, study)
    _, page = _step(client, study)
    asked = _asked(study, participant)["value"]
    reply = client.post(f"/s/{study.slug}/step/", _fill(page, value=first, repeat=second, picture=asked))
    assert reply.status_code == 302
    run = QuestionnaireRun.objects.get(participant=participant)
    assert run.answers.count() == 20 and set(run.answers.values_list("value", flat=True)) == {first}
    layout = questionnaire_layout(participant=participant, phase="default")
    assert run.traps == {"repeat": {str(n): second for n in layout.repeats}, "picture": asked}
    row = ParticipantAuthenticity.objects.get(participant=participant)
    keys = [str(layout.rows.index(("repeat", n)) + 1) for n in layout.repeats]
    assert row.pairs == dict.fromkeys(keys, int(far)) and row.picture == "passed"
    assert any(r.startswith("inconsistent: 2 of 2") for r in row.reasons) is far


@pytest.mark.django_db
@pytest.mark.parametrize(("how", "outcome"), [("asked", "passed"), ("other", "failed"), ("skip", "neither")])
def test_the_picture_check_is_scored_and_its_sound_keeps_the_answers_given(client, study, how, outcome):
    participant = _enter(client, study)
    _, page = _step(client, study)
    asked = _asked(study, participant)["value"]
    # "I can't see the picture": the page comes back with the sound, the answers kept, nothing stored.
    partial = {**_fill(page, value=2), "picture_view": "sound"}
    del partial["check"]
    sound = client.post(f"/s/{study.slug}/step/", partial)
    html = sound.content.decode()
    assert sound.status_code == 200 and "count its beeps" in html and 'class="picture"' not in html
    assert (
        "I can neither see the picture nor hear the sound" in html and "Please answer every row" not in html
    )
    assert html.count('value="2" id=') >= 20 and len(re.findall(r"\bchecked\b", html)) == 22  # 20 + 2 repeats
    assert not QuestionnaireRun.objects.filter(participant=participant).exists()
    wav = client.get(f"/s/{study.slug}/step/?check=sound&sound=wav")
    assert wav["Content-Type"] == "audio/wav" and wav.content[:4] == b"RIFF"
    answer = {"asked": asked, "other": str(int(asked) % 5 + 1), "skip": "skip"}[how]
    assert client.post(f"/s/{study.slug}/step/", _fill(page, picture=answer)).status_code == 302
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.picture == outcome
    assert QuestionnaireRun.objects.get(participant=participant).traps["picture"] == answer
    assert Participant.objects.get(pk=participant.pk).step == "q_situation"


@pytest.mark.django_db
@pytest.mark.parametrize("missing", ["repeat", "picture"])
def test_a_page_without_its_traps_answered_is_refused_with_nothing_stored(client, study, missing):
    participant = _enter(client, study)
    _, page = _step(client, study)
    data = _fill(page, picture=_asked(study, participant)["value"])
    for name in [n for n in data if n.startswith(missing)][:1]:
        del data[name]
    reply = client.post(f"/s/{study.slug}/step/", data)
    assert reply.status_code == 400 and "Please answer every row" in reply.content.decode()
    assert not QuestionnaireRun.objects.filter(participant=participant).exists()
    assert not ParticipantAuthenticity.objects.filter(participant=participant, pairs__gt={}).exists()
    with pytest.raises(Exception, match="asked again"):
        questionnaire_submit(
            participant=participant,
            step="q_default",
            answers=dict.fromkeys(range(1, 21), 3),
            check_passed=True,
        )
    assert not QuestionnaireAnswer.objects.filter(run__participant=participant).exists()


@pytest.mark.django_db
def test_without_the_settings_the_page_has_no_trap_row(client, write_json):
    study = _questionnaire_study(write_json)
    participant = _enter(client, study)
    _, page = _step(client, study)
    assert "repeat-" not in page and 'name="picture"' not in page
    assert len(questionnaire_layout(participant=participant, phase="default").rows) == 21


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_first_page_sent_eight_times_at_once_is_stored_and_scored_once(write_json, requires_postgres):
    from studies.participants import participant_enroll

    study = _questionnaire_study(write_json, trap_repeat_items=2, trap_picture=True)
    participant = participant_enroll(study=study, external_id="RACER")
    Participant.objects.filter(pk=participant.pk).update(step="q_default")
    participant.refresh_from_db()
    layout = questionnaire_layout(participant=participant, phase="default")
    asked = _asked(study, participant)["value"]
    wrong = str(int(asked) % 5 + 1)

    def send(i):
        # Each sender answers the repeated items differently: whichever is stored, its pairs are its own.
        return questionnaire_submit(
            participant=Participant.objects.get(pk=participant.pk),
            step="q_default",
            answers=dict.fromkeys(range(1, 21), 1),
            check_passed=True,
            traps={"repeat": dict.fromkeys(layout.repeats, 1 + (i % 2) * 4), "picture": wrong},
        )

    results, errors = race(send, 8)
    assert not errors and sorted(results.values()) == [False] * 7 + [True]
    winner = next(i for i, stored in results.items() if stored)
    run = QuestionnaireRun.objects.get(participant=participant)
    assert run.answers.count() == 20
    assert run.traps["repeat"] == {str(n): 1 + (winner % 2) * 4 for n in layout.repeats}
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.picture == "failed"
    assert sorted(row.pairs.values()) == [winner % 2] * 2  # the stored answer's pairs, recorded once
    assert Participant.objects.get(pk=participant.pk).step == "q_situation"
