"""The form every kind's power panel shares (the launch page and the quotas step): one field per compared
condition holding the researcher's own assumptions as percentages, sent back by GET so the panel is recomputed on
them, each field saying where its value came from (the defaults say so until something is typed).

What the percentages mean is the kind's: the rating kind's are the expected shares of its scale's values
(kinds/rating/launch_power.py), the pairwise kind's the smallest win rate against 50 % worth detecting and the tie
rate (kinds/pairwise/launch_power.py). The kind reads the fields with `typed_percentages`, checks the numbers'
meaning itself, fills the fields with `power_form_inputs` and renders `analysis/_power_form.html` inside its panel.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

TYPED = "typed on this page"


def typed_percentages(query: Mapping[str, str], prefix: str) -> tuple[dict[str, list[float]], list[str]]:
    """The numbers typed in the query's `<prefix><condition>` fields ({condition: [percent, …]}; commas, semicolons
    or spaces between them, a trailing % allowed), and what is wrong with any field (each named, left out).
    Blank fields are left out."""
    typed: dict[str, list[float]] = {}
    errors: list[str] = []
    for key, text in query.items():
        if not key.startswith(prefix) or not str(text).strip():
            continue
        name = key[len(prefix) :]
        try:
            values = [float(part.rstrip("%")) for part in re.split(r"[,;\s]+", str(text).strip()) if part]
        except ValueError:
            errors.append(f"{name}: “{text}” is not a list of percentages")
            continue
        if not values:
            errors.append(f"{name}: “{text}” is not a list of percentages")
            continue
        typed[name] = values
    return typed, errors


def percent_text(values: Sequence[float]) -> str:
    """Fractions as the field shows them: percentages with one decimal at most ("7.1, 28.1, 64.8")."""
    return ", ".join(f"{100 * v:.1f}".removesuffix(".0") for v in values)


def power_form_inputs(
    *, prefix: str, values: Mapping[str, Sequence[float]], sources: Mapping[str, str], unit: str = "%"
) -> list[dict]:
    """The form's one field per condition, filled with the fractions in use (shown as percentages), labelled
    "<condition> (<unit>)"."""
    return [
        {
            "condition": name,
            "label": f"{name} ({unit})",
            "field": prefix + name,
            "value": percent_text(fractions),
            "source": sources[name],
        }
        for name, fractions in values.items()
    ]
