"""import_corpus through the management command: both formats, sampling, and every malformed file refused whole."""

import io
import time

import openpyxl
import pytest
from django.core.management import CommandError, call_command

from studies.importers import CorpusImportError, corpus_parse, corpus_sample
from studies.models import Condition, Emotion, Prompt, Response, Study
from tests.concurrency import race
from tests.factories import PromptFactory, StudyFactory

from .helpers import DATASET, PUBLIC_HEADER, public_csv, public_rows, row_counts

pytestmark = pytest.mark.django_db


def write(tmp_path, data: bytes, name="corpus.csv") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def run_import(*args) -> str:
    import io

    out = io.StringIO()
    call_command("import_corpus", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_migration_seeds_the_32_emotions_with_the_studys_valence_groups():
    assert Emotion.objects.count() == 32
    assert Emotion.objects.filter(valence="positive").count() == 14
    assert Emotion.objects.get(name="nostalgic").valence == "negative"
    assert Emotion.objects.get(name="trusting").valence == "positive"


def test_it_imports_a_small_public_file_into_a_new_draft_study(tmp_path):
    path = write(tmp_path, public_csv(public_rows(8)))
    summary = run_import("new-study", path)
    assert "Imported 8 prompts and 16 responses" in summary
    study = Study.objects.get(slug="new-study")
    assert study.state == Study.State.DRAFT
    human, gpt4 = study.conditions.order_by("position")
    assert (human.name, human.kind, human.is_baseline) == ("human", "human", True)
    assert (gpt4.name, gpt4.kind, gpt4.is_baseline) == ("gpt4", "llm", False)
    prompt = Prompt.objects.get(study=study, dialogue_id="hit:3_conv:3")
    assert prompt.emotion.name == "afraid"
    assert prompt.situation == "Situation 3, with a comma"
    assert Response.objects.get(prompt=prompt, condition=gpt4).text == "GPT-4 answers 3"
    assert set(Response.objects.filter(prompt__study=study).values_list("source", flat=True)) == {"corpus"}


def test_conditions_option_picks_columns(tmp_path):
    path = write(tmp_path, public_csv(public_rows(4)))
    run_import("picked", path, "--conditions", "gpt4")
    study = Study.objects.get(slug="picked")
    assert list(study.conditions.values_list("name", flat=True)) == ["gpt4"]
    assert Response.objects.filter(prompt__study=study).count() == 4


def _bad_files():
    good = public_rows(3)
    ragged = [*good[:1], [*good[1], "extra"], good[2]]
    duplicate = [good[0], good[1], [good[0][0], *good[2][1:]]]
    unknown = [good[0], [good[1][0], "happyish", *good[1][2:]], good[2]]
    empty_text = [good[0], good[1], [*good[2][:5], "   ", good[2][6]]]
    without_situation = [r[:3] + r[4:] for r in good]
    header_without_situation = [h for h in PUBLIC_HEADER if h != "situation"]
    latin1 = public_csv([good[0], [good[1][0], good[1][1], "x", "Caf\u00e9 owner", *good[1][4:]]]).replace(
        "\u00e9".encode(), b"\xe9"
    )
    return {
        "ragged row": (public_csv(ragged), "row 3: has 8 fields but the header has 7"),
        "duplicate id": (
            public_csv(duplicate),
            "row 4, column 'dialog_id': duplicate dialogue id 'hit:0_conv:0'",
        ),
        "unknown emotion": (public_csv(unknown), "row 3, column 'emotion': unknown emotion 'happyish'"),
        "empty text": (public_csv(empty_text), "row 4, column 'response_human': empty text"),
        "missing column": (
            public_csv(without_situation, header=header_without_situation),
            "row 1, column 'situation': missing column",
        ),
        "not utf-8": (latin1, "the file is not UTF-8: byte 0xe9 at byte offset"),
        "NUL byte": (
            public_csv(good).replace(b"Situation 0", b"Situ\x00ation 0", 1),
            "row 2, column 'situation': contains a NUL byte (0x00)",
        ),
        "empty file": (b"", "the file is empty"),
        "Excel workbook": (_workbook(good), "this is an Excel file, not CSV"),
        "header only": (public_csv([]), "row 1: the file has a header but no data rows"),
        "unknown format": (b"a,b,c\n1,2,3\n", "row 1: unrecognised header"),
        "ED ragged row": (
            b"conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags\n"
            b"hit:1_conv:2,1,sad,My dog died,1,He was old,5|5|5_2|2|5,\n"
            b"hit:1_conv:2,2,sad,My dog died,0,I am sorry, truly,5|5|5_2|2|5,\n",
            "row 3: has 9 fields but the header has 8",
        ),
    }


def _workbook(rows) -> bytes:
    """The rows as an .xlsx workbook, as a researcher's spreadsheet program saves them."""
    book = openpyxl.Workbook()
    for row in rows:
        book.active.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


@pytest.mark.parametrize("case", list(_bad_files()))
def test_a_malformed_file_is_refused_with_row_and_column_and_nothing_is_written(tmp_path, case):
    data, expected = _bad_files()[case]
    path = write(tmp_path, data)
    before = row_counts()
    with pytest.raises(CommandError) as excinfo:
        run_import("bad-study", path)
    assert expected in str(excinfo.value)
    assert "nothing was imported" in str(excinfo.value)
    assert row_counts() == before
    assert not Study.objects.filter(slug="bad-study").exists()


def test_every_problem_is_listed_not_only_the_first(tmp_path):
    rows = public_rows(4)
    rows[1][1] = "happyish"
    rows[3][1] = "grumpy"
    with pytest.raises(CommandError) as excinfo:
        run_import("bad", write(tmp_path, public_csv(rows)))
    assert "row 3, column 'emotion'" in str(excinfo.value)
    assert "row 5, column 'emotion'" in str(excinfo.value)


def test_a_non_utf8_file_names_the_line_of_the_bad_byte(tmp_path):
    data = public_csv(public_rows(3)).replace(b"Speaker says 2", b"Speaker says \xff")
    with pytest.raises(CommandError, match=r"byte 0xff at byte offset \d+ \(line 4\)"):
        run_import("bad", write(tmp_path, data))


def test_importing_into_a_live_study_is_refused(tmp_path):
    StudyFactory(slug="running", state=Study.State.LIVE)
    before = row_counts()
    with pytest.raises(
        CommandError, match="study 'running' is live: a corpus can only be imported into a draft"
    ):
        run_import("running", write(tmp_path, public_csv(public_rows(3))))
    assert row_counts() == before


def test_reimporting_the_same_prompts_is_refused_unless_replace(tmp_path):
    path = write(tmp_path, public_csv(public_rows(5)))
    run_import("again", path)
    before = row_counts()
    with pytest.raises(
        CommandError, match="row 2, column 'dialog_id': dialogue id 'hit:0_conv:0' is already in"
    ):
        run_import("again", path)
    assert row_counts() == before
    summary = run_import("again", write(tmp_path, public_csv(public_rows(3)), "smaller.csv"), "--replace")
    assert "replacing 5 prompts" in summary
    study = Study.objects.get(slug="again")
    assert study.prompts.count() == 3
    assert Response.objects.filter(prompt__study=study).count() == 6
    assert study.conditions.count() == 2


def test_new_prompts_can_be_added_to_a_draft(tmp_path):
    rows = public_rows(6)
    run_import("grow", write(tmp_path, public_csv(rows[:3]), "a.csv"))
    run_import("grow", write(tmp_path, public_csv(rows[3:]), "b.csv"))
    assert Prompt.objects.filter(study__slug="grow").count() == 6
    assert Condition.objects.filter(study__slug="grow").count() == 2


ED_HEADER = "conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags\n"


def test_the_raw_empathetic_dialogues_format_round_trips(tmp_path):
    data = (
        ED_HEADER
        + "hit:0_conv:1,1,sentimental,I remember going to the fireworks with my best friend_comma_ years ago.,1,"
        "I remember going to see the fireworks with my best friend. It was the first time we ever spent time alone.,"
        "5|5|5_2|2|5,\n"
        "hit:0_conv:1,2,sentimental,I remember going to the fireworks with my best friend_comma_ years ago.,0,"
        'Was this a friend you were in love with_comma_ or just a "best friend"?,5|5|5_2|2|5,\n'
        "hit:0_conv:1,3,sentimental,I remember going to the fireworks with my best friend_comma_ years ago.,1,"
        "This was a best friend. I miss her.,5|5|5_2|2|5,\n"
        "hit:1_conv:3,1,afraid,I was scared of the storm last night.,1,The thunder was so loud!,4|3|4_3|4|4,\n"
        "hit:1_conv:3,2,afraid,I was scared of the storm last night.,0,Oh no_comma_ did you lose power?,4|3|4_3|4|4,\n"
    ).encode()
    summary = run_import("ed", write(tmp_path, data))
    assert "Imported 2 prompts and 2 responses (human)" in summary
    assert "empathetic_dialogues format" in summary
    prompt = Prompt.objects.get(study__slug="ed", dialogue_id="hit:0_conv:1")
    assert prompt.emotion.name == "sentimental"
    assert prompt.situation == "I remember going to the fireworks with my best friend, years ago."
    assert prompt.speaker_utterance.startswith("I remember going to see the fireworks")
    response = prompt.responses.get()
    assert response.text == 'Was this a friend you were in love with, or just a "best friend"?'
    assert response.condition.name == "human" and response.condition.is_baseline
    assert Response.objects.get(prompt__dialogue_id="hit:1_conv:3").text == "Oh no, did you lose power?"


def test_an_ed_conversation_without_a_reply_is_refused(tmp_path):
    data = (ED_HEADER + "hit:1_conv:3,1,afraid,Storm.,1,The thunder was so loud!,x,\n").encode()
    before = row_counts()
    with pytest.raises(
        CommandError, match="row 2, column 'utterance_idx': conversation 'hit:1_conv:3' has no second"
    ):
        run_import("ed", write(tmp_path, data))
    assert row_counts() == before


def _full_dataset():
    with open(DATASET, "rb") as f:
        return f.read()


def test_the_sample_is_balanced_over_emotions_and_deterministic_for_a_seed():
    prompts = corpus_parse(data=_full_dataset()).prompts
    first = corpus_sample(prompts=prompts, n=100, seed=7)
    again = corpus_sample(prompts=prompts, n=100, seed=7)
    other = corpus_sample(prompts=prompts, n=100, seed=8)
    assert [p.dialogue_id for p in first] == [p.dialogue_id for p in again]
    assert [p.dialogue_id for p in first] != [p.dialogue_id for p in other]
    per_emotion = {}
    for p in first:
        per_emotion[p.emotion] = per_emotion.get(p.emotion, 0) + 1
    assert len(per_emotion) == 32
    assert sorted(set(per_emotion.values())) == [3, 4]  # 100 = 32 × 3 + 4


def test_a_sample_larger_than_an_emotions_supply_is_shared_among_the_others():
    rows = [[f"j{i}", "joyful", "", "s", "u", "h", "g"] for i in range(9)] + [
        ["s0", "sad", "", "s", "u", "h", "g"]
    ]
    prompts = corpus_parse(data=public_csv(rows)).prompts
    sample = corpus_sample(prompts=prompts, n=6, seed=1)
    assert sorted(p.emotion for p in sample) == ["joyful"] * 5 + ["sad"]


def test_sampling_through_the_command(tmp_path):
    summary = run_import(
        "sampled", DATASET, "--sample", "64", "--seed", "3", "--conditions", "human,chatgpt_empathy"
    )
    assert "Imported 64 prompts and 128 responses" in summary
    counts = Prompt.objects.filter(study__slug="sampled").values_list("emotion__name", flat=True)
    assert len(set(counts)) == 32 and all(list(counts).count(e) == 2 for e in set(counts))


def test_the_full_public_dataset_imports_with_one_command():
    started = time.perf_counter()
    summary = run_import("full", DATASET)
    elapsed = time.perf_counter() - started
    assert "Imported 2000 prompts and 6000 responses (human, chatgpt, chatgpt_empathy)" in summary
    study = Study.objects.get(slug="full")
    assert study.prompts.count() == 2000
    for condition in study.conditions.all():
        assert condition.responses.count() == 2000
    print(f"full public dataset imported in {elapsed:.2f}s")


def test_the_emotions_migration_reverses_and_keeps_edited_valences_when_reapplied():
    import importlib

    from django.apps import apps

    migration = importlib.import_module("studies.migrations.0002_seed_emotions")
    used = PromptFactory(emotion=Emotion.objects.get(name="sad"))
    migration.unseed_emotions(apps, None)
    assert list(Emotion.objects.values_list("name", flat=True)) == ["sad"]  # still used by a prompt
    Emotion.objects.filter(name="sad").update(valence="neutral")
    migration.seed_emotions(apps, None)
    assert Emotion.objects.count() == 32
    assert Emotion.objects.get(name="sad").valence == "neutral"
    assert Emotion.objects.get(name="joyful").valence == "positive"
    assert used.emotion.name == "sad"


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_imports_of_the_same_file_write_it_once(requires_postgres):

    from studies.importers import CorpusImportError, corpus_import

    data = public_csv(public_rows(40))
    imported, refused = race(lambda i: corpus_import(study_slug="raced", data=data), 4)
    assert len(imported) == 1 and len(refused) == 3
    assert all(
        isinstance(error, CorpusImportError) and "is already in study 'raced'" in str(error)
        for error in refused.values()
    )
    assert Prompt.objects.filter(study__slug="raced").count() == 40
    assert Response.objects.filter(prompt__study__slug="raced").count() == 80


def test_a_spreadsheet_export_with_a_bom_and_crlf_line_ends_imports(tmp_path):
    data = b"\xef\xbb\xbf" + public_csv(public_rows(3)).replace(b"\n", b"\r\n")
    assert "Imported 3 prompts and 6 responses" in run_import("excel", write(tmp_path, data))
    assert (
        Prompt.objects.get(study__slug="excel", dialogue_id="hit:0_conv:0").situation
        == "Situation 0, with a comma"
    )


def test_a_file_with_many_problems_lists_the_first_fifty_and_counts_the_rest(tmp_path):
    rows = public_rows(80)
    for row in rows:
        row[1] = "grumpy"
    with pytest.raises(CommandError) as excinfo:
        run_import("grumpy", write(tmp_path, public_csv(rows)))
    message = str(excinfo.value)
    assert message.count("unknown emotion 'grumpy'") == 50
    assert "… and 30 more problems" in message


def test_a_dry_run_checks_everything_and_writes_nothing(tmp_path):
    before = row_counts()
    summary = run_import("trial", write(tmp_path, public_csv(public_rows(6))), "--dry-run")
    assert "Dry run, nothing written: the file is fine and would import 6 prompts and 12 responses" in summary
    assert row_counts() == before
    with pytest.raises(CommandError, match="row 3, column 'emotion': unknown emotion"):
        rows = public_rows(3)
        rows[1][1] = "grumpy"
        run_import("trial", write(tmp_path, public_csv(rows), "bad.csv"), "--dry-run")


def test_a_ragged_row_does_not_hide_the_files_other_problems():
    rows = public_rows(5)
    rows[1] = [*rows[1], "a stray field"]
    rows[3][5] = ""  # an empty response, two rows further down
    with pytest.raises(CorpusImportError) as caught:
        corpus_parse(data=public_csv(rows))
    text = [str(p) for p in caught.value.problems]
    assert text[0] == "row 3: has 8 fields but the header has 7 (a stray or missing comma?)"
    assert any(t.startswith("row 5, column 'response_") and t.endswith("empty text") for t in text), text


def test_a_semicolon_separated_file_gets_a_hint():
    data = public_csv(public_rows(3)).decode().replace(",", ";").encode()
    with pytest.raises(CorpusImportError) as caught:
        corpus_parse(data=data)
    text = " ".join(str(p) for p in caught.value.problems)
    assert "unrecognised header" in text and "separated by semicolons" in text
