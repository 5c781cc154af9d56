"""EmotionBench as data: instruments, situations and the published results, imported atomically.

Every import validates the whole file before writing anything; a problem is reported with where it is
(file, JSON path, row and column, or spreadsheet cell) and nothing is half imported. Re-importing the same
file changes nothing.

Published results and situations (a decision, documented in docs/emotionbench.md): the result files name a
situation `Emotion-k_scenario-s` (0-based factor k, 0-based position s in the paper's selection of at most 5
per factor) and show its text in row 0. The position s is NOT the situation's position in situations.json, and
some texts were edited for the runs. So a published situation is matched to the pool by its text (whitespace
normalised) within the emotion and factor the column names; when no pool situation of that factor has that
text, the text that was shown becomes a new situation of that factor (appended after the pool's own). The
paper's grouping (by the factor in the column name) and the text the subjects really saw are both kept.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction
from django.utils import timezone

from studies.kinds.questionnaire import QUESTIONNAIRE
from studies.models import (
    Condition,
    Instrument,
    InstrumentCategory,
    InstrumentItem,
    QuestionnaireAnswer,
    QuestionnaireRun,
    QuestionnaireSettings,
    Situation,
    Study,
    StudySituation,
)

# The eight negative emotions of EmotionBench, in the paper's order. Data, not code paths: everything that
# loops over emotions reads this tuple.
EMOTIONS: tuple[str, ...] = (
    "Anger",
    "Anxiety",
    "Depression",
    "Frustration",
    "Jealousy",
    "Guilt",
    "Fear",
    "Embarrassment",
)
# Other spellings found in the published files (crowd.xlsx headers).
EMOTION_ALIASES: dict[str, str] = {"Angry": "Anger", "Jealous": "Jealousy"}

# PANAS anchors (Watson, Clark & Tellegen 1988), for files that do not carry them.
PANAS_ANCHORS: list[str] = [
    "very slightly or not at all",
    "a little",
    "moderately",
    "quite a bit",
    "extremely",
]

SITUATION_PROMPT_PREFIX = "Imagine you are the protagonist in the scenario:"


class EmotionBenchImportError(ValueError):
    """A file that cannot be imported; the message says where the problem is."""


_QUOTES = str.maketrans({'"': "'", "\u201c": "'", "\u201d": "'", "\u2018": "'", "\u2019": "'"})


def _normalise_text(text: str) -> str:
    """For matching texts: whitespace, case and the kind of quote marks do not count."""
    return " ".join(str(text).translate(_QUOTES).casefold().split())


def emotion_canonical(*, name: str) -> str | None:
    """The canonical emotion for a spelling, or None if it is not one of the eight."""
    name = name.strip()
    if name in EMOTIONS:
        return name
    return EMOTION_ALIASES.get(name)


# --- Instruments ----------------------------------------------------------------------------------------


@dataclass
class InstrumentSpec:
    name: str
    items: dict[int, str]
    scale_min: int
    scale_max: int
    anchors: list[str]
    reverse: list[int]
    categories: list[tuple[str, list[int]]]
    compute_mode: str
    llm_prompt: str
    llm_system_prompt: str
    notes: list[str] = field(default_factory=list)


@dataclass
class ImportSummary:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"created {self.created}, updated {self.updated}, unchanged {self.unchanged}", *self.notes]


_RANGE_RE = re.compile(r"(?:numbers|scale|ranging)\s+(?:of|from)\s+(-?\d+)\s+to\s+(-?\d+)", re.IGNORECASE)
_ANCHOR_RE = re.compile(r"(-?\d+)\s*(?:denotes|=)\s*\"([^\"]+)\"")


def _int_list(value, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise EmotionBenchImportError(f"{where}: expected a list of item numbers, got {value!r}")
    return list(value)


def instrument_spec_parse(*, obj: dict, where: str) -> InstrumentSpec:
    """Validate one questionnaires.json object (at JSON path `where`) and return what to store.

    Guarantees: items numbered 1..n without gaps; a valid range (from `scale_min`/`scale_max` if given, else
    from the prompt's "from X to Y"), consistent with the file's `scale` (= min + max, so that a reversed item
    scores `scale - x`); reverse items among the items; at least one category, every category non-empty and
    within the items, every item in some category, and categories that do not cover every item (subscales)
    pairwise disjoint.
    """
    if not isinstance(obj, dict):
        raise EmotionBenchImportError(f"{where}: expected an object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise EmotionBenchImportError(f"{where}.name: missing or empty")
    where = f"{where} ({name})"
    questions = obj.get("questions")
    if not isinstance(questions, dict) or not questions:
        raise EmotionBenchImportError(f"{where}.questions: expected a non-empty object of numbered items")
    items: dict[int, str] = {}
    for key, text in questions.items():
        if not str(key).isdigit():
            raise EmotionBenchImportError(f"{where}.questions[{key!r}]: item keys must be numbers")
        if not isinstance(text, str) or not text.strip():
            raise EmotionBenchImportError(f"{where}.questions[{key!r}]: empty item text")
        items[int(key)] = text.strip()
    if sorted(items) != list(range(1, len(items) + 1)):
        raise EmotionBenchImportError(
            f"{where}.questions: items must be numbered 1..{len(items)} without gaps"
        )

    prompt = obj.get("prompt", "") or ""
    if "scale_min" in obj or "scale_max" in obj:
        lo, hi = obj.get("scale_min"), obj.get("scale_max")
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise EmotionBenchImportError(f"{where}.scale_min/scale_max: both must be integers")
    else:
        match = _RANGE_RE.search(prompt)
        if not match:
            raise EmotionBenchImportError(
                f"{where}: no range: give scale_min and scale_max, or say 'from X to Y' in the prompt"
            )
        lo, hi = int(match[1]), int(match[2])
    if lo >= hi:
        raise EmotionBenchImportError(
            f"{where}: bad range {lo}..{hi} (the minimum must be below the maximum)"
        )
    scale = obj.get("scale")
    if scale is not None and scale != lo + hi:
        raise EmotionBenchImportError(
            f"{where}.scale: {scale!r} does not fit the range {lo}..{hi} (reverse scoring needs scale = min + max"
            f" = {lo + hi})"
        )

    reverse = _int_list(obj.get("reverse", []), f"{where}.reverse")
    outside = sorted(set(reverse) - set(items))
    if outside:
        raise EmotionBenchImportError(
            f"{where}.reverse: items {outside} are not in the item list 1..{len(items)}"
        )

    compute_mode = obj.get("compute_mode", "SUM")
    if compute_mode not in Instrument.ComputeMode.values:
        raise EmotionBenchImportError(f"{where}.compute_mode: {compute_mode!r} is not SUM or SUM*2")

    raw_categories = obj.get("categories")
    if not isinstance(raw_categories, list) or not raw_categories:
        raise EmotionBenchImportError(
            f"{where}.categories: missing; an instrument needs at least one category"
        )
    categories: list[tuple[str, list[int]]] = []
    seen_names: set[str] = set()
    for i, cat in enumerate(raw_categories):
        cwhere = f"{where}.categories[{i}]"
        if not isinstance(cat, dict):
            raise EmotionBenchImportError(f"{cwhere}: expected an object")
        cname = cat.get("cat_name")
        if not isinstance(cname, str) or not cname.strip():
            raise EmotionBenchImportError(f"{cwhere}.cat_name: missing or empty")
        if cname in seen_names:
            raise EmotionBenchImportError(f"{cwhere}.cat_name: {cname!r} appears twice")
        seen_names.add(cname)
        numbers = _int_list(cat.get("cat_questions"), f"{cwhere}.cat_questions")
        if not numbers:
            raise EmotionBenchImportError(f"{cwhere}.cat_questions: empty category {cname!r}")
        if len(set(numbers)) != len(numbers):
            raise EmotionBenchImportError(f"{cwhere}.cat_questions: an item is listed twice in {cname!r}")
        outside = sorted(set(numbers) - set(items))
        if outside:
            raise EmotionBenchImportError(f"{cwhere}.cat_questions: items {outside} are not in the item list")
        categories.append((cname, numbers))
    covered = set().union(*(set(nums) for _, nums in categories))
    missing = sorted(set(items) - covered)
    if missing:
        raise EmotionBenchImportError(f"{where}.categories: items {missing} belong to no category")
    subscales = [(n, set(nums)) for n, nums in categories if set(nums) != set(items)]
    for a in range(len(subscales)):
        for b in range(a + 1, len(subscales)):
            overlap = sorted(subscales[a][1] & subscales[b][1])
            if overlap:
                raise EmotionBenchImportError(
                    f"{where}.categories: {subscales[a][0]!r} and {subscales[b][0]!r} overlap on items {overlap}"
                )

    notes: list[str] = []
    anchors = obj.get("anchors")
    if anchors is not None:
        if not isinstance(anchors, list) or len(anchors) != hi - lo + 1:
            raise EmotionBenchImportError(f"{where}.anchors: expected {hi - lo + 1} labels for {lo}..{hi}")
        anchors = [str(a) for a in anchors]
    else:
        anchors = _anchors_from_prompt(prompt, lo, hi)
        if anchors is None and name.upper() == "PANAS":
            anchors = list(PANAS_ANCHORS)
        if anchors is None:
            anchors = []
            notes.append(f"{name}: the prompt labels the scale ambiguously or per item; no anchors stored")
    return InstrumentSpec(
        name=name.strip(),
        items=items,
        scale_min=lo,
        scale_max=hi,
        anchors=anchors,
        reverse=sorted(set(reverse)),
        categories=categories,
        compute_mode=compute_mode,
        llm_prompt=prompt,
        llm_system_prompt=obj.get("inner_setting", "") or "",
        notes=notes,
    )


def _anchors_from_prompt(prompt: str, lo: int, hi: int) -> list[str] | None:
    """Labels of lo..hi from `N denotes "label"` phrases; blank where a value has none; None if a value is
    labelled twice differently (item-specific anchors, as in MJS) or no value is labelled."""
    labels: dict[int, str] = {}
    for number, label in _ANCHOR_RE.findall(prompt):
        value = int(number)
        if not lo <= value <= hi:
            continue
        if value in labels and labels[value] != label:
            return None
        labels[value] = label.strip()
    if not labels:
        return None
    return [labels.get(v, "") for v in range(lo, hi + 1)]


def instruments_parse_file(*, path: Path) -> list[InstrumentSpec]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise EmotionBenchImportError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise EmotionBenchImportError(
            f"{path}: not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise EmotionBenchImportError(f"{path}: expected a list of instrument objects")
    specs = [instrument_spec_parse(obj=obj, where=f"{Path(path).name}: $[{i}]") for i, obj in enumerate(data)]
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise EmotionBenchImportError(f"{path}: instrument names appear twice: {dupes}")
    return specs


@transaction.atomic
def instruments_import(*, path: Path) -> ImportSummary:
    """Import every instrument of a questionnaires.json file, all or nothing.

    Instruments are matched by name; a re-import of the same file changes nothing, a changed file updates
    items, reverse flags and categories in place (answers refer to item numbers, so they stay valid).
    """
    specs = instruments_parse_file(path=path)
    summary = ImportSummary()
    for spec in specs:
        summary.notes.extend(spec.notes)
        fields = {
            "scale_min": spec.scale_min,
            "scale_max": spec.scale_max,
            "anchors": spec.anchors,
            "compute_mode": spec.compute_mode,
            "llm_prompt": spec.llm_prompt,
            "llm_system_prompt": spec.llm_system_prompt,
        }
        instrument = Instrument.objects.filter(name=spec.name).first()
        created = changed = False
        if instrument is None:
            instrument = Instrument.objects.create(name=spec.name, title=spec.name, **fields)
            created = changed = True
        else:
            diff = [k for k, v in fields.items() if getattr(instrument, k) != v]
            if diff:
                for k in diff:
                    setattr(instrument, k, fields[k])
                instrument.save(update_fields=diff)
                changed = True
        existing_items = {i.number: i for i in instrument.items.all()}
        for number, text in spec.items.items():
            reverse = number in spec.reverse
            item = existing_items.pop(number, None)
            if item is None:
                InstrumentItem.objects.create(
                    instrument=instrument, number=number, text=text, reverse_scored=reverse
                )
                changed = True
            elif item.text != text or item.reverse_scored != reverse:
                item.text, item.reverse_scored = text, reverse
                item.save(update_fields=["text", "reverse_scored"])
                changed = True
        if existing_items:
            InstrumentItem.objects.filter(pk__in=[i.pk for i in existing_items.values()]).delete()
            changed = True
        existing_cats = {c.name: c for c in instrument.categories.all()}
        wanted = dict(spec.categories)
        if list(existing_cats) != list(wanted) or any(
            existing_cats[n].item_numbers != wanted[n] for n in wanted
        ):
            instrument.categories.all().delete()
            InstrumentCategory.objects.bulk_create(
                [
                    InstrumentCategory(instrument=instrument, name=n, item_numbers=nums)
                    for n, nums in spec.categories
                ]
            )
            changed = True
        if created:
            summary.created += 1
        elif changed:
            summary.updated += 1
        else:
            summary.unchanged += 1
    return summary


# --- Situations -----------------------------------------------------------------------------------------


@dataclass
class SituationSpec:
    emotion: str
    factor_index: int
    factor_name: str
    index: int
    text: str


def situations_parse_file(*, path: Path) -> list[SituationSpec]:
    """Validate a situations.json file: `{"emotions": [{"name", "factors": [{"name", "scenarios": [...]}]}]}`.

    Guarantees: every emotion is one of EMOTIONS (an unknown one is an error naming its JSON path), appears
    once, and every factor has a name and at least one non-empty situation.
    """
    name = Path(path).name
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise EmotionBenchImportError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise EmotionBenchImportError(
            f"{path}: not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    emotions = data.get("emotions") if isinstance(data, dict) else None
    if not isinstance(emotions, list) or not emotions:
        raise EmotionBenchImportError(f"{name}: $.emotions: expected a non-empty list")
    specs: list[SituationSpec] = []
    seen: set[str] = set()
    for e, emotion in enumerate(emotions):
        ewhere = f"{name}: $.emotions[{e}]"
        if not isinstance(emotion, dict):
            raise EmotionBenchImportError(f"{ewhere}: expected an object")
        raw_name = emotion.get("name")
        canonical = emotion_canonical(name=raw_name) if isinstance(raw_name, str) else None
        if canonical is None:
            raise EmotionBenchImportError(
                f"{ewhere}.name: unknown emotion {raw_name!r}; expected one of {', '.join(EMOTIONS)}"
            )
        if canonical in seen:
            raise EmotionBenchImportError(f"{ewhere}.name: {canonical!r} appears twice")
        seen.add(canonical)
        factors = emotion.get("factors")
        if not isinstance(factors, list) or not factors:
            raise EmotionBenchImportError(f"{ewhere}.factors: expected a non-empty list")
        for f, factor in enumerate(factors):
            fwhere = f"{ewhere}.factors[{f}]"
            if (
                not isinstance(factor, dict)
                or not isinstance(factor.get("name"), str)
                or not factor["name"].strip()
            ):
                raise EmotionBenchImportError(f"{fwhere}.name: missing or empty")
            scenarios = factor.get("scenarios")
            if not isinstance(scenarios, list) or not scenarios:
                raise EmotionBenchImportError(f"{fwhere}.scenarios: expected a non-empty list")
            for s, text in enumerate(scenarios):
                if not isinstance(text, str) or not text.strip():
                    raise EmotionBenchImportError(f"{fwhere}.scenarios[{s}]: empty situation")
                specs.append(
                    SituationSpec(
                        emotion=canonical,
                        factor_index=f + 1,
                        factor_name=factor["name"].strip(),
                        index=s + 1,
                        text=text.strip(),
                    )
                )
    return specs


@transaction.atomic
def situations_import(*, path: Path) -> ImportSummary:
    """Import the situation pool, all or nothing; situations are keyed by (emotion, factor, position).

    A re-import of the same file changes nothing; changed texts or factor names are updated in place.
    Situations in the database but not in the file are kept (runs may refer to them) and counted.
    """
    specs = situations_parse_file(path=path)
    summary = ImportSummary()
    existing = {(s.emotion, s.factor_index, s.index): s for s in Situation.objects.all()}
    to_create: list[Situation] = []
    for spec in specs:
        current = existing.pop((spec.emotion, spec.factor_index, spec.index), None)
        if current is None:
            to_create.append(
                Situation(
                    emotion=spec.emotion,
                    factor_index=spec.factor_index,
                    factor_name=spec.factor_name,
                    index=spec.index,
                    text=spec.text,
                )
            )
        elif current.text != spec.text or current.factor_name != spec.factor_name:
            current.text, current.factor_name = spec.text, spec.factor_name
            current.save(update_fields=["text", "factor_name"])
            summary.updated += 1
        else:
            summary.unchanged += 1
    Situation.objects.bulk_create(to_create)
    summary.created = len(to_create)
    emotions = {s.emotion for s in specs}
    factors = {(s.emotion, s.factor_index) for s in specs}
    summary.notes.append(
        f"{len(specs)} situations, {len(factors)} factors, {len(emotions)} emotions in the file"
    )
    if existing:
        summary.notes.append(f"{len(existing)} situations in the database are not in the file (kept)")
    return summary


# --- Published results ----------------------------------------------------------------------------------

_DEFAULT_COLUMN_RE = re.compile(r"^General_test-(\d+)_order-(\d+)$")
_EVOKED_COLUMN_RE = re.compile(r"^([A-Za-z]+)-(\d+)_scenario-(\d+)_test-(\d+)_order-(\d+)$")
_CROWD_HEADER_RE = re.compile(r"^([A-Za-z]+)_F(\d+)S(\d+)$")

# Published key of a situation: (emotion, 1-based factor, 1-based position in the paper's selection).
PublishedKey = tuple[str, int, int]


@dataclass
class ParsedRun:
    phase: str
    published_key: PublishedKey | None
    subject_key: str | None  # None: derived from the situation when written
    run_index: int
    item_order: list[int]
    values: list[int]  # in the order shown, matching item_order


@dataclass
class ParsedSubject:
    """One condition's runs from one file, and what was skipped (with the reason)."""

    condition_name: str
    condition_label: str
    kind: str
    runs: list[ParsedRun]
    skipped: list[str] = field(default_factory=list)
    source_file: str = ""
    blank: set[tuple] = field(default_factory=set)  # (phase, published key, run index) of blank columns


def _strip_situation_prompt(text: str) -> str:
    text = str(text).strip()
    if text.startswith(SITUATION_PROMPT_PREFIX):
        text = text[len(SITUATION_PROMPT_PREFIX) :].strip()
        if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
            text = text[1:-1]
    return text.strip()


def _condition_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", model)[:64]


def _item_matches(label: str, item_text: str) -> bool:
    label = re.sub(r"^\s*\d+\s*[.)]\s*", "", str(label)).strip().casefold()
    return label == item_text.strip().casefold() or label.endswith(item_text.strip().casefold())


def llm_results_parse_csv(
    *, path: Path, instrument: Instrument, texts: dict[PublishedKey, tuple[str, str]]
) -> ParsedSubject:
    """Parse one `<model>-<instrument>-testing.csv` (doc.csv layout) against `instrument`.

    Row 0 holds the situation prompt of each column, rows 1..n the answers in the order of the column's
    `order-k` column. A column whose answers are all blank is skipped with the reason; a column with some
    blanks, a non-integer or an out-of-range value is an error naming the file, the column and the row.
    Situation texts are collected into `texts` (published key → (text, file)); two files disagreeing on the
    text of a situation is an error.
    """
    import pandas as pd

    fname = Path(path).name
    model = re.sub(rf"-{re.escape(instrument.name)}-testing\.csv$", "", fname)
    if model == fname:
        raise EmotionBenchImportError(f"{fname}: expected a name like <model>-{instrument.name}-testing.csv")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise EmotionBenchImportError(f"{fname}: cannot read as CSV: {exc}") from exc
    items = {i.number: i.text for i in instrument.items.all()}
    n_items = len(items)
    for required in ("question-0", "order-0"):
        if required not in frame.columns:
            raise EmotionBenchImportError(f"{fname}: missing column {required!r}")
    if len(frame) != n_items + 1:
        raise EmotionBenchImportError(
            f"{fname}: {len(frame)} data rows; expected 1 prompt row + {n_items} {instrument.name} items"
        )
    orders: dict[int, list[int]] = {}
    for column in frame.columns:
        match = re.fullmatch(r"order-(\d+)", column)
        if not match:
            continue
        cells = frame[column].iloc[1:].tolist()
        try:
            order = [int(c) for c in cells]
        except ValueError:
            raise EmotionBenchImportError(
                f"{fname}: column {column!r}: item numbers expected in rows 2.."
            ) from None
        if sorted(order) != sorted(items):
            raise EmotionBenchImportError(
                f"{fname}: column {column!r} is not an order of the {n_items} {instrument.name} items"
            )
        orders[int(match[1])] = order
    for row, label in enumerate(frame["question-0"].iloc[1:].tolist()):
        item_number = orders[0][row]
        if not _item_matches(label, items[item_number]):
            raise EmotionBenchImportError(
                f"{fname}: row {row + 3}, column 'question-0': {label!r} is not item {item_number} "
                f"({items[item_number]!r}) of {instrument.name}"
            )

    subject = ParsedSubject(
        condition_name=_condition_name(model),
        condition_label=model,
        kind=Condition.Kind.LLM,
        runs=[],
        source_file=fname,
    )
    blank_columns: list[str] = []
    for column in frame.columns:
        if column in ("question-0",) or re.fullmatch(r"order-\d+", column):
            continue
        default = _DEFAULT_COLUMN_RE.match(column)
        evoked = _EVOKED_COLUMN_RE.match(column)
        if not default and not evoked:
            raise EmotionBenchImportError(
                f"{fname}: column {column!r} is neither General_test-<t>_order-<k> nor "
                f"<Emotion>-<f>_scenario-<s>_test-<t>_order-<k>"
            )
        order_index = int((default or evoked)[2] if default else evoked[5])
        if order_index not in orders:
            raise EmotionBenchImportError(
                f"{fname}: column {column!r} refers to a missing column 'order-{order_index}'"
            )
        cells = [c.strip() for c in frame[column].iloc[1:].tolist()]
        if all(c == "" or c.lower() == "nan" for c in cells):
            blank_columns.append(column)
            if default:
                subject.blank.add((QuestionnaireRun.Phase.DEFAULT, None, int(default[1])))
            elif emotion_canonical(name=evoked[1]):
                key = (emotion_canonical(name=evoked[1]), int(evoked[2]) + 1, int(evoked[3]) + 1)
                subject.blank.add((QuestionnaireRun.Phase.EVOKED, key, int(evoked[4])))
            continue
        values: list[int] = []
        for row, cell in enumerate(cells):
            try:
                value = int(float(cell)) if re.fullmatch(r"-?\d+(\.0+)?", cell) else None
            except ValueError:
                value = None
            if value is None:
                raise EmotionBenchImportError(
                    f"{fname}: row {row + 3}, column {column!r}: {cell!r} is not a whole number"
                )
            if not instrument.scale_min <= value <= instrument.scale_max:
                raise EmotionBenchImportError(
                    f"{fname}: row {row + 3}, column {column!r}: {value} is outside "
                    f"{instrument.scale_min}..{instrument.scale_max}"
                )
            values.append(value)
        if default:
            subject.runs.append(
                ParsedRun(
                    phase=QuestionnaireRun.Phase.DEFAULT,
                    published_key=None,
                    subject_key="default",
                    run_index=int(default[1]),
                    item_order=orders[order_index],
                    values=values,
                )
            )
            continue
        emotion = emotion_canonical(name=evoked[1])
        if emotion is None:
            raise EmotionBenchImportError(f"{fname}: column {column!r}: unknown emotion {evoked[1]!r}")
        key = (emotion, int(evoked[2]) + 1, int(evoked[3]) + 1)
        text = _strip_situation_prompt(frame[column].iloc[0])
        if not text:
            raise EmotionBenchImportError(f"{fname}: row 2, column {column!r}: no situation text")
        known = texts.get(key)
        if known is None:
            texts[key] = (text, fname)
        elif _normalise_text(known[0]) != _normalise_text(text):
            raise EmotionBenchImportError(
                f"{fname}: row 2, column {column!r}: the situation text differs from the one in {known[1]}"
            )
        subject.runs.append(
            ParsedRun(
                phase=QuestionnaireRun.Phase.EVOKED,
                published_key=key,
                subject_key=None,
                run_index=int(evoked[4]),
                item_order=orders[order_index],
                values=values,
            )
        )
    if blank_columns:
        subject.skipped.append(
            f"{len(blank_columns)} blank answer columns not imported (no answers in the file): "
            + _summarise_columns(blank_columns)
        )
    return subject


def _summarise_columns(columns: list[str]) -> str:
    """'Jealousy-0_scenario-4 (tests 0-9), ...' for a list of result columns."""
    groups: dict[str, list[int]] = defaultdict(list)
    for column in columns:
        match = re.match(r"^(.*)_test-(\d+)_order-\d+$", column)
        if match:
            groups[match[1]].append(int(match[2]))
        else:
            groups[column].append(-1)
    parts = []
    for name, tests in groups.items():
        tests = sorted(t for t in tests if t >= 0)
        if not tests:
            parts.append(name)
        elif tests == list(range(tests[0], tests[-1] + 1)) and len(tests) > 1:
            parts.append(f"{name} (tests {tests[0]}-{tests[-1]})")
        else:
            parts.append(f"{name} (tests {', '.join(map(str, tests))})")
    return "; ".join(parts)


def crowd_results_parse_xlsx(
    *, path: Path, instrument: Instrument
) -> tuple[ParsedSubject, set[PublishedKey]]:
    """Parse crowd.xlsx, sheet Raw (never the Summary sheet, which has known errors).

    Layout: row 1 = `Emotion_F<f>S<s>` per subject column (from column C); rows 2-6 demographics; rows 7..
    the instrument before (current feeling) and the rows after it the instrument after imagining the
    situation, both in the published item order 1..n. Every answer must be a whole number in range; an error
    names the cell (e.g. `crowd.xlsx Raw!D9`).
    """
    from openpyxl import load_workbook
    from openpyxl.utils import get_column_letter

    fname = Path(path).name
    try:
        workbook = load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds for a non-workbook file
        raise EmotionBenchImportError(f"{fname}: cannot read as a workbook: {exc}") from exc
    if "Raw" not in workbook.sheetnames:
        raise EmotionBenchImportError(f"{fname}: no sheet 'Raw' (sheets: {workbook.sheetnames})")
    rows = list(workbook["Raw"].iter_rows(values_only=True))
    workbook.close()
    n_items = instrument.items.count()
    # 0-based row of the first answer. Rows 2-6 (demographics) are not imported: no participant backs these
    # subjects, and the analysis does not use them.
    first_item_row = 6
    needed = first_item_row + 2 * n_items
    if len(rows) < needed:
        raise EmotionBenchImportError(f"{fname} Raw: {len(rows)} rows; expected at least {needed}")
    items = {i.number: i.text for i in instrument.items.all()}
    for block in range(2):
        for i in range(n_items):
            r = first_item_row + block * n_items + i
            label = rows[r][1] if len(rows[r]) > 1 else None
            if label is None or not str(label).strip().casefold().endswith(items[i + 1].casefold()):
                raise EmotionBenchImportError(
                    f"{fname} Raw!B{r + 1}: {label!r} is not item {i + 1} ({items[i + 1]!r}) of {instrument.name}"
                )
    header = rows[0]
    subject = ParsedSubject(
        condition_name="human",
        condition_label="Human (crowd)",
        kind=Condition.Kind.HUMAN,
        runs=[],
        source_file=fname,
    )
    keys: set[PublishedKey] = set()
    order = list(range(1, n_items + 1))
    for c in range(2, len(header)):
        head = header[c]
        if head is None or str(head).strip() == "":
            continue
        letter = get_column_letter(c + 1)
        match = _CROWD_HEADER_RE.match(str(head).strip())
        if not match:
            raise EmotionBenchImportError(f"{fname} Raw!{letter}1: {head!r} is not <Emotion>_F<f>S<s>")
        emotion = emotion_canonical(name=match[1])
        if emotion is None:
            raise EmotionBenchImportError(f"{fname} Raw!{letter}1: unknown emotion {match[1]!r}")
        key = (emotion, int(match[2]), int(match[3]))
        keys.add(key)
        blocks = []
        for block in range(2):
            values = []
            for i in range(n_items):
                r = first_item_row + block * n_items + i
                cell = rows[r][c] if c < len(rows[r]) else None
                if isinstance(cell, float) and cell.is_integer():
                    cell = int(cell)
                if isinstance(cell, str) and cell.strip().lstrip("-").isdigit():
                    cell = int(cell.strip())
                if not isinstance(cell, int) or isinstance(cell, bool):
                    raise EmotionBenchImportError(
                        f"{fname} Raw!{letter}{r + 1}: {cell!r} is not a whole number"
                    )
                if not instrument.scale_min <= cell <= instrument.scale_max:
                    raise EmotionBenchImportError(
                        f"{fname} Raw!{letter}{r + 1}: {cell} is outside {instrument.scale_min}..{instrument.scale_max}"
                    )
                values.append(cell)
            blocks.append(values)
        subject_key = f"crowd-{letter}"
        subject.runs.append(ParsedRun(QuestionnaireRun.Phase.DEFAULT, None, subject_key, 0, order, blocks[0]))
        subject.runs.append(ParsedRun(QuestionnaireRun.Phase.EVOKED, key, subject_key, 0, order, blocks[1]))
    if not subject.runs:
        raise EmotionBenchImportError(f"{fname} Raw: no subject columns (expected headers from column C)")
    return subject, keys


@dataclass
class ResultsImportSummary:
    study: Study
    conditions: dict[str, int] = field(default_factory=dict)  # name → runs imported
    situations_matched: int = 0
    situations_added: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"study {self.study.slug}: {sum(self.conditions.values())} runs imported"]
        out += [f"  {name}: {n} runs" for name, n in self.conditions.items()]
        out.append(
            f"situations: {self.situations_matched} matched the pool by text, "
            f"{len(self.situations_added)} added with the text shown in the published files"
        )
        out += [f"  added {code}" for code in self.situations_added]
        out += self.notes
        return out


