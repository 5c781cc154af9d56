"""Hand-written SQL for the participant hot path, read into ordinary model instances.

Django's ORM compiles a queryset into SQL anew on every call, column by column. On the pages each
participant requests twenty-odd times (find the session's participant, show the current item, store the
answer) that compile cost more CPU than the queries themselves: ~60 % of a gunicorn worker's time at
saturation (bench/participants.py, py-spy). Those few queries are written out here instead — their column
lists taken from the models' metadata, so they follow migrations — and their rows are turned into model
instances exactly as the ORM would (`Model.from_db`, after the same value converters), so callers get
the same objects and the rest of the code does not know the difference.

Portable: runs on PostgreSQL and on the SQLite of `make run` (no LATERAL, identifiers double-quoted;
`for_update()` is empty where the database has no row locks).
"""

from __future__ import annotations

from functools import cache

from django.db import connection
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[Model], name: str, alias: str) -> str:
    """`alias."column"` for the field `name` of `model` (its attname, e.g. "study_id", or field name)."""
    field = model._meta.get_field(name)
    return f"{alias}.{connection.ops.quote_name(field.column)}"


@cache
def _select_list(model: type[Model], alias: str, vendor: str) -> str:
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(field.column)}" for field in model._meta.concrete_fields)


def columns(model: type[Model], alias: str) -> str:
    """Every concrete column of `model`, in field order, as `alias."column", ...` (what `instance` reads)."""
    return _select_list(model, alias, connection.vendor)


@cache
def _converters(model: type[Model], vendor: str) -> tuple[list[str], list[tuple[int, list, object]]]:
    fields = model._meta.concrete_fields
    converters = []
    for index, field in enumerate(fields):
        expression = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(expression) + field.get_db_converters(connection)
        if found:
            converters.append((index, found, expression))
    return [field.attname for field in fields], converters


def instance(model: type[Model], row, start: int = 0) -> tuple[Model, int]:
    """The `model` instance whose columns (as `columns(model, ...)` lists them) start at `row[start]`,
    with the value conversions the ORM applies; returns it and the index just past its columns.

    Built as `Model.from_db` builds it, without going through `Model.__init__` field by field where
    nothing can tell the difference: a model with its own `__init__` or `from_db`, or with a pre_init or
    post_init receiver, goes through `from_db` itself."""
    attnames, converters = _converters(model, connection.vendor)
    end = start + len(attnames)
    values = list(row[start:end])
    for index, functions, expression in converters:
        value = values[index]
        for function in functions:
            value = function(value, expression, connection)
        values[index] = value
    if (
        len(values) != len(attnames)
        or not _plain(model)
        or pre_init.has_listeners(model)
        or post_init.has_listeners(model)
    ):
        return model.from_db(connection.alias, attnames, values), end
    # What `Model.__init__` leaves for a full row: the values under their attnames (a fresh instance has
    # no cached relation for a foreign key's descriptor to clear), and a saved instance's state.
    built = model.__new__(model)
    built.__dict__.update(zip(attnames, values, strict=True))
    state = built._state = ModelState()
    state.adding = False
    state.db = connection.alias
    return built, end


@cache
def _plain(model: type[Model]) -> bool:
    return model.__init__ is Model.__init__ and model.from_db.__func__ is Model.from_db.__func__


def for_update() -> str:
    """` FOR UPDATE` where the database locks rows (PostgreSQL); SQLite serialises writers itself."""
    return " FOR UPDATE" if connection.features.has_select_for_update else ""


def fetchone(sql: str, params) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetchall(sql: str, params) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def insert(model: type[Model], *, along: tuple[str, list] | None = None, **values) -> Model:
    """Inserts one row of `model` (the fields given, by name) and returns it as a saved instance, as
    `Model.objects.create` would, without the ORM's per-call compile. Values go through the fields' own
    `get_db_prep_save` (dates, JSON); no defaults, no signals: for the plain rows of the hot path only.

    `along`: another data-modifying statement (an UPDATE: its SQL and parameters) to run with the insert,
    in the same round trip where the database allows it (PostgreSQL: as a WITH clause of the INSERT, which
    runs it whether or not the INSERT refers to it), else just before it. It must not touch the new row."""
    names = tuple(values)
    fields = [model._meta.get_field(name) for name in names]
    params = [
        field.get_db_prep_save(values[name], connection) for field, name in zip(fields, names, strict=True)
    ]
    returning = connection.features.can_return_columns_from_insert
    sql = _insert_many_sql(model, names, 1, connection.vendor, returning)
    with connection.cursor() as cursor:
        if along is not None and connection.vendor == "postgresql":
            sql, params = f"WITH along AS ({along[0]}) {sql}", [*along[1], *params]
        elif along is not None:
            cursor.execute(*along)
        cursor.execute(sql, params)
        pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    instance = model(pk=pk, **values)
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


