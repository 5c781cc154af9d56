"""Reading a corpus file: the format told apart by its header, every row checked, nothing written.

Two corpus formats are read:

* the public dataset of Welivita & Pu (``dataset_and_ratings.csv``): one row per prompt with ``dialog_id,
  emotion, situation, speaker_uttr`` and one ``response_<name>`` column per condition;
* the raw EmpatheticDialogues CSV (``conv_id, utterance_idx, context, prompt, speaker_idx, utterance, ...``,
  unquoted, commas written ``_comma_``): utterance 1 is the speaker's, utterance 2 the human listener's reply.

Every problem is reported with the row (the header is row 1, as in a spreadsheet) and the column.
"""

from __future__ import annotations

import csv
import io
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..models import Study
from .reading import CorpusImportError, ImportProblem, csv_nul_check, text_decode

# Called as progress(stage, done, total) while rows are checked and written.
ProgressCallback = Callable[[str, int, int], None]

PUBLIC_FORMAT = "public"
ED_RAW_FORMAT = "empathetic_dialogues"
PUBLIC_REQUIRED = ["dialog_id", "emotion", "situation", "speaker_uttr"]
ED_REQUIRED = ["conv_id", "utterance_idx", "context", "prompt", "speaker_idx", "utterance"]
HUMAN_CONDITION = "human"
CONDITION_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
BULK_BATCH = 1000

# The Toronto Empathy Questionnaire: answers Never..Always scored 0..4; these items are scored in reverse.
# Answers are stored as the participant flow stores them: {"1": "never", ..., "16": "always"}.
TEQ_ITEMS = 16
TEQ_REVERSED = frozenset({2, 4, 7, 10, 11, 12, 14, 15})
TEQ_ANSWER_CODES = ["never", "rarely", "sometimes", "often", "always"]


@dataclass
class ParsedPrompt:
    row: int
    dialogue_id: str
    emotion: str
    situation: str
    speaker_utterance: str
    responses: dict[str, str]  # condition name -> text
    extra: dict[str, str] = field(default_factory=dict)  # the raw row, for import_ratings


@dataclass
class ParsedCorpus:
    format: str
    conditions: list[str]
    prompts: list[ParsedPrompt]
    header: list[str]


@dataclass
class ImportResult:
    study: Study
    study_created: bool
    format: str
    prompts: int
    responses: int
    conditions: list[str]
    replaced: int = 0
    dry_run: bool = False

    def summary(self) -> str:
        verb = "created draft study" if self.study_created else "into study"
        replaced = f" (replacing {self.replaced} prompts)" if self.replaced else ""
        if self.dry_run:
            return (
                f"Dry run, nothing written: the file is fine and would import {self.prompts} prompts and "
                f"{self.responses} responses ({', '.join(self.conditions)}) into '{self.study.slug}' from the "
                f"{self.format} format{replaced}."
            )
        return (
            f"Imported {self.prompts} prompts and {self.responses} responses "
            f"({', '.join(self.conditions)}) {verb} '{self.study.slug}' from the {self.format} format{replaced}."
        )


# --- Reading ----------------------------------------------------------------------------------------------


def _detect_format(header: list[str]) -> str:
    columns = set(header)
    if "conv_id" in columns or "utterance_idx" in columns:
        return ED_RAW_FORMAT
    if "dialog_id" in columns or any(c.startswith("response_") for c in columns):
        return PUBLIC_FORMAT
    raise CorpusImportError(
        [
            ImportProblem(
                "unrecognised header: expected the public dataset's columns "
                f"({', '.join(PUBLIC_REQUIRED)}, response_<condition>...) or EmpatheticDialogues' "
                f"({', '.join(ED_REQUIRED)})",
                row=1,
            )
        ]
    )


