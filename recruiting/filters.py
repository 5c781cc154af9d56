"""Prolific's audience filters (prescreeners) of a linked study, written one per line in the admin and sent as the
study's `filters` when it is created on Prolific.

A line is `filter_id = choice, choice` (Prolific's `selected_values`: the ids of the answers to keep, as Prolific's
filter list names them) or `filter_id = lower..upper` (its `selected_range`, either end may be left out):

    age = 18..65
    current-country-of-residence = 1, 2

`filters_parse` turns the lines into Prolific's list, refusing the whole text with the line at fault (nothing is
kept of a text with one bad line); `filters_text` writes a stored list back as lines.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

FILTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _number(text: str, line_no: int) -> int | float | None:
    text = text.strip()
    if not text:
        return None
    if not NUMBER.fullmatch(text):
        raise ValidationError(
            f"Line {line_no}: {text!r} is not a number (a range is lower..upper, e.g. 18..65)."
        )
    return float(text) if "." in text else int(text)


def filters_parse(text: str) -> list[dict]:
    """Prolific's `filters` from the admin's lines; ValidationError naming the first bad line."""
    filters: list[dict] = []
    seen: set[str] = set()
    for line_no, raw in enumerate((text or "").splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not FILTER_ID.fullmatch(name) or not value:
            raise ValidationError(
                f"Line {line_no}: write filter_id = choice, choice or filter_id = lower..upper "
                "(e.g. age = 18..65)."
            )
        if name in seen:
            raise ValidationError(
                f"Line {line_no}: the filter {name} is given twice; keep one line per filter."
            )
        seen.add(name)
        if ".." in value:
            lower_text, _, upper_text = value.partition("..")
            lower, upper = _number(lower_text, line_no), _number(upper_text, line_no)
            if lower is None and upper is None:
                raise ValidationError(f"Line {line_no}: give at least one end of the range.")
            if lower is not None and upper is not None and lower > upper:
                raise ValidationError(f"Line {line_no}: the range's lower end is above its upper end.")
            span = {k: v for k, v in (("lower", lower), ("upper", upper)) if v is not None}
            filters.append({"filter_id": name, "selected_range": span})
        else:
            choices = [c.strip() for c in value.split(",")]
            if any(not c for c in choices):
                raise ValidationError(f"Line {line_no}: an empty choice between commas.")
            filters.append({"filter_id": name, "selected_values": choices})
    return filters


def filters_text(filters: list[dict]) -> str:
    """The stored filters as the admin's lines (filters_parse(filters_text(f)) == f)."""
    lines = []
    for item in filters or []:
        if "selected_range" in item:
            span = item["selected_range"]
            lower, upper = span.get("lower"), span.get("upper")
            lines.append(
                f"{item['filter_id']} = {'' if lower is None else lower}..{'' if upper is None else upper}"
            )
        else:
            lines.append(f"{item['filter_id']} = {', '.join(item['selected_values'])}")
    return "\n".join(lines)
