"""Published pairwise votes imported as a closed pairwise study (`import_pairwise`), all or nothing."""

import csv
import io

import pytest
from django.core.management import CommandError, call_command

from kinds.pairwise.demo import PAIRWISE_CORPUS
from kinds.pairwise.models import PairItem
from studies.models import Participant, Study

pytestmark = pytest.mark.django_db


def corpus_ids(n: int) -> list[str]:
    with open(PAIRWISE_CORPUS, newline="") as f:
        return [row["dialog_id"] for row in csv.DictReader(f)][:n]


def votes_file(tmp_path, rows, header=("prompt", "condition_a", "condition_b", "choice", "rater")):
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    path = tmp_path / "votes.csv"
    path.write_text(text.getvalue())
    return str(path)


def good_rows():
    a, b, c = corpus_ids(3)
    return [
        (a, "human", "chatgpt", "a", "r1"),
        (b, "chatgpt_empathy", "human", "b", "r1"),
        (c, "chatgpt", "chatgpt_empathy", "tie", "r1"),
        (a, "chatgpt", "chatgpt_empathy", "B", "r2"),
        (b, "human", "chatgpt", "left", "r2"),
    ]


def test_published_votes_become_a_closed_study_with_one_completed_participant_per_rater(tmp_path):
    out = io.StringIO()
    call_command(
        "import_pairwise", "old-arena", str(PAIRWISE_CORPUS), votes_file(tmp_path, good_rows()), stdout=out
    )
    assert "2 raters, 5 votes" in out.getvalue()
    study = Study.objects.get(slug="old-arena")
    assert study.kind == Study.Kind.PAIRWISE and study.state == Study.State.CLOSED
    assert study.conditions.get(is_baseline=True).name == "human"
    assert set(Participant.objects.filter(study=study).values_list("external_id", "status")) == {
        ("r1", "completed"),
        ("r2", "completed"),
    }
    first = PairItem.objects.select_related("left__condition", "right__condition").get(
        participant__external_id="r1", position=0
    )
    assert (first.left.condition.name, first.right.condition.name, first.choice) == (
        "human",
        "chatgpt",
        "left",
    )
    assert list(
        PairItem.objects.filter(participant__external_id="r2")
        .order_by("position")
        .values_list("choice", flat=True)
    ) == ["right", "left"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda rows: rows + [("no-such-prompt", "human", "chatgpt", "a", "r3")],
            "no prompt 'no-such-prompt'",
        ),
        (lambda rows: rows + [(rows[2][0], "human", "gpt9", "a", "r3")], "no condition 'gpt9'"),
        (lambda rows: rows + [(rows[2][0], "human", "human", "a", "r3")], "the same condition on both sides"),
        (lambda rows: rows + [(rows[2][0], "human", "chatgpt", "maybe", "r3")], "'maybe' is not a, b or tie"),
        (lambda rows: rows + [(rows[0][0], "human", "chatgpt", "a", "r1")], "already voted on this prompt"),
        (lambda rows: rows + [(rows[2][0], "human", "chatgpt", "a", "")], "column 'rater': empty"),
    ],
)
def test_a_bad_row_refuses_the_whole_file_naming_its_row_and_writes_nothing(tmp_path, change, message):
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_pairwise", "old-arena", str(PAIRWISE_CORPUS), votes_file(tmp_path, change(good_rows()))
        )
    assert message in str(refused.value) and "row 7" in str(refused.value)
    assert not Study.objects.filter(slug="old-arena").exists()
    assert not PairItem.objects.exists()


def test_a_votes_file_without_a_required_column_is_refused(tmp_path):
    path = votes_file(
        tmp_path, [("x", "human", "chatgpt", "a")], header=("prompt", "condition_a", "condition_b", "choice")
    )
    with pytest.raises(CommandError, match="no column 'rater'"):
        call_command("import_pairwise", "old-arena", str(PAIRWISE_CORPUS), path)
    assert not Study.objects.filter(slug="old-arena").exists()