def published_results_import(
    *,
    study_slug: str,
    folder: Path,
    title: str = "EmotionBench published results",
    instrument_name: str = "PANAS",
) -> ResultsImportSummary:
    """Load the published PANAS answers of the LLMs and of the crowd as conditions of a questionnaire study.

    Reads `<folder>/results/PANAS Test/*-PANAS-testing.csv` (one condition per model) and `crowd.xlsx` sheet Raw
    (condition `human`). Everything is parsed and validated first; then, in one transaction, the study is
    created if new, its imported runs of these conditions are replaced (a re-import gives the same rows),
    situations are matched (see the module docstring), and runs and answers are bulk-inserted.
    Skipped columns and files missing situations other files have are reported in the summary, never silently
    dropped.
    """
    instrument = Instrument.objects.filter(name=instrument_name).first()
    if instrument is None:
        raise EmotionBenchImportError(
            f"instrument {instrument_name!r} is not imported; run `manage.py import_instruments questionnaires.json`"
        )
    if not Situation.objects.exists():
        raise EmotionBenchImportError(
            "no situations; run `manage.py import_situations situations.json` first"
        )
    folder = Path(folder)
    panas_dir = next(
        (d for d in (folder / "results" / "PANAS Test", folder / "PANAS Test", folder) if d.is_dir()), None
    )
    if panas_dir is None:
        raise EmotionBenchImportError(f"{folder}: not a folder")
    csv_files = sorted(panas_dir.glob(f"*-{instrument.name}-testing.csv"))
    crowd_path = panas_dir / "crowd.xlsx"
    if not csv_files and not crowd_path.exists():
        raise EmotionBenchImportError(
            f"{panas_dir}: no *-{instrument.name}-testing.csv files and no crowd.xlsx found"
        )
    texts: dict[PublishedKey, tuple[str, str]] = {}
    subjects = [llm_results_parse_csv(path=p, instrument=instrument, texts=texts) for p in csv_files]
    crowd_keys: set[PublishedKey] = set()
    if crowd_path.exists():
        crowd, crowd_keys = crowd_results_parse_xlsx(path=crowd_path, instrument=instrument)
        subjects.append(crowd)
    missing_text = sorted(crowd_keys - set(texts))
    if missing_text:
        raise EmotionBenchImportError(
            f"crowd.xlsx names situations no LLM answer file shows the text of: "
            f"{', '.join(f'{e}_F{f}S{s}' for e, f, s in missing_text[:10])}; put the answer files beside it"
        )
    _note_missing_runs(subjects)
    with transaction.atomic():
        return _results_write(
            study_slug=study_slug, title=title, instrument=instrument, subjects=subjects, texts=texts
        )