def _read_rows(
    text: str, *, quoting: int
) -> tuple[list[str], list[tuple[int, list[str]]], list[ImportProblem]]:
    """Split into the header, the (row number, fields) pairs and the ragged rows' problems. A ragged row is
    left out and reported, so the other rows are still checked (one stray comma must not hide the file's
    other problems); a CSV syntax error, an empty file or a repeated header column stop the reading."""
    reader = csv.reader(io.StringIO(text, newline=""), quoting=quoting, strict=quoting != csv.QUOTE_NONE)
    problems: list[ImportProblem] = []
    rows: list[tuple[int, list[str]]] = []
    header: list[str] | None = None
    row_number = 0
    try:
        for fields in reader:
            row_number += 1
            if header is None:
                header = [h.strip() for h in fields]
                continue
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line
            if len(fields) != len(header):
                problems.append(
                    ImportProblem(
                        f"has {len(fields)} fields but the header has {len(header)} "
                        "(a stray or missing comma?)",
                        row=row_number,
                    )
                )
                continue
            rows.append((row_number, fields))
    except csv.Error as exc:
        problems.append(ImportProblem(f"cannot be read as CSV: {exc}", row=row_number + 1))
    if header is None:
        raise CorpusImportError([ImportProblem("the file is empty")])
    duplicated = [name for name, n in Counter(header).items() if n > 1]
    for name in duplicated:
        problems.append(ImportProblem("appears twice in the header", row=1, column=name))
    ragged = [p for p in problems if p.message.endswith("(a stray or missing comma?)")]
    if len(ragged) < len(problems) or (problems and not rows):
        raise CorpusImportError(problems)
    if not rows:
        raise CorpusImportError([ImportProblem("the file has a header but no data rows", row=1)])
    return header, rows, ragged


def _semicolon_hint(first_line: str) -> ImportProblem | None:
    """A file whose header is separated by semicolons (a spreadsheet saved in a locale that uses the comma
    as its decimal mark) gets a hint instead of a bare "unrecognised header"."""
    if first_line.count(";") <= first_line.count(","):
        return None
    return ImportProblem(
        "the columns seem to be separated by semicolons (;), not commas: save the file as CSV with commas "
        "as separators (in a spreadsheet, choose comma as the field delimiter) and import it again",
        row=1,
    )


def missing_columns(header: list[str], required: Iterable[str]) -> list[ImportProblem]:
    return [ImportProblem("missing column", row=1, column=name) for name in required if name not in header]


def _public_conditions(header: list[str], wanted: list[str] | None) -> list[str]:
    available = [c.removeprefix("response_") for c in header if c.startswith("response_")]
    if wanted is None:
        names = available
    else:
        names = wanted
        missing = [name for name in wanted if name not in available]
        if missing:
            raise CorpusImportError(
                [ImportProblem("missing column", row=1, column=f"response_{name}") for name in missing]
            )
    if not names:
        raise CorpusImportError([ImportProblem("missing column", row=1, column="response_<condition>")])
    bad = [name for name in names if not CONDITION_NAME.match(name)]
    if bad:
        raise CorpusImportError(
            [
                ImportProblem(
                    "condition names may use letters, digits, - and _ only", row=1, column=f"response_{n}"
                )
                for n in bad
            ]
        )
    return names


def _parse_public(header, rows, wanted_conditions) -> ParsedCorpus:
    problems = missing_columns(header, PUBLIC_REQUIRED)
    if problems:
        raise CorpusImportError(problems)
    conditions = _public_conditions(header, wanted_conditions)
    index = {name: i for i, name in enumerate(header)}
    prompts = []
    for row_number, fields in rows:
        values = {name: fields[i] for name, i in index.items()}
        prompts.append(
            ParsedPrompt(
                row=row_number,
                dialogue_id=values["dialog_id"].strip(),
                emotion=values["emotion"].strip().lower(),
                situation=values["situation"].strip(),
                speaker_utterance=values["speaker_uttr"].strip(),
                responses={name: values[f"response_{name}"].strip() for name in conditions},
                extra=values,
            )
        )
    return ParsedCorpus(format=PUBLIC_FORMAT, conditions=conditions, prompts=prompts, header=header)


def _ed_text(value: str) -> str:
    return value.replace("_comma_", ",").strip()


