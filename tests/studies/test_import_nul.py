"""One reader rule for every importer (studies/importers/reading.py): a NUL byte in any cell of any file is
refused with its row and column, and nothing is written; an empty file says so. Every text column of every
importer, on the suite's PostgreSQL, and the pairwise votes import once more on SQLite as `make run` runs it."""

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command

from kinds.pairwise.demo import PAIRWISE_CORPUS
from kinds.pairwise.importer import pairwise_import
from kinds.questionnaire.results_parse import llm_results_parse_csv
from kinds.rating.importer import ratings_import
from studies.emotionbench.data import EmotionBenchImportError
from studies.importers import CorpusImportError, corpus_import
from studies.models import Instrument, Participant, Prompt, Study

from .helpers import DATASET, sqlite_manage

pytestmark = pytest.mark.django_db

NUL_SAYS = "contains a NUL byte (0x00)"


def _csv(header, rows) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def _with_nul(header, rows, column, row_index=1):
    rows = [list(r) for r in rows]
    cell = rows[row_index][header.index(column)]
    rows[row_index][header.index(column)] = cell[:1] + "\x00" + cell[1:]
    return _csv(header, rows)


def _public_rows():
    with open(DATASET, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [next(reader) for _ in range(3)]


# The published file's columns (every one is read by the corpus or the ratings import).
PUBLIC_HEADER = (
    "part_no,annotator_human,annotator_chatgpt,annotator_chatgpt_empathy,dialog_id,emotion,sentiment,plutchik,"
    "situation,speaker_uttr,response_human,response_chatgpt,response_chatgpt_empathy,rating_human,"
    "rating_chatgpt,rating_chatgpt_empathy,empathy_propensity_human,empathy_propensity_chatgpt,"
    "empathy_propensity_chatgpt_empathy,empathy_arr_human,empathy_arr_chatgpt,empathy_arr_chatgpt_empathy,"
    "miti_human,miti_chatgpt,miti_chatgpt_empathy"
).split(",")


@pytest.mark.parametrize("column", PUBLIC_HEADER)
def test_the_public_dataset_refuses_a_nul_in_any_column_for_both_of_its_importers(column):
    header, rows = _public_rows()
    assert header == PUBLIC_HEADER
    data = _with_nul(header, rows, column)
    where = f"row 3, column '{column}': {NUL_SAYS}"
    with pytest.raises(CorpusImportError) as corpus:
        corpus_import(study_slug="nul-corpus", data=data)
    with pytest.raises(CorpusImportError) as ratings:
        ratings_import(study_slug="nul-ratings", data=data)
    assert where in str(corpus.value) and where in str(ratings.value)
    assert not Study.objects.exists() and not Prompt.objects.exists()


ED_HEADER = ["conv_id", "utterance_idx", "context", "prompt", "speaker_idx", "utterance", "selfeval", "tags"]
ED_ROWS = [
    ["hit:1_conv:2", "1", "sad", "My dog died", "1", "He was old", "5|5|5_2|2|5", ""],
    ["hit:1_conv:2", "2", "sad", "My dog died", "2", "I am sorry_comma_ truly", "5|5|5_2|2|5", ""],
]


@pytest.mark.parametrize("column", ED_HEADER)
def test_empathetic_dialogues_refuses_a_nul_in_any_column(column):
    rows = [list(r) for r in ED_ROWS]
    rows[1][ED_HEADER.index(column)] = "x\x00" + rows[1][ED_HEADER.index(column)]
    data = ",".join(ED_HEADER).encode() + b"\n" + b"\n".join(",".join(r).encode() for r in rows) + b"\n"
    with pytest.raises(CorpusImportError) as caught:
        corpus_import(study_slug="nul-ed", data=data)
    assert f"row 3, column '{column}': {NUL_SAYS}" in str(caught.value)
    assert not Study.objects.exists()


VOTE_HEADER = ["prompt", "condition_a", "condition_b", "choice", "rater", "both_inadequate"]


def _votes():
    with open(PAIRWISE_CORPUS, newline="") as f:
        a, b = [row["dialog_id"] for row in csv.DictReader(f)][:2]
    return [[a, "human", "chatgpt", "a", "rater0001", "no"], [b, "chatgpt", "human", "b", "rater0001", "no"]]


@pytest.mark.parametrize("column", VOTE_HEADER)
def test_pairwise_votes_refuse_a_nul_in_any_column(column):
    with pytest.raises(CorpusImportError) as caught:
        pairwise_import(
            study_slug="nul-votes",
            corpus=PAIRWISE_CORPUS.read_bytes(),
            votes=_with_nul(VOTE_HEADER, _votes(), column),
        )
    assert f"row 3, column '{column}': {NUL_SAYS}" in str(caught.value)
    assert not Study.objects.exists() and not Participant.objects.exists()


def test_an_empty_votes_file_says_the_file_is_empty_and_a_header_alone_says_no_rows():
    for votes, says in ((b"", "the file is empty"), (b"\n \n", "the file is empty")):
        with pytest.raises(CorpusImportError) as caught:
            pairwise_import(study_slug="empty-votes", corpus=PAIRWISE_CORPUS.read_bytes(), votes=votes)
        assert str(caught.value) == says
    with pytest.raises(CorpusImportError, match="row 1: the votes file has a header but no rows"):
        pairwise_import(
            study_slug="empty-votes", corpus=PAIRWISE_CORPUS.read_bytes(), votes=_csv(VOTE_HEADER, [])
        )


def test_a_nul_in_the_header_is_named_by_its_row_and_position():
    header, rows = _public_rows()
    header = [*header[:2], "situ\x00ation", *header[3:]]
    with pytest.raises(CorpusImportError) as caught:
        corpus_import(study_slug="nul-header", data=_csv(header, rows))
    assert f"row 1, column '3': {NUL_SAYS}" in str(caught.value)


RESULTS_HEADER = ["question-0", "order-0", "Situation-1", "order-1"]


@pytest.mark.parametrize("column", RESULTS_HEADER)
def test_emotionbench_results_refuse_a_nul_in_any_column(tmp_path, column):
    rows = [["Imagine you are the protagonist", "", "Imagine: a dog", ""], ["1. Interested", "1", "3", "1"]]
    rows[1][RESULTS_HEADER.index(column)] = "1\x00"
    path = tmp_path / "gpt-4-PANAS-testing.csv"
    path.write_bytes(_csv(RESULTS_HEADER, rows))
    with pytest.raises(EmotionBenchImportError) as caught:
        llm_results_parse_csv(path=path, instrument=Instrument(name="PANAS"), texts={})
    assert f"gpt-4-PANAS-testing.csv: row 3, column '{column}': {NUL_SAYS}" in str(caught.value)


@pytest.mark.parametrize(
    ("command", "data", "path"),
    [
        ("import_instruments", [{"name": "PANAS", "questions": {"1": "Inter\x00ested"}}], "$[0].questions.1"),
        ("import_instruments", [{"name": "PA\x00NAS", "questions": {"1": "Interested"}}], "$[0].name"),
        ("import_situations", {"emotions": [{"name": "Anger", "factors": [{"name": "x\x00"}]}]},
         "$.emotions[0].factors[0].name"),
    ],
)  # fmt: skip
def test_emotionbench_json_files_refuse_a_nul_string_with_its_path(tmp_path, command, data, path):
    file = tmp_path / "file.json"
    file.write_text(json.dumps(data), encoding="utf-8")  # "\u0000" in the JSON text
    with pytest.raises(CommandError) as caught:
        call_command(command, str(file))
    assert f"at {path}: {NUL_SAYS}" in str(caught.value)
    assert not Instrument.objects.exists()


def test_on_sqlite_a_rater_id_with_a_nul_is_refused_not_made_a_second_rater(tmp_path, sqlite_var):
    """On SQLite `rater0001` and `rater0001\\x00` were two participants; now the file is refused there too."""
    votes = tmp_path / "votes.csv"
    rows = _votes()
    rows[1][4] = "rater0001\x00"
    votes.write_bytes(_csv(VOTE_HEADER, rows))
    manage = sqlite_manage(sqlite_var)
    with pytest.raises(AssertionError) as refused:
        manage("import_pairwise", "nul-arena", str(PAIRWISE_CORPUS), str(votes))
    assert f"row 3, column 'rater': {NUL_SAYS}" in str(refused.value)
    rows[1][4] = "rater0001"
    votes.write_bytes(_csv(VOTE_HEADER, rows))
    assert "1 raters, 2 votes" in manage("import_pairwise", "nul-arena", str(PAIRWISE_CORPUS), str(votes))