def challenging_results_import(*, study_slug: str, folder: Path) -> list[ResultsImportSummary]:
    """Load `<folder>/results/Challenging Bench/<model>-<instrument>-testing.csv` (EmotionBench's
    emotion-specific scales), one questionnaire study per instrument, `<study_slug>-<instrument>`.

    Every file is validated first (each instrument must be imported); then all studies are written in one
    transaction, with the same rules as `published_results_import`.
    """
    folder = Path(folder)
    bench = next(
        (d for d in (folder / "results" / "Challenging Bench", folder / "Challenging Bench") if d.is_dir()),
        None,
    )
    if bench is None:
        raise EmotionBenchImportError(f"{folder}: no 'results/Challenging Bench' folder")
    if not Situation.objects.exists():
        raise EmotionBenchImportError(
            "no situations; run `manage.py import_situations situations.json` first"
        )
    instruments = {i.name: i for i in Instrument.objects.exclude(name="PANAS")}
    plans: dict[str, tuple[Instrument, list[ParsedSubject], dict]] = {}
    for path in sorted(bench.glob("*-testing.csv")):
        instrument = next(
            (
                i
                for name, i in sorted(instruments.items(), key=lambda kv: -len(kv[0]))
                if path.name.endswith(f"-{name}-testing.csv")
            ),
            None,
        )
        if instrument is None:
            raise EmotionBenchImportError(
                f"{path.name}: no imported instrument matches its name (imported: {', '.join(sorted(instruments))})"
            )
        _, subjects, texts = plans.setdefault(instrument.name, (instrument, [], {}))
        subjects.append(llm_results_parse_csv(path=path, instrument=instrument, texts=texts))
    if not plans:
        raise EmotionBenchImportError(f"{bench}: no *-testing.csv files")
    summaries = []
    with transaction.atomic():
        for name, (instrument, subjects, texts) in plans.items():
            _note_missing_runs(subjects)
            slug = f"{study_slug}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}"
            summaries.append(
                _results_write(
                    study_slug=slug,
                    title=f"EmotionBench published results: {name}",
                    instrument=instrument,
                    subjects=subjects,
                    texts=texts,
                )
            )
    return summaries


