"""SQL a migration runs as written for the database in use (the triggers of migrations 0018 and 0019)."""

from __future__ import annotations

from django.db import migrations


def by_vendor(forward: dict[str, list[str]], backward: dict[str, list[str]]) -> migrations.RunPython:
    """Runs `forward[vendor]` (undone by `backward[vendor]`), vendor being "postgresql" or "sqlite"."""

    def run(statements: dict[str, list[str]]):
        def go(apps, schema_editor):
            with schema_editor.connection.cursor() as cursor:
                for statement in statements[schema_editor.connection.vendor]:
                    cursor.execute(statement)

        return go

    return migrations.RunPython(run(forward), run(backward))
