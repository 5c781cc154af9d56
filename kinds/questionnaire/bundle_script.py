"""Re-runs a questionnaire study's headline analysis from its open-science bundle's files alone (no database, no
network).

    python analysis/reproduce.py [--out DIR]

Reads the bundle's answers (the file datapackage.json names `answers`: one row per item answered in a run) and
materials/instrument.json (the items, which are reverse-scored, the categories and how they are summed), scores
every run as EmotionBench does (a reversed item scores min + max − x; a category is the sum of its items, ×2
for SUM*2 instruments; a run missing one of a category's items has no score for it) and writes headline.json
(into DIR, default: the working directory): for each condition, overall and per emotion, each category's
default and evoked number of runs, mean and standard deviation, and the change (evoked − default). Where the
same subjects answered before and after (participants), a group's default sample is its subjects' default runs;
otherwise every default run of the condition. results/headline.json holds the same figures as the platform
computed them. Needs only pandas (analysis/requirements.txt).
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
    return pd.read_csv(
        bundle / path, encoding="utf-8", dtype={"subject": str, "condition": str, "emotion": str}
    )


def runs_score(answers: pd.DataFrame, instrument: dict) -> pd.DataFrame:
    """One row per run (run, condition, subject, phase, emotion) with a score per category."""
    runs = answers.drop_duplicates("run")[["run", "condition", "subject", "phase", "emotion"]].set_index(
        "run"
    )
    wide = answers.pivot(index="run", columns="item_number", values="value").astype(float)
    numbers = [item["number"] for item in instrument["items"]]
    wide = wide.reindex(columns=numbers)
    reverse = [item["number"] for item in instrument["items"] if item["reverse_scored"]]
    if reverse:
        wide[reverse] = instrument["scale_min"] + instrument["scale_max"] - wide[reverse]
    factor = 2 if instrument["compute_mode"] == "SUM*2" else 1
    for category in instrument["categories"]:
        items = category["item_numbers"]
        score = wide[items].sum(axis=1, min_count=len(items))
        score[wide[items].isna().any(axis=1)] = math.nan
        runs[category["name"]] = score * factor
    names = [c["name"] for c in instrument["categories"]]
    return runs.dropna(subset=names, how="all").reset_index()


def describe(values: pd.Series) -> tuple[int, float | None, float | None]:
    values = values.to_numpy(dtype=float)
    n = len(values)
    mean = float(values.mean()) if n else None
    sd = float(values.std(ddof=1)) if n > 1 else None
    return n, mean, sd


def headline(answers: pd.DataFrame, instrument: dict, parameters: dict) -> dict:
    rows = []
    if answers.empty:
        return {"runs": 0, "groups": rows}
    runs = runs_score(answers, instrument)
    categories = [c["name"] for c in instrument["categories"]]
    for condition in parameters["conditions"]:
        mine = runs[runs["condition"] == condition]
        if mine.empty:
            continue
        default = mine[mine["phase"] == "default"]
        evoked = mine[mine["phase"] == "evoked"]
        paired = bool(set(default["subject"]) & set(evoked["subject"]))
        by_subject = default.drop_duplicates("subject").set_index("subject")
        groups = [("overall", "Overall", evoked)]
        groups += [("emotion", e, evoked[evoked["emotion"] == e]) for e in parameters["emotions"]]
        for level, group, subset in groups:
            if subset.empty and level != "overall":
                continue
            if paired:
                keys = [k for k in subset["subject"] if k in by_subject.index]
                group_default = by_subject.loc[keys] if keys else default.iloc[0:0]
            else:
                group_default = default
            for category in categories:
                n_d, mean_d, sd_d = describe(group_default[category])
                n_e, mean_e, sd_e = describe(subset[category])
                change = mean_e - mean_d if mean_d is not None and mean_e is not None else None
                rows.append(
                    {"condition": condition, "level": level, "group": group, "category": category,
                     "n_default": n_d, "mean_default": mean_d, "sd_default": sd_d,
                     "n_evoked": n_e, "mean_evoked": mean_e, "sd_evoked": sd_e, "change": change}
                )  # fmt: skip
    return {"runs": len(runs), "groups": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path.cwd(), help="where headline.json goes")
    args = parser.parse_args()
    parameters = json.loads((BUNDLE / "analysis" / "parameters.json").read_text(encoding="utf-8"))
    instrument = json.loads((BUNDLE / "materials" / "instrument.json").read_text(encoding="utf-8"))
    result = headline(answers_read(BUNDLE), instrument, parameters)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "headline.json").write_text(
        json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    for row in result["groups"]:
        if row["level"] == "overall":
            print(
                f"{row['condition']} {row['category']}: default {row['mean_default']}, evoked {row['mean_evoked']}"
            )


if __name__ == "__main__":
    main()
