"""Re-runs a rating study's headline analysis from its open-science bundle's files alone (no database, no network).

    python analysis/reproduce.py [--out DIR]

Reads the bundle's answers (the file datapackage.json names `answers`) and analysis/parameters.json (the scale,
the conditions in order and the baseline), leaves out the answers of excluded participants (the `excluded`
column: the study's declared exclusion rules), and writes headline.json (into DIR, default: the working
directory): per condition, the participants, the ratings, the count and percentage of each scale value and the
mean value; and each condition's share of the top value against the baseline's, with the relative change (the
seed study's headline, (top − top_baseline) / top_baseline). results/headline.json holds the same figures as the
platform computed them. Needs only pandas (analysis/requirements.txt).
"""

import argparse
import json
import math
from pathlib import Path

import pandas as pd

BUNDLE = Path(__file__).resolve().parent.parent


def answers_read(bundle: Path) -> pd.DataFrame:
    package = json.loads((bundle / "datapackage.json").read_text(encoding="utf-8"))
    path = next(r["path"] for r in package["resources"] if r["name"] == "answers")
    return pd.read_csv(bundle / path, encoding="utf-8", dtype={"condition": str, "participant": str})


def number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def headline(answers: pd.DataFrame, parameters: dict) -> dict:
    kept = answers[~answers["excluded"].astype(bool)]
    values = [point["value"] for point in parameters["scale"]]
    labels = [point["label"] for point in parameters["scale"]]
    top_label = labels[values.index(max(values))]
    distribution = []
    for condition in parameters["conditions"]:
        mine = kept[kept["condition"] == condition]
        if mine.empty:
            continue
        n = len(mine)
        row = {"condition": condition, "participants": int(mine["participant"].nunique()), "ratings": n}
        counts = {value: int((mine["value"] == value).sum()) for value in values}
        for value, label in zip(values, labels, strict=True):
            row[f"n_{label}"] = counts[value]
        for value, label in zip(values, labels, strict=True):
            row[f"pct_{label}"] = 100.0 * counts[value] / n
        row["mean"] = sum(counts[value] * value for value in values) / n
        distribution.append(row)
    baseline = parameters["baseline"]
    by_condition = {row["condition"]: row for row in distribution}
    base = by_condition.get(baseline)
    base_share = base[f"pct_{top_label}"] / 100 if base else float("nan")
    change = []
    for row in distribution:
        if row["condition"] == baseline:
            continue
        share = row[f"pct_{top_label}"] / 100
        relative = (share - base_share) / base_share if base_share and not math.isnan(base_share) else None
        change.append(
            {
                "condition": row["condition"],
                "baseline": baseline,
                "top_share": share,
                "top_share_baseline": number(base_share),
                "change": number(relative),
            }
        )
    return {
        "ratings_analysed": len(kept),
        "ratings": len(answers),
        "distribution": distribution,
        "change": change,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path.cwd(), help="where headline.json goes")
    args = parser.parse_args()
    parameters = json.loads((BUNDLE / "analysis" / "parameters.json").read_text(encoding="utf-8"))
    result = headline(answers_read(BUNDLE), parameters)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "headline.json").write_text(
        json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    for row in result["distribution"]:
        print(f"{row['condition']}: {row['ratings']} ratings, mean {row['mean']:.3f}")
    for row in result["change"]:
        print(
            f"{row['condition']} vs {row['baseline']}: top share {row['top_share']:.4f}, change {row['change']}"
        )


if __name__ == "__main__":
    main()
