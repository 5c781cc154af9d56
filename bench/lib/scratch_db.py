"""A benchmark's own scratch database on the local PostgreSQL: created fresh, dropped at the end."""

from __future__ import annotations

PG = "postgres://postgres@127.0.0.1:5432"


def admin_sql(sql: str, *, server: str = f"{PG}/postgres") -> None:
    """One statement on the server's maintenance database, outside a transaction (CREATE/DROP DATABASE)."""
    import psycopg2

    conn = psycopg2.connect(server)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(sql)
    conn.close()


def database_fresh(name: str, *, server: str = f"{PG}/postgres") -> None:
    """An empty database `name`, dropped first if it is left from an earlier run."""
    admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', server=server)
    admin_sql(f'CREATE DATABASE "{name}"', server=server)


def database_drop(name: str, *, server: str = f"{PG}/postgres") -> None:
    """Drops `name` after closing this process's connections to it (and, by FORCE, anyone else's)."""
    from django.db import connections

    connections.close_all()
    admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', server=server)
