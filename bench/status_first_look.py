"""The live status page's list of flagged participants on a large study (bench/analysis.py `generate`): the first
look after the bulk load (every participant marked stale, computed in one pass), a look when nobody changed, a
look after 100 participants changed, beside the analysis's own computation over every rated row (what the page
ran on every look before it kept the flags), in the same run. Wall time and CPU (this process plus its
PostgreSQL backend). One JSON object.

    .venv/bin/python bench/status_first_look.py [--participants 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.analysis import admin_sql, django_setup, generate  # noqa: E402
from bench.lib.scale import _measured  # noqa: E402


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=100_000)
    args = parser.parse_args()
    db = f"empathy_bench_first_look_{os.getpid()}"
    admin_sql(f'DROP DATABASE IF EXISTS "{db}"')
    admin_sql(f'CREATE DATABASE "{db}"')
    try:
        django_setup(db)
        from django.core.management import call_command
        from django.db import connection

        from kinds.rating.live_exclusions import rating_exclusion_flags
        from kinds.rating.models import Rating
        from studies.models import FlagsStale, Participant, Study
        from studies.selectors import study_flagged_participants

        call_command("migrate", verbosity=0)
        study = generate(args.participants * 10)
        Study.objects.filter(pk=study.pk).update(state=Study.State.LIVE)
        study.refresh_from_db()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (backend,) = cursor.fetchone()
        out = {"participants": args.participants, "marked_after_bulk_load": FlagsStale.objects.count()}
        listed, out["first_look"] = _measured(lambda: study_flagged_participants(study=study), backend)
        out["listed"] = len(listed)
        _, out["look_nobody_changed"] = _measured(lambda: study_flagged_participants(study=study), backend)
        changed = list(
            Participant.objects.filter(study=study).order_by("pk").values_list("pk", flat=True)[:100]
        )
        Rating.objects.filter(assignment__participant_id__in=changed).update(response_time_ms=150)
        _, out["look_after_100_changed"] = _measured(lambda: study_flagged_participants(study=study), backend)
        _, out["every_rated_row_each_look_before"] = _measured(
            lambda: rating_exclusion_flags(study=study), backend
        )
        return out
    finally:
        from django.db import connection

        connection.close()
        admin_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    print(json.dumps(main()))