def _results_write(
    *,
    study_slug: str,
    title: str,
    instrument: Instrument,
    subjects: list[ParsedSubject],
    texts: dict[PublishedKey, tuple[str, str]],
) -> ResultsImportSummary:
    """Write parsed published runs into a study (inside the caller's transaction)."""
    summary = ResultsImportSummary(study=None)  # type: ignore[arg-type]
    now = timezone.now()
    study = _study_for_results(slug=study_slug, title=title, instrument=instrument)
    summary.study = study
    situation_for = _situations_for_published(texts=texts, summary=summary)
    StudySituation.objects.bulk_create(
        [StudySituation(study=study, situation=s) for s in situation_for.values()], ignore_conflicts=True
    )
    for position, subject in enumerate(subjects):
        condition, _ = Condition.objects.get_or_create(
            study=study,
            name=subject.condition_name,
            defaults={
                "label": subject.condition_label,
                "kind": subject.kind,
                "is_baseline": subject.kind == Condition.Kind.HUMAN,
                "position": 0 if subject.kind == Condition.Kind.HUMAN else position + 1,
            },
        )
        QuestionnaireAnswer.objects.filter(
            run__condition=condition, run__source=QuestionnaireRun.Source.IMPORTED
        ).delete()
        QuestionnaireRun.objects.filter(condition=condition, source=QuestionnaireRun.Source.IMPORTED).delete()
        runs = []
        for parsed in subject.runs:
            situation = situation_for[parsed.published_key] if parsed.published_key else None
            runs.append(
                QuestionnaireRun(
                    study=study,
                    condition=condition,
                    subject_key=parsed.subject_key or situation.code,
                    phase=parsed.phase,
                    situation=situation,
                    run_index=parsed.run_index,
                    item_order=parsed.item_order,
                    source=QuestionnaireRun.Source.IMPORTED,
                    completed_at=now,
                )
            )
        QuestionnaireRun.objects.bulk_create(runs, batch_size=2000)
        answers_insert(
            rows=[
                (run.pk, item, value, pos + 1)
                for run, parsed in zip(runs, subject.runs, strict=True)
                for pos, (item, value) in enumerate(zip(parsed.item_order, parsed.values, strict=True))
            ]
        )
        summary.conditions[condition.name] = len(runs)
        summary.notes += [f"{subject.source_file}: {note}" for note in subject.skipped]
    return summary