@cache
def _insert_many_sql(
    model: type[Model], names: tuple[str, ...], count: int, vendor: str, returning: bool
) -> str:
    quote = connection.ops.quote_name
    fields = [model._meta.get_field(name) for name in names]
    one = f"({', '.join(['%s'] * len(fields))})"
    return (
        f"INSERT INTO {table(model)} ({', '.join(quote(f.column) for f in fields)})"
        f" VALUES {', '.join([one] * count)}"
        + (f" RETURNING {quote(model._meta.pk.column)}" if returning else "")
    )


# Fields whose `get_db_prep_save` hands an int, a str or None back unchanged: `insert_many` skips the call
# for those values (it is most of the cost of a multi-row INSERT built in Python).
_PLAIN_TYPES = {
    "AutoField",
    "BigAutoField",
    "BigIntegerField",
    "BooleanField",
    "CharField",
    "ForeignKey",
    "IntegerField",
    "PositiveIntegerField",
    "PositiveSmallIntegerField",
    "SmallIntegerField",
    "TextField",
}


@cache
def _fields_prepared(model: type[Model], names: tuple[str, ...]) -> list[tuple[str, object, bool]]:
    fields = [model._meta.get_field(name) for name in names]
    return [(field.attname, field, field.get_internal_type() in _PLAIN_TYPES) for field in fields]


def insert_many(model: type[Model], instances: list[Model], names: tuple[str, ...]) -> list[Model]:
    """Inserts `instances` (unsaved, of `model`) in one multi-row INSERT of the fields `names`, as
    `bulk_create` would without its per-call compile; sets their primary keys (returned by PostgreSQL and
    SQLite, in the order given). Same rules as `insert`: no defaults, no signals."""
    if not instances:
        return instances
    params = []
    for each in instances:
        for attname, field, plain in _fields_prepared(model, names):
            value = getattr(each, attname)
            if not (plain and (value is None or type(value) in (int, str, bool))):
                value = field.get_db_prep_save(value, connection)
            params.append(value)
    returning = connection.features.can_return_rows_from_bulk_insert
    sql = _insert_many_sql(model, names, len(instances), connection.vendor, returning)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        keys = [row[0] for row in cursor.fetchall()] if returning else [cursor.lastrowid]
    if len(keys) == len(instances):  # without RETURNING, only a single row's key is known
        for each, key in zip(instances, keys, strict=True):
            each.pk = key
    for each in instances:
        each._state.adding = False
        each._state.db = connection.alias
    return instances


def insert_if_absent(instance: Model) -> bool:
    """Inserts the unsaved `instance` (every concrete field, its defaults and `auto_now` times as `save` would
    set them) unless a row with one of its unique keys exists; True when inserted, and then the instance is
    the saved row (its insert is held by the caller's transaction until it commits). One statement where the
    ORM's `bulk_create(ignore_conflicts=True)` compiles a query each call; no signals."""
    model = type(instance)
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and f.auto_created)]
    params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(_insert_absent_sql(model, connection.vendor), params)
        inserted = cursor.rowcount == 1
    if inserted:
        instance._state.adding = False
        instance._state.db = connection.alias
    return inserted


@cache
def _insert_absent_sql(model: type[Model], vendor: str) -> str:
    quote = connection.ops.quote_name
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and f.auto_created)]
    return (
        f"INSERT INTO {table(model)} ({', '.join(quote(f.column) for f in fields)})"
        f" VALUES ({', '.join(['%s'] * len(fields))}) ON CONFLICT DO NOTHING"
    )


@cache
def _select_sql(model: type[Model], where: tuple[str, ...], vendor: str, lock: bool) -> str:
    conditions = " AND ".join(f"{column(model, name, 't')} = %s" for name in where)
    return f"SELECT {columns(model, 't')} FROM {table(model)} t WHERE {conditions}" + (
        for_update() if lock else ""
    )


def select(model: type[Model], where: tuple[str, ...], params, *, lock: bool = False) -> Model | None:
    """The one `model` row whose fields `where` (names) equal `params`, as an instance, or None; locked
    (`for_update()`) until the transaction ends when `lock`. For look-ups by a unique key."""
    row = fetchone(_select_sql(model, where, connection.vendor, lock), params)
    return None if row is None else instance(model, row)[0]


@cache
def _update_sql(model: type[Model], names: tuple[str, ...], vendor: str) -> str:
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(model._meta.get_field(name).column)} = %s" for name in names)
    return f"UPDATE {table(model)} SET {sets} WHERE {quote(model._meta.pk.column)} = %s"


def update(instance: Model, names: tuple[str, ...]) -> None:
    """Writes the fields `names` of the saved `instance` in one UPDATE, as `save(update_fields=names)` would
    without the ORM's per-call compile: each value through its field's `pre_save` (a DateTimeField's
    `auto_now` sets the time) and `get_db_prep_save` (JSON). No signals."""
    model = type(instance)
    params = []
    for name in names:
        field = model._meta.get_field(name)
        params.append(field.get_db_prep_save(field.pre_save(instance, False), connection))
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(model, names, connection.vendor), [*params, instance.pk])
