"""Corpus and published-ratings import: validate the whole file first, then write it in one transaction.

Two corpus formats are read, told apart by their header:

* the public dataset of Welivita & Pu (``dataset_and_ratings.csv``): one row per prompt with ``dialog_id,
  emotion, situation, speaker_uttr`` and one ``response_<name>`` column per condition;
* the raw EmpatheticDialogues CSV (``conv_id, utterance_idx, context, prompt, speaker_idx, utterance, ...``,
  unquoted, commas written ``_comma_``): utterance 1 is the speaker's, utterance 2 the human listener's reply.

Every problem is reported with the row (the header is row 1, as in a spreadsheet) and the column; when there is
any problem nothing at all is written.
"""

from __future__ import annotations

import ast
import csv
import io
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from .design import design_freeze
from .models import Assignment, Condition, Emotion, Participant, Prompt, Rating, Response, Study

# Called as progress(stage, done, total) while rows are checked and written.
ProgressCallback = Callable[[str, int, int], None]

PUBLIC_FORMAT = "public"
ED_RAW_FORMAT = "empathetic_dialogues"
PUBLIC_REQUIRED = ["dialog_id", "emotion", "situation", "speaker_uttr"]
ED_REQUIRED = ["conv_id", "utterance_idx", "context", "prompt", "speaker_idx", "utterance"]
HUMAN_CONDITION = "human"
CONDITION_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
MAX_REPORTED_ERRORS = 50
BULK_BATCH = 1000

# The Toronto Empathy Questionnaire: answers Never..Always scored 0..4; these items are scored in reverse.
# Answers are stored as the participant flow stores them: {"1": "never", ..., "16": "always"}.
TEQ_ITEMS = 16
TEQ_REVERSED = frozenset({2, 4, 7, 10, 11, 12, 14, 15})
TEQ_ANSWER_CODES = ["never", "rarely", "sometimes", "often", "always"]


@dataclass(frozen=True)
class ImportProblem:
    message: str
    row: int | None = None
    column: str | None = None

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column '{self.column}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class CorpusImportError(Exception):
    """The file was refused; ``problems`` says where and why. Nothing was written."""

    def __init__(self, problems: Iterable[ImportProblem | str]):
        problems = [p if isinstance(p, ImportProblem) else ImportProblem(p) for p in problems]
        if len(problems) > MAX_REPORTED_ERRORS:
            more = len(problems) - MAX_REPORTED_ERRORS
            problems = [*problems[:MAX_REPORTED_ERRORS], ImportProblem(f"… and {more} more problems")]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in self.problems))


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


