"""Reading an LLM subject's answers to a questionnaire: one in-range number per item, in any reasonable layout."""

from __future__ import annotations

import json
import re


class ReplyParseError(ValueError):
    """A reply that does not give exactly one in-range number per item."""


# --- Parsing replies ------------------------------------------------------------------------------------

_NUMBER = r"-?\d+(?:\.\d+)?"


def _as_int(token: str, lo: int, hi: int, where: str) -> int:
    value = float(token)
    if not value.is_integer():
        raise ReplyParseError(f"{where}: {token} is not a whole number")
    value = int(value)
    if not lo <= value <= hi:
        raise ReplyParseError(f"{where}: {value} is outside {lo}..{hi}")
    return value


def _label_position(label: str, labels: list[str]) -> int | None:
    label = re.sub(r"[^a-z ]", "", label.casefold()).strip()
    for position, candidate in enumerate(labels, start=1):
        if label and label == re.sub(r"[^a-z ]", "", candidate.casefold()).strip():
            return position
    return None


def _collect(pairs: list[tuple[int, int]], n: int) -> list[int]:
    by_position: dict[int, int] = {}
    for position, value in pairs:
        if not 1 <= position <= n:
            raise ReplyParseError(f"item {position} does not exist (1..{n})")
        if position in by_position and by_position[position] != value:
            raise ReplyParseError(f"item {position} has two answers ({by_position[position]} and {value})")
        by_position[position] = value
    missing = [p for p in range(1, n + 1) if p not in by_position]
    if missing:
        raise ReplyParseError(f"no answer for items {missing}")
    return [by_position[p] for p in range(1, n + 1)]


def _parse_json(text: str, labels: list[str], lo: int, hi: int) -> list[int] | None:
    match = re.search(r"(\{.*\}|\[.*\])", text, re.DOTALL)
    if not match:
        return None
    try:
        data = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    n = len(labels)
    if isinstance(data, list):
        if len(data) != n or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in data):
            raise ReplyParseError(f"a JSON list of {len(data)} values for {n} items")
        return [_as_int(str(v), lo, hi, f"item {i + 1}") for i, v in enumerate(data)]
    if isinstance(data, dict):
        pairs = []
        for key, value in data.items():
            key_text = str(key).strip()
            position = int(key_text) if key_text.isdigit() else _label_position(key_text, labels)
            if position is None:
                raise ReplyParseError(f"JSON key {key!r} is neither an item number nor an item")
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ReplyParseError(f"JSON value for {key!r} is not a number")
            pairs.append((position, _as_int(str(value).strip(), lo, hi, f"item {key}")))
        return _collect(pairs, n)
    return None


def reply_parse(*, text: str, labels: list[str], scale_min: int, scale_max: int) -> list[int]:
    """The answers of a reply, by the position the items were shown in (labels in that order).

    Accepts: a JSON object (keys = positions or item labels) or list; lines like "1. 3", "1) 3", "1: 3",
    "1. Interested: 3", "Interested - 3", "1. Interested (3)"; or exactly n numbers in a row ("3, 4, 1, ...").
    Rejects (ReplyParseError, with the reason): a missing item, two different answers to one item, a value out
    of range or not whole, and anything else that does not give exactly one number per item.
    """
    n, lo, hi = len(labels), scale_min, scale_max
    parsed = _parse_json(text, labels, lo, hi)
    if parsed is not None:
        return parsed
    pairs: list[tuple[int, int]] = []
    numbered = re.compile(r"^\s*[-*•]?\s*(?:item\s*)?(\d+)\s*[.):\]-]\s*(.*)$", re.IGNORECASE)
    for raw_line in text.splitlines():
        line = raw_line.strip().strip("*").strip()
        if not line:
            continue
        match = numbered.match(line)
        if match:
            position, rest = int(match.group(1)), match.group(2)
            numbers = re.findall(_NUMBER, rest)
            if len(numbers) == 1:
                pairs.append((position, _as_int(numbers[0], lo, hi, f"item {position}")))
                continue
            if len(numbers) > 1:
                raise ReplyParseError(f"line {line!r} gives more than one number for item {position}")
            continue
        labelled = re.match(rf"^\s*([A-Za-z][A-Za-z \-]*?)\s*[:=\-(]\s*({_NUMBER})\s*\)?\s*$", line)
        if labelled:
            position = _label_position(labelled.group(1), labels)
            if position is not None:
                pairs.append((position, _as_int(labelled.group(2), lo, hi, labelled.group(1))))
    if pairs:
        return _collect(pairs, n)
    numbers = re.findall(_NUMBER, text)
    if len(numbers) == n:
        return [_as_int(v, lo, hi, f"item {i + 1}") for i, v in enumerate(numbers)]
    raise ReplyParseError(f"found {len(numbers)} numbers and no item-by-item answers for {n} items")