def _parse_ed_raw(header, rows, wanted_conditions) -> ParsedCorpus:
    problems = missing_columns(header, ED_REQUIRED)
    if problems:
        raise CorpusImportError(problems)
    if wanted_conditions is not None and wanted_conditions != [HUMAN_CONDITION]:
        raise CorpusImportError(
            [
                ImportProblem(
                    "EmpatheticDialogues files have only the 'human' condition", column="--conditions"
                )
            ]
        )
    index = {name: i for i, name in enumerate(header)}
    problems = []
    first: dict[str, tuple[int, list[str]]] = {}
    second: dict[str, tuple[int, list[str]]] = {}
    order: list[str] = []
    for row_number, fields in rows:
        conv_id = fields[index["conv_id"]].strip()
        raw_idx = fields[index["utterance_idx"]].strip()
        if not conv_id:
            problems.append(ImportProblem("empty conversation id", row=row_number, column="conv_id"))
            continue
        try:
            utterance_idx = int(raw_idx)
        except ValueError:
            problems.append(
                ImportProblem(f"{raw_idx!r} is not a whole number", row=row_number, column="utterance_idx")
            )
            continue
        target = {1: first, 2: second}.get(utterance_idx)
        if target is None:
            continue  # later turns of the conversation are not part of a prompt
        if conv_id in target:
            problems.append(
                ImportProblem(
                    f"duplicate dialogue id {conv_id!r} (utterance {utterance_idx} already on row "
                    f"{target[conv_id][0]})",
                    row=row_number,
                    column="conv_id",
                )
            )
            continue
        target[conv_id] = (row_number, fields)
        if utterance_idx == 1:
            order.append(conv_id)
    for conv_id, (row_number, _) in second.items():
        if conv_id not in first:
            problems.append(
                ImportProblem(
                    f"conversation {conv_id!r} has no first utterance", row=row_number, column="utterance_idx"
                )
            )
    prompts = []
    for conv_id in order:
        row_number, fields = first[conv_id]
        if conv_id not in second:
            problems.append(
                ImportProblem(
                    f"conversation {conv_id!r} has no second utterance (the listener's response)",
                    row=row_number,
                    column="utterance_idx",
                )
            )
            continue
        response_row, response_fields = second[conv_id]
        prompt = ParsedPrompt(
            row=row_number,
            dialogue_id=conv_id,
            emotion=fields[index["context"]].strip().lower(),
            situation=_ed_text(fields[index["prompt"]]),
            speaker_utterance=_ed_text(fields[index["utterance"]]),
            responses={HUMAN_CONDITION: _ed_text(response_fields[index["utterance"]])},
        )
        if not prompt.responses[HUMAN_CONDITION]:
            problems.append(ImportProblem("empty text", row=response_row, column="utterance"))
            prompt.responses[HUMAN_CONDITION] = "?"  # reported above; keep checking the rest
        prompts.append(prompt)
    if problems:
        raise CorpusImportError(problems)
    return ParsedCorpus(format=ED_RAW_FORMAT, conditions=[HUMAN_CONDITION], prompts=prompts, header=header)