def _decode(data: bytes) -> str:
    if not data.strip():
        raise CorpusImportError([ImportProblem("the file is empty")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusImportError(
            [
                ImportProblem(
                    f"the file is not UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
                    f"(line {line}); save it as UTF-8"
                )
            ]
        ) from None
    return text.removeprefix("\ufeff")


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


def _read_rows(text: str, *, quoting: int) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Split into the header and (row number, fields) pairs; ragged rows and CSV syntax errors are problems."""
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
    if problems:
        raise CorpusImportError(problems)
    if not rows:
        raise CorpusImportError([ImportProblem("the file has a header but no data rows", row=1)])
    return header, rows


def _missing_columns(header: list[str], required: Iterable[str]) -> list[ImportProblem]:
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
    problems = _missing_columns(header, PUBLIC_REQUIRED)
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
    problems = _missing_columns(header, ED_REQUIRED)
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
    text = _decode(data)
    first_line = text.split("\n", 1)[0]
    header_fields = next(csv.reader([first_line]), [])
    fmt = _detect_format([h.strip() for h in header_fields])
    quoting = csv.QUOTE_NONE if fmt == ED_RAW_FORMAT else csv.QUOTE_MINIMAL
    header, rows = _read_rows(text, quoting=quoting)
    if fmt == ED_RAW_FORMAT:
        corpus = _parse_ed_raw(header, rows, conditions)
    else:
        corpus = _parse_public(header, rows, conditions)
    problems = []
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
        raise CorpusImportError(problems)
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


# --- Writing ----------------------------------------------------------------------------------------------


def _emotions_by_name() -> dict[str, Emotion]:
    return {e.name.lower(): e for e in Emotion.objects.all()}


def _refuse_non_draft(study: Study) -> None:
    if study.state != Study.State.DRAFT:
        raise CorpusImportError(
            [
                ImportProblem(
                    f"study '{study.slug}' is {study.state}: a corpus can only be imported into a draft"
                )
            ]
        )


def _ensure_conditions(study: Study, names: list[str]) -> dict[str, Condition]:
    existing = {c.name: c for c in study.conditions.all()}
    has_baseline = any(c.is_baseline for c in existing.values())
    base = max((c.position for c in existing.values()), default=-1) + 1
    for offset, name in enumerate(names):
        if name in existing:
            continue
        human = name == HUMAN_CONDITION
        existing[name] = Condition.objects.create(
            study=study,
            name=name,
            label=name.replace("_", " ").capitalize() if human else name,
            kind=Condition.Kind.HUMAN if human else Condition.Kind.LLM,
            is_baseline=human and not has_baseline,
            position=base + offset,
        )
    return existing


def _tick(progress: ProgressCallback | None, stage: str, done: int, total: int) -> None:
    if progress is not None:
        progress(stage, done, total)


def corpus_import(
    *,
    study_slug: str,
    data: bytes,
    sample: int | None = None,
    seed: int = 0,
    conditions: list[str] | None = None,
    replace: bool = False,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
) -> ImportResult:
    """Import prompts and their responses into a draft study (created, as a draft, when the slug is new).

    Guarantees: either every prompt and response of the file (or of the balanced sample) is written, or nothing
    is (the study and its conditions included). Refused, with row and column: unreadable or malformed files,
    unknown emotions, dialogue ids already in the study (unless ``replace``, which first deletes the study's
    prompts, responses and staff-preview participants), and any study that is not a draft. With ``dry_run``
    the whole import runs and is then rolled back: the answer says what would be imported.
    """
    existing_study = Study.objects.filter(slug=study_slug).first()
    if existing_study is not None:
        _refuse_non_draft(existing_study)
    emotions = _emotions_by_name()
    corpus = corpus_parse(data=data, conditions=conditions, known_emotions=set(emotions))
    prompts = (
        corpus_sample(prompts=corpus.prompts, n=sample, seed=seed) if sample is not None else corpus.prompts
    )

    with transaction.atomic():
        study, created = Study.objects.get_or_create(
            slug=study_slug, defaults={"title": study_slug.replace("-", " ").capitalize()}
        )
        study = Study.objects.select_for_update().get(pk=study.pk)
        _refuse_non_draft(study)  # again, under the lock: a launch may have happened meanwhile
        replaced = 0
        if replace:
            study.participants.filter(is_preview=True).delete()
            if study.participants.exists():
                raise CorpusImportError(
                    [ImportProblem(f"study '{study.slug}' has participants: cannot replace")]
                )
            replaced = study.prompts.count()
            study.prompts.all().delete()  # their responses go with them
        else:
            already = dict(
                study.prompts.filter(dialogue_id__in=[p.dialogue_id for p in prompts]).values_list(
                    "dialogue_id", "id"
                )
            )
            if already:
                id_column = "conv_id" if corpus.format == ED_RAW_FORMAT else "dialog_id"
                raise CorpusImportError(
                    [
                        ImportProblem(
                            f"dialogue id {p.dialogue_id!r} is already in study '{study.slug}' "
                            "(use replace to import the corpus afresh)",
                            row=p.row,
                            column=id_column,
                        )
                        for p in prompts
                        if p.dialogue_id in already
                    ]
                )
        condition_rows = _ensure_conditions(study, corpus.conditions)
        total = len(prompts)
        created_prompts = []
        for start in range(0, total, BULK_BATCH):
            batch = prompts[start : start + BULK_BATCH]
            created_prompts += Prompt.objects.bulk_create(
                [
                    Prompt(
                        study=study,
                        dialogue_id=p.dialogue_id,
                        emotion=emotions[p.emotion],
                        situation=p.situation,
                        speaker_utterance=p.speaker_utterance,
                    )
                    for p in batch
                ]
            )
            _tick(progress, "prompts", len(created_prompts), total)
        responses = [
            Response(
                prompt=prompt_row,
                condition=condition_rows[name],
                text=text,
                source=Response.Source.CORPUS,
            )
            for parsed, prompt_row in zip(prompts, created_prompts, strict=True)
            for name, text in parsed.responses.items()
        ]
        for start in range(0, len(responses), BULK_BATCH):
            Response.objects.bulk_create(responses[start : start + BULK_BATCH])
            _tick(progress, "responses", min(start + BULK_BATCH, len(responses)), len(responses))
        if dry_run:
            # Everything was checked and written, database constraints included; now undo it all.
            transaction.set_rollback(True)
    return ImportResult(
        study=study,
        study_created=created,
        format=corpus.format,
        prompts=len(created_prompts),
        responses=len(responses),
        conditions=corpus.conditions,
        replaced=replaced,
        dry_run=dry_run,
    )


# --- Published ratings ------------------------------------------------------------------------------------


@dataclass
class RatingsImportResult:
    study: Study
    prompts: int
    responses: int
    participants_per_condition: dict[str, int]
    ratings: int
    ratings_per_participant: tuple[int, int]  # (fewest, most)

    def summary(self) -> str:
        per = ", ".join(f"{name} {n}" for name, n in self.participants_per_condition.items())
        low, high = self.ratings_per_participant
        each = f"{low}" if low == high else f"{low}–{high}"
        return (
            f"Imported closed study '{self.study.slug}': {self.prompts} prompts, {self.responses} responses, "
            f"participants {per}, {self.ratings} ratings ({each} per participant)."
        )


@dataclass
class _Rater:
    condition: str
    external_id: str
    part_no: str
    first_row: int
    teq_answers: dict[str, str]
    teq_score: int
    items: list[tuple[int, int]] = field(default_factory=list)  # (prompt index, rating)


def _parse_teq(raw: str, row: int, column: str) -> dict[str, str]:
    """The published ``empathy_arr`` list (16 answers, Never..Always written -2..2) as stored answers."""
    try:
        answers = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        raise CorpusImportError([ImportProblem(f"{raw!r} is not a list of numbers", row, column)]) from None
    if (
        not isinstance(answers, list)
        or len(answers) != TEQ_ITEMS
        or not all(isinstance(a, int) and -2 <= a <= 2 for a in answers)
    ):
        raise CorpusImportError([ImportProblem(f"expected {TEQ_ITEMS} answers from -2 to 2", row, column)])
    return {str(number): TEQ_ANSWER_CODES[a + 2] for number, a in enumerate(answers, start=1)}


def teq_score(answers: dict[str, str]) -> int:
    """The TEQ total of stored answers, reversing the negatively worded items."""
    total = 0
    for number, code in answers.items():
        points = TEQ_ANSWER_CODES.index(code)
        total += 4 - points if int(number) in TEQ_REVERSED else points
    return total


def ratings_import(
    *, study_slug: str, data: bytes, title: str = "", progress: ProgressCallback | None = None
) -> RatingsImportResult:
    """Load the public dataset of Welivita & Pu (every ``response_<c>`` with its ``rating_<c>``,
    ``annotator_<c>``, ``empathy_propensity_<c>`` and ``empathy_arr_<c>``) as a new, closed rating study.

    Guarantees: the study (which must not exist yet), its conditions, prompts, responses, completed participants
    (one per annotator, with their TEQ answers and total), their assignments (position = order within the
    annotator's ``part_no`` batch) and ratings are all written, or nothing is. Checked first: every rater rates
    one batch only and belongs to one condition, ratings are on the study's scale, TEQ totals match the answers.
    """
    if Study.objects.filter(slug=study_slug).exists():
        raise CorpusImportError([ImportProblem(f"study '{study_slug}' already exists; choose a new slug")])
    emotions = _emotions_by_name()
    corpus = corpus_parse(data=data, known_emotions=set(emotions))
    if corpus.format != PUBLIC_FORMAT:
        raise CorpusImportError(
            [ImportProblem("ratings can only be imported from the public dataset format", 1)]
        )
    header = corpus.header
    conditions = [c for c in corpus.conditions if f"rating_{c}" in header]
    problems: list[ImportProblem] = []
    for name in conditions:
        problems += _missing_columns(
            header, [f"annotator_{name}", f"empathy_propensity_{name}", f"empathy_arr_{name}", "part_no"]
        )
    if not conditions:
        problems.append(ImportProblem("missing column", row=1, column="rating_<condition>"))
    if problems:
        raise CorpusImportError(sorted(set(problems), key=str))
    scale = {option["value"] for option in Study._meta.get_field("scale").get_default()}

    raters: dict[tuple[str, str], _Rater] = {}
    owner: dict[str, str] = {}
    for index, prompt in enumerate(corpus.prompts):
        values = prompt.extra
        for name in conditions:
            external_id = values[f"annotator_{name}"].strip()
            if not external_id:
                problems.append(ImportProblem("empty annotator id", prompt.row, f"annotator_{name}"))
                continue
            raw_rating = values[f"rating_{name}"].strip()
            try:
                rating = int(raw_rating)
            except ValueError:
                rating = None
            if rating not in scale:
                problems.append(
                    ImportProblem(
                        f"{raw_rating!r} is not on the scale {sorted(scale)}", prompt.row, f"rating_{name}"
                    )
                )
                continue
            if owner.setdefault(external_id, name) != name:
                problems.append(
                    ImportProblem(
                        f"annotator {external_id!r} also rates in condition {owner[external_id]!r}",
                        prompt.row,
                        f"annotator_{name}",
                    )
                )
                continue
            rater = raters.get((name, external_id))
            if rater is None:
                try:
                    answers = _parse_teq(values[f"empathy_arr_{name}"], prompt.row, f"empathy_arr_{name}")
                    total = int(values[f"empathy_propensity_{name}"].strip())
                except CorpusImportError as exc:
                    problems += exc.problems
                    continue
                except ValueError:
                    problems.append(
                        ImportProblem("not a whole number", prompt.row, f"empathy_propensity_{name}")
                    )
                    continue
                if teq_score(answers) != total:
                    problems.append(
                        ImportProblem(
                            f"TEQ total {total} does not match the answers (they score {teq_score(answers)})",
                            prompt.row,
                            f"empathy_propensity_{name}",
                        )
                    )
                    continue
                rater = raters[(name, external_id)] = _Rater(
                    name, external_id, values["part_no"].strip(), prompt.row, answers, total
                )
            elif values["part_no"].strip() != rater.part_no:
                problems.append(
                    ImportProblem(
                        f"annotator {external_id!r} rates batch {values['part_no']!r} here but batch "
                        f"{rater.part_no!r} on row {rater.first_row}",
                        prompt.row,
                        "part_no",
                    )
                )
                continue
            rater.items.append((index, rating))
    if problems:
        raise CorpusImportError(problems)
    per_condition = Counter(rater.condition for rater in raters.values())
    items_per_participant = max(len(r.items) for r in raters.values())

    with transaction.atomic():
        study = Study.objects.create(
            slug=study_slug,
            title=title or "Published ratings (Welivita & Pu)",
            description="Imported published ratings: public dataset of github.com/anuradha1992/llm-empathy-evaluation "
            "(texts from EmpatheticDialogues, CC BY-NC 4.0).",
            state=Study.State.CLOSED,
            ask_teq=True,
            items_per_participant=items_per_participant,
            target_ratings_per_response=1,
            quota_per_condition=max(per_condition.values()),
            closed_at=timezone.now(),
        )
        condition_rows = _ensure_conditions(study, conditions)
        prompt_rows = Prompt.objects.bulk_create(
            [
                Prompt(
                    study=study,
                    dialogue_id=p.dialogue_id,
                    emotion=emotions[p.emotion],
                    situation=p.situation,
                    speaker_utterance=p.speaker_utterance,
                )
                for p in corpus.prompts
            ],
            batch_size=BULK_BATCH,
        )
        _tick(progress, "prompts", len(prompt_rows), len(prompt_rows))
        response_rows = Response.objects.bulk_create(
            [
                Response(prompt=prompt_row, condition=condition_rows[name], text=parsed.responses[name])
                for parsed, prompt_row in zip(corpus.prompts, prompt_rows, strict=True)
                for name in conditions
            ],
            batch_size=BULK_BATCH,
        )
        response_of = {(r.prompt_id, r.condition.name): r for r in response_rows}
        _tick(progress, "responses", len(response_rows), len(response_rows))
        rater_list = list(raters.values())
        participant_rows = Participant.objects.bulk_create(
            [
                Participant(
                    study=study,
                    condition=condition_rows[r.condition],
                    external_id=r.external_id,
                    platform=Study.Platform.PROLIFIC,
                    status=Participant.Status.COMPLETED,
                    step=Participant.Step.DONE,
                    teq_answers=r.teq_answers,
                    teq_score=r.teq_score,
                )
                for r in rater_list
            ],
            batch_size=BULK_BATCH,
        )
        _tick(progress, "participants", len(participant_rows), len(participant_rows))
        assignments = []
        values = []
        for rater, participant in zip(rater_list, participant_rows, strict=True):
            for position, (index, value) in enumerate(rater.items):
                response = response_of[(prompt_rows[index].pk, rater.condition)]
                assignments.append(
                    Assignment(
                        participant=participant,
                        position=position,
                        kind=Assignment.Kind.RESPONSE,
                        response=response,
                    )
                )
                values.append(value)
        assignment_rows = Assignment.objects.bulk_create(assignments, batch_size=BULK_BATCH)
        Rating.objects.bulk_create(
            [Rating(assignment=a, value=v) for a, v in zip(assignment_rows, values, strict=True)],
            batch_size=BULK_BATCH,
        )
        _tick(progress, "ratings", len(values), len(values))
        design_freeze(study, reason="import of a finished study")
    return RatingsImportResult(
        study=study,
        prompts=len(prompt_rows),
        responses=len(response_rows),
        participants_per_condition={name: per_condition[name] for name in conditions},
        ratings=len(values),
        ratings_per_participant=(min(len(r.items) for r in rater_list), items_per_participant),
    )
