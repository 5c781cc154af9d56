"""The judge report on the published study's size; prints ONE JSON object.

    .venv/bin/python bench/judge_report.py [--db empathy_bench_judge] [--keep] [--noise 0.2] [--repeat 3]

Standalone: creates its own database, migrates it, imports the published ratings (6,000 responses, one rating
each: `import_ratings`), adds a judge that gives each rated response its human rating and, with probability
--noise, one of the other two values, and a fourth condition (`newmodel`, one response per prompt) rated by the
judge only. Then measures, in the same run:

* report: `judge_report_of` end to end (both frames, calibration with its bootstrap CIs, PPI, screening), the
  calibration alone and the reading of the frames alone;
* page: the judge report page through Django's test client (whole middleware stack) cold (nothing cached) and
  warm (the report cached under the data's version);
* baseline: the analysts' study list page through the same client (a page that computes nothing).

The database is dropped at the end unless --keep (then `runserver` against it shows the pages).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.scratch_db import PG, database_drop, database_fresh  # noqa: E402

DATASET = ROOT.parent / "shared" / "data" / "llm-empathy-evaluation" / "dataset_and_ratings.csv"


def log(message: str) -> None:
    print(f"[bench/judge_report] {message}", file=sys.stderr, flush=True)


def django_setup(db: str) -> None:
    os.environ["DATABASE_URL"] = f"{PG}/{db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.pop("REDIS_URL", None)  # an in-process cache: the bench measures computation, not Redis
    import django

    django.setup()


def build(noise: float, seed: int = 0):
    import random
    from decimal import Decimal

    from django.core.management import call_command
    from django.utils import timezone

    from generation.models import Judge, JudgeRating, Provider
    from kinds.rating.models import Rating
    from studies.models import Condition, Response, Study

    call_command("import_ratings", "published", str(DATASET), stdout=io.StringIO(), stderr=io.StringIO())
    study = Study.objects.get(slug="published")
    source = Condition.objects.get(study=study, name="chatgpt")
    # The imported study's design is frozen; bulk_create passes the guard (the signal) that a person would meet
    # in the admin. Here it only gives the judge a condition no person rated, as a screening wave would.
    Condition.objects.bulk_create([Condition(study=study, name="newmodel", label="New model", position=9)])
    new = Condition.objects.get(study=study, name="newmodel")
    Response.objects.bulk_create(
        [
            Response(prompt_id=p, condition=new, text=t)
            for p, t in source.responses.values_list("prompt_id", "text")
        ]
    )
    provider = Provider.objects.create(name="loopback", kind="openai", api_key_env="JUDGE_KEY")
    judge = Judge.objects.create(study=study, name="noisy-judge", provider=provider, model="loopback-judge")
    rng = random.Random(seed)
    now, rows = timezone.now(), []
    for response_id, value in Rating.objects.filter(assignment__participant__study=study).values_list(
        "assignment__response_id", "value"
    ):
        v = value if rng.random() >= noise else rng.choice([x for x in (1, 2, 3) if x != value])
        rows.append((response_id, v))
    for response_id in new.responses.values_list("id", flat=True):
        rows.append((response_id, rng.choices([1, 2, 3], [0.05, 0.25, 0.70])[0]))
    JudgeRating.objects.bulk_create(
        [
            JudgeRating(
                judge=judge,
                response_id=r,
                status=JudgeRating.Status.DONE,
                value=v,
                cost=Decimal("0.00012"),
                input_tokens=150,
                output_tokens=1,
                rated_at=now,
            )
            for r, v in rows
        ],
        batch_size=5000,
    )
    return study, judge


def timed(call, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="empathy_bench_judge")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--noise", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    database_fresh(args.db)
    try:
        django_setup(args.db)
        from django.contrib.auth import get_user_model
        from django.core.cache import cache
        from django.core.management import call_command
        from django.test import Client

        from analysis import judge_report
        from analysis.calibration import calibrate
        from generation.selectors import judge_ratings_frame

        call_command("migrate", verbosity=0)
        log("importing the published ratings and judging them")
        study, judge = build(args.noise)
        user = get_user_model().objects.create_user("bench", password="bench-pass-123", is_staff=True)
        client = Client()
        client.force_login(user)

        read, (human, frame) = timed(
            lambda: (judge_report.human_ratings_frame(study=study), judge_ratings_frame(judge=judge)),
            args.repeat,
        )
        single = judge_report.judge_per_response(frame)
        calib, result = timed(
            lambda: calibrate(
                human=human,
                judge=single[single["response_id"].isin(human["response_id"])],
                scale=[1, 2, 3],
                baseline="human",
                b=judge_report.CALIBRATION_BOOTSTRAP,
                seed=int(study.seed),
            ),
            args.repeat,
        )
        whole, report = timed(lambda: judge_report.judge_report_of(study=study, judge=judge), args.repeat)
        url = f"/analysis/{study.slug}/judges/{judge.name}/"
        cold = []
        for _ in range(args.repeat):
            cache.clear()
            started = time.perf_counter()
            assert client.get(url).status_code == 200
            cold.append(time.perf_counter() - started)
        warm, _ = timed(lambda: client.get(url).status_code, args.repeat)
        baseline, _ = timed(lambda: client.get("/analysis/").status_code, args.repeat)
        print(
            json.dumps(
                {
                    "responses_rated_by_people": int(human["response_id"].nunique()),
                    "judge_ratings": len(frame),
                    "noise": args.noise,
                    "alpha_judge_human": round(result.judge_human.alpha.value, 4),
                    "verdict": report.verdict,
                    "screened": report.screening[["condition", "judge_Good", "corrected_Good"]].to_dict(
                        "records"
                    ),
                    "seconds": {
                        "read_frames": round(read, 3),
                        "calibration": round(calib, 3),
                        "report_end_to_end": round(whole, 3),
                        "page_cold": round(statistics.median(cold), 3),
                        "page_warm": round(warm, 3),
                        "baseline_study_list_page": round(baseline, 3),
                    },
                    "repeat": args.repeat,
                    "cpu_count": os.cpu_count(),
                }
            )
        )
    finally:
        if not args.keep:
            database_drop(args.db)


if __name__ == "__main__":
    main()
