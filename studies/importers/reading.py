"""The one rule every importer reads its files by: UTF-8 text, not empty, and no NUL byte in any cell.

A NUL byte (0x00) cannot be stored in PostgreSQL's text (the import would die with a raw error) and on
SQLite it silently makes `rater0001` and `rater0001\\x00` two different ids; a file full of them is usually
not a text file at all (a spreadsheet saved in another format, or UTF-16). So every importer refuses it, with
the row and the column of each cell that holds one, before anything is written:

* CSV files (the corpus, its ratings, pairwise votes, EmotionBench results): `csv_text`, or `text_decode`
  then `csv_nul_check` when the importer chooses the CSV dialect after reading the header. The header is
  row 1, as in a spreadsheet; the column is the header's name (or its number, for a cell past the header).
* JSON files (EmotionBench instruments and situations): `json_read`, each string's place as a JSON path
  (``$[0].items[3]``).

Spreadsheets (.xlsx) cannot hold a NUL: their XML refuses it before we read it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass

NUL = "\x00"
NUL_MESSAGE = (
    "contains a NUL byte (0x00), which cannot be stored: is the file a text CSV? (a spreadsheet saved in "
    "another format, or UTF-16?) Save it as UTF-8"
)
MAX_REPORTED_ERRORS = 50


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


def text_decode(data: bytes) -> str:
    """The file's text (UTF-8, its byte-order mark dropped); refused when empty or not UTF-8. NUL bytes are
    left for the format's own check, which can say in which cell they are."""
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


def csv_nul_check(text: str, *, quoting: int = csv.QUOTE_MINIMAL) -> None:
    """Refuses a CSV text with a NUL byte, naming the row and column of each cell that holds one."""
    if NUL not in text:
        return
    problems: list[ImportProblem] = []
    header: list[str] = []
    reader = csv.reader(io.StringIO(text, newline=""), quoting=quoting, strict=False)
    for row, fields in enumerate(reader, start=1):
        if row == 1:
            header = [f.strip() for f in fields]
        for index, value in enumerate(fields):
            if NUL in value:
                name = header[index] if row > 1 and index < len(header) else f"{index + 1}"
                problems.append(ImportProblem(NUL_MESSAGE, row=row, column=name.replace(NUL, "\\x00")))
    raise CorpusImportError(problems or [ImportProblem(NUL_MESSAGE)])


def csv_text(data: bytes) -> str:
    """A CSV file's text by the rule above (comma-separated, quoted as spreadsheets quote)."""
    text = text_decode(data)
    csv_nul_check(text)
    return text


def _nul_paths(value, path: str) -> Iterable[str]:
    if isinstance(value, str):
        if NUL in value:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            if NUL in str(key):
                yield f"{path} (a key)"
            yield from _nul_paths(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nul_paths(item, f"{path}[{index}]")


def json_read(data: bytes):
    """A JSON file's value by the rule above; a string holding a NUL (``\\u0000``) is refused with its path."""
    text = text_decode(data)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusImportError(
            [ImportProblem(f"not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}")]
        ) from None
    paths = list(_nul_paths(value, "$"))
    if paths:
        raise CorpusImportError([ImportProblem(f"at {path}: {NUL_MESSAGE}") for path in paths])
    return value
