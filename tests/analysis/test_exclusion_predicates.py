"""The exclusion rules are declared once (analysis/exclusion_predicates.py): the pandas, per-participant and SQL
forms are derived from the declaration, agree rule by rule on every corner of the aggregates, and a rule added
to the declaration is in all three forms at once."""

import itertools

import pandas as pd
import pytest
from django.db import connection

from analysis import exclusion_predicates as predicates
from analysis.exclusions import RULE_NAMES, ExclusionRules

pytestmark = pytest.mark.django_db

# Every corner the rules look at: flagged or not, each status kind, failures, the verdict, no/slow/fast times,
# few or many answers, all identical or not.
CORNERS = [
    dict(zip(predicates.AGGREGATES, values, strict=True))
    for values in itertools.product(
        [False, True],
        ["completed", "active", "timed_out"],
        [0, 2],
        [None, False, True],
        [None, 900.0, 2500.0, 9000.0],
        [3, 12],
        [1, 3],
    )
]
RULE_SETS = [
    ExclusionRules(),
    ExclusionRules.none(),
    ExclusionRules(min_median_response_ms=1500.0, straight_lining_min_items=10, authenticity=True),
    ExclusionRules(straight_lining_min_items=10, straight_lining_identical_alone=True),
]


def _sql_verdicts(rules: ExclusionRules) -> list[dict[str, bool]]:
    """Each rule's SQL, run by PostgreSQL over the corners as the aggregate `f`."""
    forms = predicates.flags_sql(rules)
    names = list(forms)
    values = ", ".join(
        "(%s::boolean, %s::text, %s::int, %s::boolean, %s::float, %s::int, %s::int)" for _ in CORNERS
    )
    selects = ", ".join(sql for sql, _ in forms.values())
    params = [p for _, rule_params in forms.values() for p in rule_params]
    columns = ", ".join(predicates.AGGREGATES)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {selects} FROM (VALUES {values}) AS f({columns})",
            params + [corner[name] for corner in CORNERS for name in predicates.AGGREGATES],
        )
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _three_forms(rules: ExclusionRules):
    frame = predicates.flags_frame(pd.DataFrame(CORNERS), rules)
    pandas_form = [{name: bool(frame[name].iloc[i]) for name in frame} for i in range(len(CORNERS))]
    one_form = [predicates.flags_one(corner, rules) for corner in CORNERS]
    return pandas_form, one_form, _sql_verdicts(rules)


@pytest.mark.postgres
@pytest.mark.parametrize("rules", RULE_SETS, ids=["declared", "none", "strict", "identical-alone"])
def test_the_three_forms_agree_rule_by_rule(requires_postgres, rules):
    pandas_form, one_form, sql_form = _three_forms(rules)
    assert set(pandas_form[0]) == set(RULE_NAMES)
    for corner, a, b, c in zip(CORNERS, pandas_form, one_form, sql_form, strict=True):
        assert a == b == c, corner
    if rules.authenticity:  # not vacuous: every rule excludes someone here
        assert all(any(row[name] for row in one_form) for name in RULE_NAMES)


@pytest.mark.postgres
def test_a_rule_added_to_the_declaration_is_in_all_three_forms(requires_postgres, monkeypatch):
    def too_slow(ops, rules):
        return ops.all(ops.above("median_ms", 5000.0), ops.one_of("status", ["completed"]))

    monkeypatch.setitem(predicates.RULES, "too_slow", too_slow)
    pandas_form, one_form, sql_form = _three_forms(ExclusionRules.none())
    slow = [
        corner["median_ms"] is not None and corner["median_ms"] > 5000 and corner["status"] == "completed"
        for corner in CORNERS
    ]
    assert [row["too_slow"] for row in pandas_form] == slow
    assert [row["too_slow"] for row in one_form] == slow
    assert [row["too_slow"] for row in sql_form] == slow


def test_a_rule_reading_an_aggregate_the_sql_lacks_fails_loudly(monkeypatch):
    monkeypatch.setitem(predicates.RULES, "odd", lambda ops, rules: ops.true("shoe_size"))
    with pytest.raises(KeyError, match="shoe_size"):
        predicates.flags_sql(ExclusionRules())
