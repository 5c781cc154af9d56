"""A Psych-DS check of a bundle's folder, by the specification's rules (the official validator is a JavaScript
package that cannot be installed here): `dataset_description.json` with its required fields, `variableMeasured`
naming every column of every data file, data files under data/ named by key-value parts ending in `_data.csv`
(keys from the specification's list), UTF-8 CSVs whose rows all have the header's length, and a unique `row_id`."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

KEYS = {"study", "site", "subject", "session", "task", "condition", "trial", "stimulus", "description"}
NAME = re.compile(r"^(?:[a-z]+-[a-zA-Z0-9]+_)+data\.csv$")
REQUIRED = ("@context", "@type", "name", "description", "variableMeasured")


def psychds_problems(root: Path) -> list[str]:
    problems: list[str] = []
    try:
        description = json.loads((root / "dataset_description.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"dataset_description.json: {exc}"]
    problems += [f"dataset_description.json: no {field}" for field in REQUIRED if not description.get(field)]
    if "schema.org" not in str(description.get("@context", "")) or description.get("@type") != "Dataset":
        problems.append("dataset_description.json: not a schema.org Dataset")
    measured = set()
    for variable in description.get("variableMeasured", []):
        if isinstance(variable, str):
            measured.add(variable)
        elif variable.get("@type") == "PropertyValue" and variable.get("name"):
            measured.add(variable["name"])
        else:
            problems.append(f"variableMeasured: {variable!r} is neither a name nor a named PropertyValue")
    files = sorted((root / "data").rglob("*")) if (root / "data").is_dir() else []
    if not any(f.suffix == ".csv" for f in files):
        problems.append("data/: no data file")
    for path in files:
        if path.is_dir():
            continue
        name = path.name
        if not NAME.match(name):
            problems.append(f"{name}: not named key-value_…_data.csv")
            continue
        keys = [part.split("-", 1)[0] for part in name[: -len("_data.csv")].split("_")]
        problems += [f"{name}: unknown key '{key}'" for key in keys if key not in KEYS]
        if len(set(keys)) != len(keys):
            problems.append(f"{name}: a key repeats")
        problems += _csv_problems(path, measured)
    return problems


def _csv_problems(path: Path, measured: set[str]) -> list[str]:
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        return [f"{path.name}: starts with a byte-order mark"]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [f"{path.name}: not UTF-8 ({exc})"]
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        return [f"{path.name}: empty (no header)"]
    header, body = rows[0], rows[1:]
    problems = [f"{path.name}: column '{c}' not in variableMeasured" for c in header if c not in measured]
    if len(set(header)) != len(header):
        problems.append(f"{path.name}: a column name repeats")
    problems += [
        f"{path.name}: row {i} has {len(row)} cells, the header {len(header)}"
        for i, row in enumerate(body, start=2)
        if len(row) != len(header)
    ]
    if "row_id" not in header:
        problems.append(f"{path.name}: no row_id column")
    else:
        ids = [row[header.index("row_id")] for row in body]
        if len(set(ids)) != len(ids) or "" in ids:
            problems.append(f"{path.name}: row_id is not unique")
    return problems