def corpus_parse(
    *, data: bytes, conditions: list[str] | None = None, known_emotions: set[str] | None = None
) -> ParsedCorpus:
    """Read and check a corpus file (either format) without touching the database's rows.

    Raises CorpusImportError listing every problem found (row and column), up to MAX_REPORTED_ERRORS.
    Checks done here: encoding, empty file, header/format, missing columns, ragged rows, duplicate dialogue
    ids, empty texts, and (given ``known_emotions``, lower-case names) unknown emotions.
    """
    text = text_decode(data)
    first_line = text.split("\n", 1)[0]
    header_fields = next(csv.reader([first_line]), [])
    try:
        fmt = _detect_format([h.strip() for h in header_fields])
    except CorpusImportError as exc:
        csv_nul_check(text)  # a NUL in the header says more than "unrecognised"
        hint = _semicolon_hint(first_line)
        raise CorpusImportError([*exc.problems, hint] if hint else exc.problems) from None
    quoting = csv.QUOTE_NONE if fmt == ED_RAW_FORMAT else csv.QUOTE_MINIMAL
    csv_nul_check(text, quoting=quoting)
    header, rows, ragged = _read_rows(text, quoting=quoting)
    try:
        if fmt == ED_RAW_FORMAT:
            corpus = _parse_ed_raw(header, rows, conditions)
        else:
            corpus = _parse_public(header, rows, conditions)
    except CorpusImportError as exc:
        raise CorpusImportError([*ragged, *exc.problems]) from None
    problems = list(ragged)
    seen: dict[str, int] = {}
    id_column = "conv_id" if fmt == ED_RAW_FORMAT else "dialog_id"
    for prompt in corpus.prompts:
        if not prompt.dialogue_id:
            problems.append(ImportProblem("empty dialogue id", row=prompt.row, column=id_column))
        elif len(prompt.dialogue_id) > 100:
            problems.append(
                ImportProblem("dialogue id longer than 100 characters", row=prompt.row, column=id_column)
            )
        elif prompt.dialogue_id in seen:
            problems.append(
                ImportProblem(
                    f"duplicate dialogue id {prompt.dialogue_id!r} (first on row {seen[prompt.dialogue_id]})",
                    row=prompt.row,
                    column=id_column,
                )
            )
        else:
            seen[prompt.dialogue_id] = prompt.row
        if fmt == PUBLIC_FORMAT:
            checks = [("emotion", prompt.emotion), ("situation", prompt.situation)]
            checks += [("speaker_uttr", prompt.speaker_utterance)]
            checks += [(f"response_{name}", text) for name, text in prompt.responses.items()]
        else:
            checks = [
                ("context", prompt.emotion),
                ("prompt", prompt.situation),
                ("utterance", prompt.speaker_utterance),
            ]
        for column, value in checks:
            if not value:
                problems.append(ImportProblem("empty text", row=prompt.row, column=column))
        if known_emotions is not None and prompt.emotion and prompt.emotion not in known_emotions:
            problems.append(
                ImportProblem(
                    f"unknown emotion {prompt.emotion!r} (not in the Emotion table; add it in the admin)",
                    row=prompt.row,
                    column=checks[0][0],
                )
            )
    if problems:
        raise CorpusImportError(sorted(problems, key=lambda p: p.row or 0))
    return corpus


def corpus_sample(*, prompts: list[ParsedPrompt], n: int, seed: int) -> list[ParsedPrompt]:
    """Pick ``n`` prompts spread over the emotions as evenly as the file allows; the same seed gives the same
    pick. Emotions with too few prompts give all they have and the rest is shared among the others. The
    picked prompts keep the file's order."""
    if n < 1:
        raise CorpusImportError([ImportProblem("--sample must be at least 1", column="--sample")])
    if n > len(prompts):
        raise CorpusImportError(
            [
                ImportProblem(
                    f"--sample {n} is more than the {len(prompts)} prompts in the file", column="--sample"
                )
            ]
        )
    rng = random.Random(seed)
    by_emotion: dict[str, list[ParsedPrompt]] = defaultdict(list)
    for prompt in prompts:
        by_emotion[prompt.emotion].append(prompt)
    emotions = sorted(by_emotion)
    take = dict.fromkeys(emotions, 0)
    remaining = n
    while remaining:
        open_emotions = [e for e in emotions if take[e] < len(by_emotion[e])]
        share = remaining // len(open_emotions)
        if share == 0:
            # Fewer prompts left than emotions: which emotions get one more is drawn from the seed.
            for emotion in rng.sample(open_emotions, remaining):
                take[emotion] += 1
            break
        for emotion in open_emotions:
            extra = min(share, len(by_emotion[emotion]) - take[emotion])
            take[emotion] += extra
            remaining -= extra
    chosen: set[int] = set()
    for emotion in emotions:
        pool = sorted(by_emotion[emotion], key=lambda p: p.dialogue_id)
        chosen.update(id(p) for p in rng.sample(pool, take[emotion]))
    return [p for p in prompts if id(p) in chosen]