def answers_insert(*, rows: list[tuple[int, int, int, int]]) -> None:
    """Insert (run id, item number, value, position) answer rows in bulk.

    On PostgreSQL one INSERT ... SELECT FROM unnest(arrays) per 50,000 rows: the published results are
    ~330,000 answers, and building a model instance per answer costs ten times the insert itself.
    Elsewhere (the SQLite of a local run) plain bulk_create.
    """
    if connection.vendor != "postgresql":
        QuestionnaireAnswer.objects.bulk_create(
            [QuestionnaireAnswer(run_id=r, item_number=i, value=v, position=p) for r, i, v, p in rows],
            batch_size=5000,
        )
        return
    table = QuestionnaireAnswer._meta.db_table
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 50_000):
            chunk = rows[start : start + 50_000]
            cursor.execute(
                f"INSERT INTO {table} (run_id, item_number, value, position) "
                "SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::smallint[], %s::smallint[])",
                [list(column) for column in zip(*chunk, strict=True)],
            )


def _note_missing_runs(subjects: list[ParsedSubject]) -> None:
    """Record, per LLM file, the runs other files have and it lacks (e.g. llama2-7b's Jealousy columns)."""
    llm = [s for s in subjects if s.kind == Condition.Kind.LLM]
    design: set[tuple] = set()
    for subject in llm:
        design |= {(r.phase, r.published_key, r.run_index) for r in subject.runs} | subject.blank
    for subject in llm:
        have = {(r.phase, r.published_key, r.run_index) for r in subject.runs}
        missing = design - have - subject.blank
        if not missing:
            continue
        by_key: dict[str, list[int]] = defaultdict(list)
        for _phase, key, index in missing:
            name = "General" if key is None else f"{key[0]}-{key[1] - 1}_scenario-{key[2] - 1}"
            by_key[name].append(index)
        if by_key:
            columns = [f"{name}_test-{i}_order-0" for name, indexes in by_key.items() for i in indexes]
            subject.skipped.append(
                f"{len(columns)} columns that other answer files have are missing from this file: "
                + _summarise_columns(sorted(columns))
            )


