"""Re-runs a pairwise study's headline analysis from its open-science bundle's files alone (no database, no
network).

    python analysis/reproduce.py [--out DIR]

Reads the bundle's answers (the file datapackage.json names `answers`) and analysis/parameters.json (the
conditions, the baseline, the seed and the bootstrap replicates), leaves out the answers of excluded
participants (the `excluded` column: the study's declared exclusion rules), fits the Bradley–Terry model with
ties (Davidson) with the baseline at 0 and its two-way cluster bootstrap under the bundle's seed, and writes
headline.json (into DIR, default: the working directory): each condition's log-strength with its interval and
standard error, and the tie parameter. The model's code is the platform's own (its Bradley–Terry fit and bootstrap
modules, copied into the bundle under analysis/lib/); results/headline.json holds the same figures as the
platform computed them. Needs numpy, pandas and scipy (analysis/requirements.txt).
"""

import argparse
import importlib
import json
import math
import sys
from pathlib import Path

import pandas as pd

BUNDLE = Path(__file__).resolve().parent.parent
PARAMETERS = json.loads((BUNDLE / "analysis" / "parameters.json").read_text(encoding="utf-8"))
sys.path.insert(0, str(BUNDLE / "analysis" / "lib"))  # the platform's model code, by its modules' names
sys.dont_write_bytecode = True  # the bundle stays as its manifest lists it
fit_module = importlib.import_module(PARAMETERS["modules"]["fit"])
bootstrap_module = importlib.import_module(PARAMETERS["modules"]["bootstrap"])
BradleyTerryError = fit_module.BradleyTerryError

# The platform's analysis frame's column types (kinds/pairwise/frame.py FRAME_TYPES), by their names.
FRAME_TYPES = {
    column: {"str": str, "bool": bool, "int": int}[kind] for column, kind in PARAMETERS["frame_types"].items()
}


def frame_read(bundle: Path) -> pd.DataFrame:
    """The counted votes, as the platform's analysis frame holds them."""
    package = json.loads((bundle / "datapackage.json").read_text(encoding="utf-8"))
    path = next(r["path"] for r in package["resources"] if r["name"] == "answers")
    answers = pd.read_csv(bundle / path, encoding="utf-8", dtype={"participant": str, "prompt_id": str})
    kept = answers[~answers["excluded"].astype(bool)].reset_index(drop=True)
    frame = kept[list(FRAME_TYPES) + ["response_time_ms"]].copy()
    frame["response_time_ms"] = frame["response_time_ms"].fillna(0).astype(int)
    return frame.astype(FRAME_TYPES)


def number(value: float) -> float | None:
    value = float(value)
    return None if not math.isfinite(value) else value


def headline(frame: pd.DataFrame, parameters: dict) -> dict:
    if frame.empty:
        return {"votes": 0, "strengths": [], "tie": None}
    try:  # the platform's checks, in its order: votes that cannot give strengths get its words
        fit_module.frame_check(frame)
        votes = fit_module.votes_from_frame(frame, parameters["conditions"])
        votes.index(parameters["baseline"])
        fit_module.identification_check(votes)
    except BradleyTerryError as exc:
        return {"votes": len(frame), "strengths": [], "tie": None, "note": str(exc)}
    fit = fit_module.davidson_fit(votes, baseline=parameters["baseline"], covariates=(), check=False)
    boot = bootstrap_module.twoway_bootstrap(
        votes, fit, covariates=(), n_boot=parameters["bootstrap_samples"], seed=parameters["seed"]
    )
    strengths = [
        {
            "condition": name,
            "strength": number(fit.strengths[name]),
            "ci_low": number(boot.ci_low[name]),
            "ci_high": number(boot.ci_high[name]),
            "se": number(boot.se[name]),
        }
        for name in votes.conditions
    ]
    strengths.sort(key=lambda row: (-row["strength"], row["condition"]))
    return {"votes": int(votes.n), "strengths": strengths, "tie": number(boot.estimates["tie"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path.cwd(), help="where headline.json goes")
    args = parser.parse_args()
    result = headline(frame_read(BUNDLE), PARAMETERS)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "headline.json").write_text(
        json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    for row in result["strengths"]:
        print(f"{row['condition']}: {row['strength']:+.4f} [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}]")


if __name__ == "__main__":
    main()
