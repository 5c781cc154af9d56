"""EmotionBench's published answer files (models' CSVs, the crowd's workbook), read and checked before anything
is written (see the package docstring for how published situations are matched)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from studies.emotionbench.data import (
    SITUATION_PROMPT_PREFIX,
    EmotionBenchImportError,
    emotion_canonical,
    normalise_text,
)
from studies.models import (
    Condition,
    Instrument,
    QuestionnaireRun,
)

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
        elif normalise_text(known[0]) != normalise_text(text):
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
            + summarise_columns(blank_columns)
        )
    return subject


def summarise_columns(columns: list[str]) -> str:
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
