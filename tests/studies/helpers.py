"""Small files and counters shared by the studies tests."""

import csv
import io
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from django.apps import apps
from django.utils import timezone

from kinds.rating.models import Rating
from studies.models import Assignment

# The published dataset lives in shared/ beside the checkout (as in CI); PUBLISHED_RATINGS_CSV points elsewhere
# (a checkout that is not beside shared/, e.g. a git worktree).
DATASET = os.environ.get("PUBLISHED_RATINGS_CSV") or str(
    Path(__file__).resolve().parents[3]
    / "shared"
    / "data"
    / "llm-empathy-evaluation"
    / "dataset_and_ratings.csv"
)
# The published file lists its ratings part by part: ten dialogues, each part rated by one rater per condition.
PUBLISHED_PART_SIZE = 10
PUBLIC_HEADER = [
    "dialog_id",
    "emotion",
    "sentiment",
    "situation",
    "speaker_uttr",
    "response_human",
    "response_gpt4",
]


def published_cut(directory: Path, *, raters: int) -> str:
    """The published file cut to its first `raters` parts, written into `directory`; returns the file's path.

    Every part is complete (ten dialogues, one rater per condition, each rating all ten), so the cut is a smaller
    study of the published design: `raters` raters per condition, ten ratings each, and 10 × `raters` prompts.
    For end-to-end runs whose cost grows with the prompts; the paper's figures are checked on the whole file."""
    with open(DATASET, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [row for _, row in zip(range(raters * PUBLISHED_PART_SIZE), reader, strict=False)]
    part = header.index("part_no")
    sizes = Counter(row[part] for row in rows)
    if len(sizes) != raters or set(sizes.values()) != {PUBLISHED_PART_SIZE}:
        raise ValueError(f"{DATASET}: its first {len(rows)} rows are not {raters} whole parts of ten")
    path = Path(directory) / f"published_first_{raters}_raters.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def row_counts() -> dict[str, int]:
    """Rows in every table of the domain (emotions included), to prove a refused import wrote nothing."""
    return {model.__name__: model.objects.count() for model in apps.get_app_config("studies").get_models()}


def public_csv(rows: list[list[str]], header: list[str] = PUBLIC_HEADER) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def public_rows(n: int, emotions=("joyful", "sad", "proud", "afraid")) -> list[list[str]]:
    return [
        [
            f"hit:{i}_conv:{i}",
            emotions[i % len(emotions)],
            "positive",
            f"Situation {i}, with a comma",
            f"Speaker says {i}",
            f"Human answers {i}",
            f"GPT-4 answers {i}",
        ]
        for i in range(n)
    ]


def sqlite_manage(var_dir: Path):
    """`manage.py` as `make run` runs it (DJANGO_ENV=local: SQLite in `var_dir`), each call a subprocess that
    must succeed; the call returns its output."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PORT"}}
    env.update({"DJANGO_ENV": "local", "VAR_DIR": str(var_dir)})

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return manage


def answer_directly(assignment, value: int = 3) -> None:
    """Stores a rating for `assignment` and marks it answered, without the answering view or its checks."""
    Rating.objects.create(assignment=assignment, value=value)
    Assignment.objects.filter(pk=assignment.pk).update(answered_at=timezone.now())
