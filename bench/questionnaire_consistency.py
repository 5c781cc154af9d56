"""The questionnaire's consistency pairs: how often the rule (`authenticity.pair_far`, and *inconsistent* in
`score_compute`) marks people and answerers of other kinds on a five-point instrument such as PANAS.

    .venv/bin/python bench/questionnaire_consistency.py [--people 20000] [--pairs 2] [--seed 7]

Prints ONE JSON object. No server and no browser: the rule is a pure function of the two answers, so this
simulates the answers themselves. A person's feeling on an item is drawn once (most PANAS answers are low: "very
slightly" to "moderately") and each answer is it plus an answering noise, rounded and kept on the scale; the noise
of a person asked the same thing twice within minutes is what test-retest studies of single Likert items bound
(exact agreement about 50-70 %, within one point 90-98 %): it is run at three widths, `noise_sd` 0.4, 0.6 and 0.8
(0.8 is a careless reader). Beside them, in the same run: an agent answering from a model (its answer is its
reading of the item, the same both times, as the bench's LLM-driven agents do), and a clicker choosing at random.

Reported per kind: the share whose page gets *inconsistent* under the current rule (more than half the span:
three points apart on 1-5) and, as the baseline, under a rule of two points apart (half the span, the rule
before; computed here by threshold, not by the rule's code), and the share of pairs far apart under each.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCALE = [1, 2, 3, 4, 5]
FEELING_MEAN, FEELING_SD = 2.0, 0.9  # a PANAS item's answers "as you feel now": mostly 1-3


def _on_scale(x: float) -> int:
    return min(SCALE[-1], max(SCALE[0], round(x)))


def answers(kind: str, rng: random.Random, noise_sd: float) -> tuple[int, int]:
    """The two answers of one consistency pair."""
    if kind == "random":
        return rng.choice(SCALE), rng.choice(SCALE)
    feeling = rng.gauss(FEELING_MEAN, FEELING_SD)
    if kind == "agent":
        return _on_scale(feeling), _on_scale(feeling)
    return _on_scale(feeling + rng.gauss(0, noise_sd)), _on_scale(feeling + rng.gauss(0, noise_sd))


def measure(kind: str, *, n: int, pairs: int, noise_sd: float, rng: random.Random) -> dict:
    from studies.authenticity import pair_far, score_compute

    inconsistent = baseline = far_pairs = baseline_pairs = 0
    for _ in range(n):
        drawn = [answers(kind, rng, noise_sd) for _ in range(pairs)]
        far = {str(i): int(pair_far(a, b, SCALE)) for i, (a, b) in enumerate(drawn)}
        two = {str(i): int(abs(a - b) >= 2) for i, (a, b) in enumerate(drawn)}
        inconsistent += any(
            r.startswith("inconsistent") for r in score_compute(client={}, pages={}, pairs=far).reasons
        )
        baseline += any(
            r.startswith("inconsistent") for r in score_compute(client={}, pages={}, pairs=two).reasons
        )
        far_pairs += sum(far.values())
        baseline_pairs += sum(two.values())
    return {
        "inconsistent_share": round(inconsistent / n, 4),
        "inconsistent_share_baseline_two_points": round(baseline / n, 4),
        "far_pair_share": round(far_pairs / (n * pairs), 4),
        "far_pair_share_baseline_two_points": round(baseline_pairs / (n * pairs), 4),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--people", type=int, default=20000)
    parser.add_argument(
        "--pairs", type=int, default=2, help="consistency pairs per participant (the default's)"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    rng = random.Random(args.seed)
    result: dict = {"setup": {"people": args.people, "pairs": args.pairs, "scale": SCALE, "seed": args.seed}}
    for noise_sd in (0.4, 0.6, 0.8):
        result[f"people_noise_sd_{noise_sd}"] = measure(
            "people", n=args.people, pairs=args.pairs, noise_sd=noise_sd, rng=rng
        )
    result["agent_from_a_model"] = measure("agent", n=args.people, pairs=args.pairs, noise_sd=0, rng=rng)
    result["random_clicker"] = measure("random", n=args.people, pairs=args.pairs, noise_sd=0, rng=rng)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
