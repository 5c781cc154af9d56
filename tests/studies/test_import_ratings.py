"""import_ratings: the public dataset as a closed study, counts checked against the file."""

import csv
import io
from collections import Counter, defaultdict

import pytest
from django.core.management import CommandError, call_command

from kinds.rating.importer import teq_score
from kinds.rating.models import Rating
from kinds.rating.teq import teq_score as flow_teq_score
from studies.models import Assignment, Participant, Study
from studies.selectors import study_status

from .helpers import DATASET, row_counts

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("import_ratings", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_public_dataset_becomes_a_closed_study_matching_the_file():
    summary = run("published", DATASET)
    assert (
        "participants human 200, chatgpt 200, chatgpt_empathy 200, 6000 ratings (10 per participant)"
        in summary
    )
    study = Study.objects.get(slug="published")
    assert study.state == Study.State.CLOSED and study.rating_settings.ask_teq
    assert study.prompts.count() == 2000
    assert [c.name for c in study.conditions.order_by("position")] == ["human", "chatgpt", "chatgpt_empathy"]

    with open(DATASET, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for name in ("human", "chatgpt", "chatgpt_empathy"):
        participants = Participant.objects.filter(study=study, condition__name=name)
        assert participants.count() == len({r[f"annotator_{name}"] for r in rows}) == 200
        assert set(participants.values_list("status", flat=True)) == {"completed"}
        per_participant = Counter(
            Assignment.objects.filter(participant__in=participants).values_list("participant", flat=True)
        )
        assert set(per_participant.values()) == {10}
        file_values = Counter(r[f"rating_{name}"] for r in rows)
        db_values = Counter(
            str(v)
            for v in Rating.objects.filter(assignment__participant__in=participants).values_list(
                "value", flat=True
            )
        )
        assert db_values == file_values

    # One rater, checked against the file row by row: order within the batch, ratings, TEQ.
    first = rows[0]
    rater = Participant.objects.get(study=study, external_id=first["annotator_chatgpt"])
    assert rater.teq_score == int(first["empathy_propensity_chatgpt"])
    assert teq_score(rater.teq_answers) == rater.teq_score
    # Stored exactly as the participant flow stores answers, so one scorer serves both.
    assert flow_teq_score({int(n): code for n, code in rater.teq_answers.items()}) == rater.teq_score
    codes = ["never", "rarely", "sometimes", "often", "always"]
    published = [int(x) for x in first["empathy_arr_chatgpt"].strip("[]").split(",")]
    assert rater.teq_answers == {str(n): codes[a + 2] for n, a in enumerate(published, start=1)}
    batch = [r for r in rows if r["annotator_chatgpt"] == first["annotator_chatgpt"]]
    stored = list(
        Assignment.objects.filter(participant=rater)
        .order_by("position")
        .values_list("position", "response__prompt__dialogue_id", "response__text", "rating__value")
    )
    assert stored == [
        (i, r["dialog_id"], r["response_chatgpt"].strip(), int(r["rating_chatgpt"]))
        for i, r in enumerate(batch)
    ]

    status = study_status(study=study)
    for condition in status["conditions"]:
        assert condition["ratings"] == 2000
        assert condition["ratings_per_response"]["min"] == condition["ratings_per_response"]["max"] == 1


def _small_ratings_file(mutate=None) -> bytes:
    with open(DATASET, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = [r for r in reader if r["part_no"] in {"0", "1"}]
    if mutate:
        mutate(rows)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def test_a_small_file_gives_ten_ratings_per_participant(tmp_path):
    path = tmp_path / "two-batches.csv"
    path.write_bytes(_small_ratings_file())
    run("two", str(path))
    per = defaultdict(int)
    for pid in Assignment.objects.filter(participant__study__slug="two").values_list(
        "participant", flat=True
    ):
        per[pid] += 1
    assert len(per) == 6 and set(per.values()) == {10}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda rows: rows[3].update(rating_human="5"),
            "row 5, column 'rating_human': '5' is not on the scale",
        ),
        (
            lambda rows: rows[12].update(annotator_human=rows[0]["annotator_chatgpt"]),
            "row 14, column 'annotator_human': annotator '",
        ),
        (
            lambda rows: rows[0].update(empathy_propensity_human="99"),
            "row 2, column 'empathy_propensity_human'",
        ),
        (lambda rows: rows[1].update(part_no="1"), "row 3, column 'part_no': annotator"),
    ],
)
def test_an_inconsistent_ratings_file_is_refused_whole(tmp_path, mutate, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(_small_ratings_file(mutate))
    before = row_counts()
    with pytest.raises(CommandError) as excinfo:
        run("bad", str(path))
    assert message in str(excinfo.value)
    assert row_counts() == before


def test_an_existing_slug_is_refused(tmp_path):
    path = tmp_path / "two-batches.csv"
    path.write_bytes(_small_ratings_file())
    run("taken", str(path))
    with pytest.raises(CommandError, match="study 'taken' already exists"):
        run("taken", str(path))
