"""Exports: streamed, formula-safe, the same from the dashboard, the command and the API."""

import csv
import io
import tracemalloc

import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis import exports, selectors
from analysis.exclusions import ExclusionRules
from analysis.exports import cell_neutralise
from kinds.rating import export as rating_export
from kinds.rating import export_sql, frame
from tests.analysis.builders import Rated, build_rating_study, participants_from_counts

pytestmark = pytest.mark.django_db


def _csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def _body(response):
    assert response.streaming, "exports must stream"
    return b"".join(response.streaming_content).decode("utf-8")


@pytest.mark.parametrize(
    ("raw", "cell"),
    [
        ("=1+2", "'=1+2"),
        ("+44 20", "'+44 20"),
        ("-cmd", "'-cmd"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("plain", "plain"),
        (-3, -3),
        (2.5, 2.5),
        (None, ""),
        (True, "true"),
        (["=x"], '["=x"]'),
    ],
)
def test_cells_that_a_spreadsheet_would_run_are_neutralised(raw, cell):
    assert cell_neutralise(raw) == cell


def test_the_ratings_export_has_one_row_per_rating_with_every_design_variable(analyst_client, rated_study):
    rows = _csv(_body(analyst_client.get(reverse("analysis:export", args=[rated_study.slug, "ratings"]))))
    assert len(rows) == 200
    for column in (
        "participant", "condition", "prompt_id", "dialogue_id", "emotion", "valence", "situation",
        "speaker_utterance", "response_text", "position", "value", "response_time_ms", "excluded",
        "excluded_attention_checks", "excluded_incomplete", "excluded_too_fast", "excluded_straight_lining",
    ):  # fmt: skip
        assert column in rows[0], column
    by_condition = {c: [r for r in rows if r["condition"] == c] for c in ("human", "gpt4")}
    assert sum(r["value"] == "3" for r in by_condition["gpt4"]) == 40
    assert {r["valence"] for r in rows} == {"positive", "negative"}


def test_exports_neutralise_formulas_in_participant_and_response_text(staff_client, hostile_study):
    body = _body(staff_client.get(reverse("analysis:export", args=[hostile_study.slug, "ratings"])))
    rows = _csv(body)
    assert rows[0]["participant"] == '\'=HYPERLINK("http://x")'
    assert rows[0]["response_text"].startswith("'=1+2")
    for line in csv.reader(io.StringIO(body)):
        assert not any(cell.startswith(exports.FORMULA_TRIGGERS) for cell in line), line
    responses = _csv(
        _body(staff_client.get(reverse("analysis:export", args=[hostile_study.slug, "responses"])))
    )
    assert responses[0]["text"].startswith("'=")
    assert "model_requested" in responses[0] and responses[0]["model_requested"] == ""  # a corpus response
    participants = _csv(
        _body(staff_client.get(reverse("analysis:export", args=[hostile_study.slug, "participants"])))
    )
    assert participants[0]["participant"].startswith("'=")


def test_exclusion_flags_in_the_export_follow_the_declared_rules(staff_client, db):
    people = [
        Rated("human", [("sad", 3, 4000)] * 10, attention_failures=1),  # straight-lining, a wrong check
        Rated("human", [("sad", 3, 4000)] * 10),  # identical but slow and no wrong check: sincere
        Rated("human", [("sad", 1, 200), ("sad", 2, 300)] * 5),  # too fast
        Rated("human", [("sad", 1, 4000), ("sad", 3, 4000)] * 5, flagged=True),
        Rated("human", [("sad", 1, 4000), ("sad", 3, 4000)] * 2, status="returned"),  # incomplete
        Rated("human", [("sad", 1, 4000), ("sad", 2, 4000)] * 5),
    ]
    declared = {
        "attention_checks": True,
        "incomplete": True,
        "too_fast": {"min_median_ms": 1500},
        "straight_lining": {"min_items": 10},
    }
    study = build_rating_study(
        slug="flags", conditions=["human"], participants=people, exclusion_rules=declared
    ).study
    rows = _csv(_body(staff_client.get(reverse("analysis:export", args=[study.slug, "ratings"]))))
    per = {r["participant"]: r for r in rows}
    columns = ["excluded_straight_lining", "excluded_too_fast", "excluded_attention_checks",
               "excluded_incomplete", "excluded"]  # fmt: skip
    flags = [tuple(per[p.external_id][c] for c in columns) for p in study.participants.order_by("id")]
    assert flags == [
        ("true", "false", "false", "false", "true"),
        ("false", "false", "false", "false", "false"),
        ("false", "true", "false", "false", "true"),
        ("false", "false", "true", "false", "true"),
        ("false", "false", "false", "true", "true"),
        ("false", "false", "false", "false", "false"),
    ]
    off = _csv(
        _body(staff_client.get(reverse("analysis:export", args=[study.slug, "ratings"]) + "?exclusions=none"))
    )
    assert {r["excluded"] for r in off} == {"false"}


def test_the_export_command_writes_a_file_and_to_stdout(rated_study, tmp_path, capsys):
    out = tmp_path / "ratings.csv"
    call_command("export", rated_study.slug, "--what", "ratings", "--out", str(out))
    assert len(_csv(out.read_text())) == 200
    assert not list(tmp_path.glob("*.partial"))
    call_command("export", rated_study.slug, "--what", "participants", "--out", "-")
    assert len(_csv(capsys.readouterr().out)) == 20


def test_the_export_command_refuses_an_unknown_study(tmp_path):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no study"):
        call_command("export", "nope", "--what", "ratings", "--out", str(tmp_path / "x.csv"))


def test_the_api_streams_the_same_csv_as_the_dashboard(analyst_client, rated_study):
    page = _body(analyst_client.get(reverse("analysis:export", args=[rated_study.slug, "ratings"])))
    api = analyst_client.get(
        reverse("api:study-export", args=[rated_study.slug, "ratings"]), HTTP_ACCEPT="text/csv"
    )
    assert api["Content-Type"].startswith("text/csv")
    assert _body(api) == page


def test_the_python_ratings_export_reads_through_a_chunked_cursor_in_bounded_memory(rated_study, monkeypatch):
    """The Python path (SQLite, or rules the SQL does not know) pulls rows chunk by chunk: memory grows with the
    chunk, not with the number of ratings."""
    monkeypatch.setattr(selectors, "EXPORT_CHUNK_SIZE", 7)
    monkeypatch.setattr(export_sql, "sql_export_supported", lambda **kwargs: False)
    stream = exports.export_lines(study=rated_study, what="ratings")
    header = next(stream)
    assert header.startswith("rating_id,")
    tracemalloc.start()
    peak_small = 0
    lines = 0
    for _ in stream:
        lines += 1
        peak_small = max(peak_small, tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
    assert lines == 200 and stream.rows == 200
    # 200 rows with their texts would take well over this if materialised with model instances; the bound is
    # generous on purpose — the benchmark measures the real figure on 1,000,000 ratings.
    assert peak_small < 2_000_000


def test_postgresql_streams_the_ratings_export_in_pieces(rated_study, monkeypatch):
    """On PostgreSQL the export is one COPY ... TO STDOUT handed on piece by piece (bounded memory)."""
    monkeypatch.setattr(export_sql, "PIECE_BYTES", 4000)
    stream = exports.export_lines(study=rated_study, what="ratings")
    pieces = list(stream)
    assert pieces[0].startswith("rating_id,")
    assert len(pieces) > 10  # ~100 kB of CSV in pieces of ~4 kB
    assert stream.rows == 200
    assert len(_csv("".join(pieces))) == 200


@pytest.mark.django_db(transaction=True)
def test_a_reader_that_stops_early_stops_the_copy(monkeypatch):
    import threading

    from studies.models import Study

    people = participants_from_counts("human", {1: 30, 2: 50, 3: 20})
    study = build_rating_study(slug="early", conditions=["human"], participants=people).study
    monkeypatch.setattr(export_sql, "PIECE_BYTES", 500)
    stream = exports.export_lines(study=study, what="ratings")
    next(stream), next(stream)
    stream._pieces.close()  # what Django does when the client goes away
    assert not [t for t in threading.enumerate() if t.name == "ratings-export-copy"]
    assert Study.objects.filter(slug="early").count() == 1  # the connection is usable again


def _both_paths(study, monkeypatch, **kwargs):
    sql = "".join(exports.export_lines(study=study, what="ratings", **kwargs))
    with monkeypatch.context() as m:
        m.setattr(export_sql, "sql_export_supported", lambda **kw: False)
        python = "".join(exports.export_lines(study=study, what="ratings", **kwargs))
    return list(csv.reader(io.StringIO(sql))), list(csv.reader(io.StringIO(python)))


@pytest.mark.parametrize("reveal", [True, False])
@pytest.mark.parametrize("rules", ["declared", "none", "strict", "authenticity"])
def test_the_postgresql_and_python_exports_give_the_same_cells(db, monkeypatch, reveal, rules):
    from django.utils import timezone

    from kinds.rating.models import Rating
    from studies.models import ParticipantAuthenticity

    people = [
        Rated("human", [("sad", 3, 4000)] * 10, external_id="=HYPERLINK(1)"),  # straight-lining, hostile id
        Rated("human", [("sad", 1, 200), ("joyful", 2, None), ("sad", 2, 300)]),  # too fast, a missing time
        Rated("gpt4", [("joyful", 1, 4000), ("sad", 3, 4000)] * 5, flagged=True),
        Rated("gpt4", [("joyful", 1, None), ("sad", 2, None)]),  # no times at all: never too fast
        Rated("gpt4", [("sad", 2, 1500), ("sad", 1, 1499)], extra_attention_value=3),
    ]
    built = build_rating_study(
        slug="same", conditions=["human", "gpt4"], participants=people, response_text='-1 @x\n"quoted", text'
    )
    study = built.study
    # The authenticity verdicts: flagged, flagged but cleared in review, and (the others) no signals at all.
    ParticipantAuthenticity.objects.create(
        participant=built.participants[1], score=10, flagged=True, excluded=True
    )
    ParticipantAuthenticity.objects.create(
        participant=built.participants[3], score=10, flagged=True, review="cleared"
    )
    # Whole seconds and fractional ones: isoformat() writes microseconds only when they are not zero.
    first = Rating.objects.filter(assignment__participant__study=study).order_by("id").first()
    Rating.objects.filter(pk=first.pk).update(created_at=timezone.now().replace(microsecond=0))
    chosen = {
        "declared": ExclusionRules(),
        "none": ExclusionRules.none(),
        "strict": ExclusionRules(min_median_response_ms=4000.0, straight_lining_min_items=2),
        "authenticity": ExclusionRules(authenticity=True),
    }[rules]
    sql, python = _both_paths(study, monkeypatch, rules=chosen, reveal_participant_ids=reveal)
    assert len(python) == 1 + 10 + 3 + 10 + 2 + 2
    assert sql == python
    excluded = {row[python[0].index("participant_id")] for row in python[1:] if row[-1] == "true"}
    assert excluded == ({str(built.participants[1].pk)} if rules == "authenticity" else set())


def test_the_ratings_export_has_the_scale_label_beside_the_value(analyst_client, rated_study):
    rows = _csv(_body(analyst_client.get(reverse("analysis:export", args=[rated_study.slug, "ratings"]))))
    header = list(rows[0])
    assert header[header.index("value") + 1] == "value_label"
    assert {(r["value"], r["value_label"]) for r in rows} == {("1", "Bad"), ("2", "Okay"), ("3", "Good")}


def test_columns_the_sql_does_not_know_fall_back_to_the_python_export(rated_study, monkeypatch):
    assert export_sql.sql_export_supported(
        rules=ExclusionRules(), flag_columns=rating_export.RATING_FLAG_COLUMNS
    )
    assert not export_sql.sql_export_supported(
        rules=ExclusionRules(), flag_columns=[*rating_export.RATING_FLAG_COLUMNS, "excluded_too_slow"]
    )
    monkeypatch.setitem(frame.RATING_EXPORT_FIELDS, "prompt_note", "assignment__response__prompt__note")
    assert not export_sql.sql_export_supported(
        rules=ExclusionRules(), flag_columns=rating_export.RATING_FLAG_COLUMNS
    )


def test_the_responses_export_carries_generation_provenance(analyst_client, rated_study):
    from django.utils import timezone

    from generation.models import ResponseProvenance
    from studies.models import Response

    generated = (
        Response.objects.filter(condition__study=rated_study, condition__name="gpt4").order_by("id").first()
    )
    now = timezone.now()
    ResponseProvenance.objects.create(
        response=generated, provider_name="openai-main", provider_kind="openai", model_requested="gpt-4",
        model_returned="gpt-4-0613", request={"messages": []}, raw_response={"id": "x"}, latency_ms=812, attempts=2,
        input_tokens=120, output_tokens=40, requested_at=now, completed_at=now,
    )  # fmt: skip
    rows = _csv(_body(analyst_client.get(reverse("analysis:export", args=[rated_study.slug, "responses"]))))
    by_id = {int(r["response_id"]): r for r in rows}
    assert len(rows) == Response.objects.filter(condition__study=rated_study).count()
    assert by_id[generated.id]["model_returned"] == "gpt-4-0613"
    assert by_id[generated.id]["attempts"] == "2" and by_id[generated.id]["latency_ms"] == "812"
    others = [r for i, r in by_id.items() if i != generated.id]
    assert {r["model_requested"] for r in others} == {""}
