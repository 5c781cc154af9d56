"""The exclusion rules, each declared once, as a predicate over one participant's aggregate, and the three forms
derived from the declarations: pandas (a column over a frame of participants), Python (one participant, for
streamed exports) and SQL (the rating export's COPY, kinds/rating/export_sql.py).

A participant's aggregate (`AGGREGATES`): `flagged` (the attention-check flag), `status`, `failures` (attention
failures), `unauthentic` (the stored authenticity verdict), `median_ms` (median response time; missing when no
time was recorded), `n` (answers) and `n_distinct` (distinct values). A rule (`RULES`) is a function of
(`ops`, rules) returning a predicate built only from `ops`' operations; a missing value never satisfies a
comparison, in every form. Adding a rule here adds it to all three forms at once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import TYPE_CHECKING, Any

import pandas as pd

from studies.models import Participant

if TYPE_CHECKING:
    from analysis.exclusions import ExclusionRules

INCOMPLETE_STATUSES = frozenset(
    {Participant.Status.ACTIVE, Participant.Status.RETURNED, Participant.Status.TIMED_OUT}
)
AGGREGATES = ("flagged", "status", "failures", "unauthentic", "median_ms", "n", "n_distinct")


def _attention_checks(ops, rules: ExclusionRules):
    return ops.true("flagged") if rules.attention_checks else ops.never()


def _incomplete(ops, rules: ExclusionRules):
    return ops.one_of("status", sorted(INCOMPLETE_STATUSES)) if rules.incomplete else ops.never()


def _too_fast(ops, rules: ExclusionRules):
    if rules.min_median_response_ms is None:
        return ops.never()
    return ops.below("median_ms", float(rules.min_median_response_ms))  # no times recorded: never too fast


def _straight_lining(ops, rules: ExclusionRules):
    if rules.straight_lining_min_items is None:
        return ops.never()
    identical = ops.all(ops.at_least("n", int(rules.straight_lining_min_items)), ops.equal("n_distinct", 1))
    if rules.straight_lining_identical_alone:
        return identical
    # Identical answers count only when corroborated: a failed attention check, or a fast median time.
    corroborated = ops.any(
        ops.above("failures", 0), ops.below("median_ms", float(rules.straight_lining_corroborating_ms))
    )
    return ops.all(identical, corroborated)


def _authenticity(ops, rules: ExclusionRules):
    # The stored verdict (ParticipantAuthenticity.excluded); none stored: never excluded.
    return ops.true("unauthentic") if rules.authenticity else ops.never()


RULES: dict[str, Callable[[Any, ExclusionRules], Any]] = {
    "attention_checks": _attention_checks,
    "incomplete": _incomplete,
    "too_fast": _too_fast,
    "straight_lining": _straight_lining,
    "authenticity": _authenticity,
}


class PandasOps:
    """Predicates as boolean Series over a frame with one row per participant and a column per aggregate."""

    def __init__(self, per: pd.DataFrame):
        self.per = per

    def never(self):
        return pd.Series(False, index=self.per.index)

    def true(self, name):
        return self.per[name].fillna(False).astype(bool)

    def one_of(self, name, values):
        return self.per[name].isin(values)

    def below(self, name, value):
        return self.per[name] < value  # NaN compares False

    def above(self, name, value):
        return self.per[name] > value

    def at_least(self, name, value):
        return self.per[name] >= value

    def equal(self, name, value):
        return self.per[name] == value

    def all(self, *parts):
        return reduce(lambda a, b: a & b, parts)

    def any(self, *parts):
        return reduce(lambda a, b: a | b, parts)


class OneOps:
    """Predicates as booleans over one participant's aggregate (a dict)."""

    def __init__(self, one: dict):
        self.one = one

    def never(self):
        return False

    def true(self, name):
        return bool(self.one[name])

    def one_of(self, name, values):
        return self.one[name] in values

    def _compare(self, name, test):
        value = self.one[name]
        return value is not None and bool(test(value))

    def below(self, name, value):
        return self._compare(name, lambda v: v < value)

    def above(self, name, value):
        return self._compare(name, lambda v: v > value)

    def at_least(self, name, value):
        return self._compare(name, lambda v: v >= value)

    def equal(self, name, value):
        return self._compare(name, lambda v: v == value)

    def all(self, *parts):
        return all(parts)

    def any(self, *parts):
        return any(parts)


class SqlOps:
    """Predicates as (SQL, parameters) over the per-participant aggregate `f` (its columns: AGGREGATES)."""

    def _column(self, name):
        if name not in AGGREGATES:
            raise KeyError(f"no aggregate {name!r} in SQL (known: {AGGREGATES})")
        return f"f.{name}"

    def never(self):
        return "false", []

    def true(self, name):
        return f"COALESCE({self._column(name)}, false)", []

    def one_of(self, name, values):
        return f"{self._column(name)} IN ({', '.join(['%s'] * len(values))})", list(values)

    def _compare(self, name, operator, value):
        return f"COALESCE({self._column(name)} {operator} %s, false)", [value]

    def below(self, name, value):
        return self._compare(name, "<", value)

    def above(self, name, value):
        return self._compare(name, ">", value)

    def at_least(self, name, value):
        return self._compare(name, ">=", value)

    def equal(self, name, value):
        return self._compare(name, "=", value)

    def _join(self, word, parts):
        return "(" + f" {word} ".join(sql for sql, _ in parts) + ")", [
            p for _, params in parts for p in params
        ]

    def all(self, *parts):
        return self._join("AND", parts)

    def any(self, *parts):
        return self._join("OR", parts)


def flags_frame(per: pd.DataFrame, rules: ExclusionRules) -> dict[str, pd.Series]:
    """Each rule's column over a frame of participants' aggregates."""
    ops = PandasOps(per)
    return {name: rule(ops, rules).astype(bool) for name, rule in RULES.items()}


def flags_one(one: dict, rules: ExclusionRules) -> dict[str, bool]:
    """Each rule's verdict on one participant's aggregate."""
    ops = OneOps(one)
    return {name: bool(rule(ops, rules)) for name, rule in RULES.items()}


def flags_sql(rules: ExclusionRules) -> dict[str, tuple[str, list]]:
    """Each rule's (SQL, parameters) over the aggregate `f`."""
    ops = SqlOps()
    return {name: rule(ops, rules) for name, rule in RULES.items()}