def _study_for_results(*, slug: str, title: str, instrument: Instrument) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        study = Study.objects.create(
            slug=slug,
            title=title,
            kind=QUESTIONNAIRE.name,
            platform=Study.Platform.NONE,
            description="Published EmotionBench answers (Huang et al., NeurIPS 2024), imported as a reference.",
        )
        QuestionnaireSettings.objects.create(study=study, instrument=instrument)
        return study
    if study.kind != QUESTIONNAIRE.name:
        raise EmotionBenchImportError(f"study {slug!r} is a {study.kind} study, not a questionnaire study")
    settings = QUESTIONNAIRE.settings(study)
    if settings.instrument_id is None:
        settings.instrument = instrument
        settings.save(update_fields=["instrument"])
    elif settings.instrument_id != instrument.pk:
        raise EmotionBenchImportError(
            f"study {slug!r} uses instrument {settings.instrument.name!r}, not {instrument.name!r}"
        )
    return study


def _situations_for_published(
    *, texts: dict[PublishedKey, tuple[str, str]], summary: ResultsImportSummary
) -> dict[PublishedKey, Situation]:
    """Map each published situation to a Situation: same text in the same emotion and factor, else a new one
    with the text shown, appended to that factor (see the module docstring)."""
    pool: dict[tuple[str, int], list[Situation]] = defaultdict(list)
    for situation in Situation.objects.all():
        pool[(situation.emotion, situation.factor_index)].append(situation)
    result: dict[PublishedKey, Situation] = {}
    for key in sorted(texts):
        emotion, factor, _ = key
        text = texts[key][0]
        candidates = pool.get((emotion, factor))
        if not candidates:
            raise EmotionBenchImportError(
                f"{texts[key][1]}: situation {emotion}-{factor - 1}: the pool has no factor {factor} of {emotion}"
                " (import situations.json first)"
            )
        wanted = _normalise_text(text)
        match = next((s for s in candidates if _normalise_text(s.text) == wanted), None)
        if match is None:
            match = Situation.objects.create(
                emotion=emotion,
                factor_index=factor,
                factor_name=candidates[0].factor_name,
                index=max(s.index for s in candidates) + 1,
                text=text,
            )
            candidates.append(match)
            summary.situations_added.append(
                f"{match.code} for published {emotion}-{factor - 1}_scenario-{key[2] - 1}"
            )
        else:
            summary.situations_matched += 1
        result[key] = match
    return result
