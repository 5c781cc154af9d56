"""The pairwise kind's authenticity traps, the same protection as the rating kind's: consistency pairs (a pair shown
again after all the others with its replies' sides swapped) and the picture check with its sound, scored by the one
rule (studies/authenticity.py) and never counted as votes."""

import re

import pytest
from django.test import Client

from kinds.pairwise.frame import pairwise_answer_rows
from kinds.pairwise.kind import answered_pairs
from kinds.pairwise.models import PairItem
from kinds.pairwise.pages import pair_answer_submit
from kinds.pairwise.traps import PICTURE_OPTIONS
from studies.authenticity import NOT_LOADED, picture_answer
from studies.models import Participant, ParticipantAuthenticity
from tests.factories import pairwise_study_build
from tests.ratings.helpers import POSITION, consent_and_instructions, enter, step_url
from tests.studies.test_assignment_races import race

pytestmark = pytest.mark.django_db
REPLY_IDS = re.compile(r"data-reply-a>([^<]*)</p>.*?data-reply-b>([^<]*)</p>", re.S)


def _study(**traps):
    return pairwise_study_build(conditions=3, prompts=8, items_per_participant=4, **traps)


def _on_pairs(client, study, pid="PID1") -> Participant:
    enter(client, study, pid)
    consent_and_instructions(client, study)
    return Participant.objects.get(external_id=pid)


def _asked(study, participant) -> str:
    return picture_answer(study=study, participant_id=participant.pk, options=PICTURE_OPTIONS)["value"]


def _answer(client, study, position, choice=None, **extra):
    data = {"step": "pairs", "position": position, **({"choice": choice} if choice else {}), **extra}
    return client.post(step_url(study), data)


def test_repeats_are_the_first_pairs_again_last_with_the_sides_swapped_and_the_picture_never_first():
    study = _study(trap_repeat_items=2, trap_picture=True)
    client = Client()
    participant = _on_pairs(client, study)
    pages = list(participant.pair_items.order_by("position"))
    assert len(pages) == 4 + 2 + 1
    pictures = [p for p in pages if p.trap == PairItem.Trap.PICTURE]
    assert len(pictures) == 1 and pictures[0].position > 0 and pictures[0].prompt_id is None
    regular = [p for p in pages if p.trap == ""]
    repeats = [p for p in pages if p.trap == PairItem.Trap.REPEAT]
    assert [(r.prompt_id, r.left_id, r.right_id) for r in repeats] == [
        (p.prompt_id, p.right_id, p.left_id) for p in regular[:2]
    ]
    assert max(r.position for r in regular) < min(r.position for r in repeats)


def test_without_the_settings_there_is_no_trap_page():
    study = _study()
    participant = _on_pairs(Client(), study)
    assert not participant.pair_items.exclude(trap="").exists()


@pytest.mark.parametrize(
    ("second", "far", "flagged_reasons"),
    [
        ("same reply", False, []),
        ("tie", False, []),
        ("other reply", True, ["inconsistent: 2 of 2 items shown twice answered far apart (-30)"]),
    ],
)
def test_a_consistency_pair_is_far_only_when_the_other_reply_is_preferred(second, far, flagged_reasons):
    study = _study(trap_repeat_items=2)
    client = Client()
    participant = _on_pairs(client, study)
    pages = list(participant.pair_items.order_by("position"))
    first_choice = {}
    for page in pages:
        if page.trap == "":
            choice = "left"
            first_choice[page.prompt_id] = page.left_id
        else:
            preferred = first_choice[page.prompt_id]  # now on the right: the sides are swapped
            choice = {
                "same reply": "right" if page.right_id == preferred else "left",
                "other reply": "left" if page.right_id == preferred else "right",
                "tie": "tie",
            }[second]
        assert _answer(client, study, page.position, choice).status_code == 302
    row = ParticipantAuthenticity.objects.get(participant=participant)
    repeats = [str(p.position) for p in pages if p.trap == PairItem.Trap.REPEAT]
    assert row.pairs == dict.fromkeys(repeats, int(far))
    assert [r for r in row.reasons if r.startswith("inconsistent")] == flagged_reasons
    # Never a vote: the analysis and the live counts read the four pairs only.
    assert answered_pairs(study) == 4
    assert len(list(pairwise_answer_rows(study=study))) == 4


@pytest.mark.parametrize(
    ("verdicts", "far"),
    [
        ([], True),  # no judge compared the two replies: not known to be close
        (["first"], True),  # the judges prefer the reply the participant first preferred
        (["first", "first"], True),
        (["same"], False),  # a near tie: a side once, the other side the next time is no inconsistency
        (["first", "other"], False),  # the judges split: a near tie too
        (["first", "same"], False),
    ],
)
def test_a_reversal_on_a_pair_the_judges_hold_close_is_not_far(verdicts, far):
    from generation.judge_formats import VERDICT_A, VERDICT_B, VERDICT_SAME
    from generation.judge_models import Judge, JudgeRating
    from generation.models import Provider

    study = _study(trap_repeat_items=1)
    client = Client()
    participant = _on_pairs(client, study)
    pages = list(participant.pair_items.order_by("position"))
    first = next(p for p in pages if p.trap == "")
    provider = Provider.objects.create(name="p")
    for i, verdict in enumerate(verdicts):
        judge = Judge.objects.create(study=study, name=f"j{i}", provider=provider, model="m")
        # Stored in either order: the judge's A is its `response`.
        left_first = i % 2 == 0
        value = {
            "first": VERDICT_A if left_first else VERDICT_B,
            "other": VERDICT_B if left_first else VERDICT_A,
        }
        JudgeRating.objects.create(
            judge=judge,
            response_id=first.left_id if left_first else first.right_id,
            versus_id=first.right_id if left_first else first.left_id,
            status=JudgeRating.Status.DONE,
            value=value.get(verdict, VERDICT_SAME),
        )
    for page in pages:
        # The first showing prefers its left reply; the second (sides swapped) prefers the other reply: left again.
        assert _answer(client, study, page.position, "left").status_code == 302
    repeat = next(p for p in pages if p.trap == PairItem.Trap.REPEAT)
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.pairs == {str(repeat.position): int(far)}
    assert any(r.startswith("inconsistent") for r in row.reasons) is far


