"""What the live status page's triggers (studies/declared_flags.py, studies/status_tally.py) cost each answer.

On a fresh PostgreSQL database holding a generated study (bench/analysis.py `generate`), stores answers the way
the answer services do, one per transaction (a Rating on a new page of a participant, the participant touched,
and every tenth answer a status change, as a completion), alternately with the study tables' triggers enabled
and disabled (`ALTER TABLE ... DISABLE TRIGGER USER`, the same run, the same rows), and prints one JSON object:
the CPU per answer (this process plus its PostgreSQL backend) and the wall time, both ways, and their ratio.

    .venv/bin/python bench/answer_triggers.py [--ratings 100000] [--answers 600] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.analysis import admin_sql, django_setup, generate  # noqa: E402
from bench.lib.scale import _backend_cpu  # noqa: E402

TABLES = ("studies_rating", "studies_participant", "studies_participantauthenticity", "studies_study")


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratings", type=int, default=100_000, help="ratings of the generated study")
    parser.add_argument("--answers", type=int, default=600, help="answers stored per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds each way, alternating")
    args = parser.parse_args()
    db = f"empathy_bench_triggers_{os.getpid()}"
    admin_sql(f'DROP DATABASE IF EXISTS "{db}"')
    admin_sql(f'CREATE DATABASE "{db}"')
    try:
        django_setup(db)
        from django.core.management import call_command
        from django.db import connection, transaction

        from kinds.rating.models import Rating
        from studies.models import Assignment, Participant

        call_command("migrate", verbosity=0)
        study = generate(args.ratings)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (backend,) = cursor.fetchone()
        people = list(
            Participant.objects.filter(study=study).order_by("pk").values_list("pk", "condition_id")
        )
        responses: dict[int, list[int]] = {}
        for condition_id, response_id in study.conditions.values_list("pk", "responses").order_by(
            "responses"
        ):
            responses.setdefault(condition_id, []).append(response_id)
        used = set(
            Assignment.objects.filter(participant__study=study).values_list("participant_id", "response_id")
        )

        def unrated(pid: int, condition_id: int) -> int:
            """A response this participant has no page for yet."""
            for response_id in responses[condition_id]:
                if (pid, response_id) not in used:
                    used.add((pid, response_id))
                    return response_id
            raise RuntimeError("every response is rated: fewer answers per round")

        position = [100]
        statuses = (Participant.Status.RETURNED, Participant.Status.COMPLETED)

        def answers(n: int) -> tuple[float, float]:
            cpu0, t0 = time.process_time() + _backend_cpu(backend), time.perf_counter()
            for i in range(n):
                pid, condition_id = people[(position[0] + i) % len(people)]
                with transaction.atomic():
                    page = Assignment.objects.create(
                        participant_id=pid, position=position[0] + i, response_id=unrated(pid, condition_id)
                    )
                    Rating.objects.create(assignment=page, value=1 + i % 3, response_time_ms=1000 + i)
                    Participant.objects.filter(pk=pid).update(last_seen_at=page.shown_at or study.created_at)
                    if i % 10 == 0:
                        Participant.objects.filter(pk=pid).update(status=statuses[i // 10 % 2])
            position[0] += n
            return (time.process_time() + _backend_cpu(backend) - cpu0) / n, (time.perf_counter() - t0) / n

        def triggers(on: bool) -> None:
            with connection.cursor() as cursor:
                for table in TABLES:
                    cursor.execute(f"ALTER TABLE {table} {'ENABLE' if on else 'DISABLE'} TRIGGER USER")

        answers(100)  # warm
        samples = {"on": [], "off": []}
        for _ in range(args.rounds):
            for way in ("off", "on"):
                triggers(way == "on")
                samples[way].append(answers(args.answers))
        triggers(True)

        def summary(rows):
            cpu = sorted(r[0] for r in rows)
            wall = sorted(r[1] for r in rows)
            return {
                "cpu_ms_per_answer_median": round(cpu[len(cpu) // 2] * 1000, 3),
                "wall_ms_per_answer_median": round(wall[len(wall) // 2] * 1000, 3),
                "rounds_cpu_ms": [round(c * 1000, 3) for c in cpu],
            }

        on, off = summary(samples["on"]), summary(samples["off"])
        return {
            "ratings_in_study": args.ratings,
            "answers_per_round": args.answers,
            "triggers_on": on,
            "triggers_off": off,
            "cpu_ratio_on_over_off": round(
                on["cpu_ms_per_answer_median"] / off["cpu_ms_per_answer_median"], 3
            ),
        }
    finally:
        from django.db import connection

        connection.close()
        admin_sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    print(json.dumps(main()))
