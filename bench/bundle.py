"""What a study's open-science bundle costs to make and to re-run; prints ONE JSON object.

    .venv/bin/python bench/bundle.py [--dataset shared/data/llm-empathy-evaluation/dataset_and_ratings.csv]

Standalone, on its own SQLite database under a temporary VAR_DIR (migrated, `seed_demo`, and the whole published
data set imported as a closed rating study with `import_ratings`: 3 conditions × 200 raters × 10 ratings), in fresh
processes:

* `manage.py export_bundle` of the published study (and of the demo's `published-sample`): wall and CPU time,
  files and bytes;
* baseline: the three exports the bundle's data is made from (`manage.py export --what ratings|participants|
  responses`) and `manage.py analyze` (what a researcher ran by hand before), wall and CPU time;
* the bundle's `analysis/reproduce.py` re-run: a fresh virtualenv with only its pinned requirements (uv from its
  cache, `--offline`) and the script under `python -I` with an empty environment.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
UV = ROOT / ".venv" / "bin" / "uv"
DATASET = ROOT.parent.parent / "shared" / "data" / "llm-empathy-evaluation" / "dataset_and_ratings.csv"


def timed(command: list, *, env: dict | None = None, cwd: Path | None = None) -> dict:
    """Wall and CPU (user + system of the children) seconds of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([str(c) for c in command], env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{command} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", type=Path, default=Path(os.environ.get("PUBLISHED_RATINGS_CSV", DATASET))
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
            "VAR_DIR": str(tmp / "var"),
            "DJANGO_ENV": "local",
        }

        def manage(*words: str) -> dict:
            return timed([PYTHON, ROOT / "manage.py", *words], env=env)

        manage("migrate", "--noinput", "-v0")
        manage("seed_demo")
        manage("import_ratings", "published", str(args.dataset))
        out: dict = {
            "dataset": str(args.dataset),
            "machine": {"load_1_5_15": os.getloadavg(), "cpus": os.cpu_count()},
        }
        for slug in ("published-sample", "published"):
            bundle = tmp / f"{slug}-bundle"
            made = manage("export_bundle", slug, "--out", str(bundle))
            files = [p for p in bundle.rglob("*") if p.is_file()]
            baseline = {
                what: manage("export", slug, "--what", what, "--out", str(tmp / f"{slug}-{what}.csv"))
                for what in ("ratings", "participants", "responses")
            }
            baseline["analyze"] = manage("analyze", slug, "--out", str(tmp / f"{slug}-analysis"))
            venv = tmp / f"{slug}-venv"
            made_venv = timed([UV, "venv", "-q", "--python", sys.executable, venv])
            installed = timed(
                [UV, "pip", "install", "-q", "--offline", "--python", venv / "bin/python", "-r",
                 bundle / "analysis/requirements.txt"]
            )  # fmt: skip
            rerun = timed(
                [venv / "bin/python", "-I", bundle / "analysis/reproduce.py", "--out", tmp / f"{slug}-rerun"],
                env={"PATH": "/usr/bin:/bin"},
                cwd=tmp,
            )
            same = json.loads((tmp / f"{slug}-rerun/headline.json").read_text()) == json.loads(
                (bundle / "results/headline.json").read_text()
            )
            out[slug] = {
                "export_bundle": made,
                "files": len(files),
                "bytes": sum(p.stat().st_size for p in files),
                "baseline_exports_and_analyze": baseline,
                "baseline_total": {
                    key: round(sum(b[key] for b in baseline.values()), 2) for key in ("wall_s", "cpu_s")
                },
                "rerun": {"venv": made_venv, "install_offline": installed, "script": rerun, "same": same},
            }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