@pytest.mark.parametrize(
    ("how", "outcome"),
    [("asked", "passed"), ("other", "failed"), ("skip", "neither")],
)
def test_the_picture_page_says_nothing_of_the_answer_and_its_answer_is_scored(how, outcome):
    study = _study(trap_picture=True)
    client = Client()
    participant = _on_pairs(client, study)
    asked = _asked(study, participant)
    label = next(o["label"] for o in PICTURE_OPTIONS if o["value"] == asked)
    for page in participant.pair_items.order_by("position"):
        if page.trap == PairItem.Trap.PICTURE:
            html = client.get(step_url(study)).content.decode()
            assert 'class="picture"' in html and "I can&rsquo;t see the picture" in html
            text = re.sub(r"<[^>]+>", " ", re.sub(r'd="[^"]*"', "", html))
            assert f"choose \u201c{label}" not in text and "Both replies are inadequate" not in html
            sound = client.get(step_url(study) + "?check=sound").content.decode()
            assert "count its beeps" in sound and "I can neither see the picture nor hear the sound" in sound
            wav = client.get(step_url(study) + "?check=sound&sound=wav")
            assert wav["Content-Type"] == "audio/wav" and wav.content[:4] == b"RIFF"
            if how == "skip":
                response = _answer(client, study, page.position, picture="skip")
            else:
                other = next(o["value"] for o in PICTURE_OPTIONS if o["value"] != asked)
                response = _answer(client, study, page.position, asked if how == "asked" else other)
        else:
            response = _answer(client, study, page.position, "tie")
        assert response.status_code == 302
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.picture == outcome
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED
    assert answered_pairs(study) == 4


def test_the_way_out_is_refused_on_an_ordinary_pair_with_nothing_stored():
    study = _study(trap_picture=True)
    client = Client()
    participant = _on_pairs(client, study)
    first = participant.pair_items.order_by("position").first()
    assert first.trap == ""
    assert _answer(client, study, first.position, picture="skip").status_code == 400
    assert not participant.pair_items.filter(answered_at__isnull=False).exists()


def test_the_sound_is_only_for_the_participant_on_their_picture_check():
    study = _study(trap_picture=True)
    client = Client()
    _on_pairs(client, study)
    reply = client.get(step_url(study) + "?check=sound&sound=wav")
    assert reply["Content-Type"].startswith("text/html")  # the pair page: not on the check yet
    assert POSITION.search(reply.content.decode())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_picture_answer_sent_twice_at_once_is_stored_and_scored_once(requires_postgres):
    study = _study(trap_picture=True)
    participant = _on_pairs(Client(), study)
    picture = participant.pair_items.get(trap=PairItem.Trap.PICTURE)
    for page in participant.pair_items.filter(position__lt=picture.position).order_by("position"):
        pair_answer_submit(participant=participant, position=page.position, choice="tie")
    wrong = next(o["value"] for o in PICTURE_OPTIONS if o["value"] != _asked(study, participant))

    def send(i):
        return pair_answer_submit(
            participant=Participant.objects.get(pk=participant.pk), position=picture.position, choice=wrong
        )

    results, errors = race(send, 8)
    assert not errors and sorted(results.values()) == [False] * 7 + [True]
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.picture == "failed" and row.reasons == [
        "no signals: the browser sent none (JavaScript off, an old browser, or forms posted without the page)",
        "picture check answered otherwise than the picture (or its sound) asked (-40)",
        f"{NOT_LOADED[1]} (-40)",  # posted by the test's client, which fetches no stylesheet
    ]


def test_the_consent_page_links_the_stylesheet_whose_fetch_is_noted_once():
    study = _study()
    client = Client()
    enter(client, study, "CSS")
    consent = client.get(step_url(study)).content.decode()
    href = f"/s/{study.slug}/look.css"
    assert f'<link rel="stylesheet" href="{href}">' in consent
    for _ in range(2):
        reply = client.get(href)
        assert reply.status_code == 200 and reply["Content-Type"].startswith("text/css")
        assert "no-store" in reply["Cache-Control"]
    row = ParticipantAuthenticity.objects.get(participant__external_id="CSS")
    assert row.loaded and row.score is None and not row.flagged
    assert Client().get(href).status_code == 200  # nobody's: nothing stored, nothing refused


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_stylesheet_fetches_racing_a_pairs_outcome_leave_one_row_with_both(requires_postgres):
    from studies.authenticity import pair_record, stylesheet_fetched

    study = _study()
    participant = _on_pairs(Client(), study)
    assert not ParticipantAuthenticity.objects.filter(participant=participant).exists()

    def send(i):
        fresh = Participant.objects.select_related("study").get(pk=participant.pk)
        if i % 2:
            stylesheet_fetched(participant=fresh)
        else:
            pair_record(participant=fresh, position=10 + i, far=True)

    results, errors = race(send, 8)
    assert not errors
    row = ParticipantAuthenticity.objects.get(participant=participant)
    assert row.loaded and row.pairs == {"10": 1, "12": 1, "14": 1, "16": 1}
    assert row.reasons[1].startswith("inconsistent") and not any("stylesheet" in r for r in row.reasons)
