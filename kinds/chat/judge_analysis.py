"""An LLM judge's ratings of the study's transcripts (kinds/chat/judge_format.py) held against the participants'
own answers on the same scale after the same conversations: the calibration the analysts' page shows per judge.

Per judge, over the rated conversations it answered (its first sample of each): the number, exact agreement,
Cohen's κ with quadratic weights (disagreements cost by the squared distance on the scale), Spearman's ρ, and the
mean scale value of the judge and of the people, overall and per source — whether the judge, who is told neither
the label nor who answered, reproduces the people's difference between the sources."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from generation.selectors import judge_ratings_frame, judges_of
from studies.models import Response, Study

from .judge_format import DIALOGUE_PREFIX
from .models import ChatRating
from .turns import chat_settings


def weighted_kappa(a, b, categories: list[int]) -> float:
    """Cohen's κ of two raters' values with quadratic weights; NaN when the expected disagreement is 0."""
    index = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    observed = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        observed[index[x], index[y]] += 1
    n = observed.sum()
    if n == 0:
        return math.nan
    observed /= n
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    weights = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)], dtype=float)
    denominator = (weights * expected).sum()
    return float(1 - (weights * observed).sum() / denominator) if denominator > 0 else math.nan


def people_values(study: Study) -> pd.DataFrame:
    """Each rated conversation's response id (its transcript), source and the participant's scale value."""
    rows = ChatRating.objects.filter(conversation__participant__study=study).values_list(
        "conversation_id", "conversation__condition__name", "scale_value"
    )
    return pd.DataFrame(list(rows), columns=["conversation", "source", "people"])


def calibration_table(judged: pd.DataFrame, people: pd.DataFrame, categories: list[int]) -> dict:
    """The calibration of one judge (module doc): `judged` has `conversation`, `judge`; `people` has
    `conversation`, `source`, `people`."""
    both = people.merge(judged, on="conversation")
    if both.empty:
        return {"conversations": 0}
    rho = (
        spearmanr(both["judge"], both["people"]).statistic
        if both["judge"].nunique() > 1 and both["people"].nunique() > 1
        else math.nan
    )
    by_source = both.groupby("source")[["judge", "people"]].mean().round(3).reset_index().to_dict("records")
    return {
        "conversations": len(both),
        "agreement": round(float((both["judge"] == both["people"]).mean()), 3),
        "kappa": round(weighted_kappa(both["judge"], both["people"], categories), 3),
        "spearman": None if not math.isfinite(rho) else round(float(rho), 3),
        "judge_mean": round(float(both["judge"].mean()), 3),
        "people_mean": round(float(both["people"].mean()), 3),
        "by_source": by_source,
    }


def judge_calibrations(study: Study) -> list[dict]:
    """The calibration of each of the study's judges (module doc), by judge name."""
    judges = judges_of(study=study)
    if not judges:
        return []
    conversation_of = {
        pk: int(dialogue[len(DIALOGUE_PREFIX) :])
        for pk, dialogue in Response.objects.filter(
            prompt__study=study, prompt__dialogue_id__startswith=DIALOGUE_PREFIX
        ).values_list("pk", "prompt__dialogue_id")
    }
    people = people_values(study)
    categories = sorted(int(o["value"]) for o in chat_settings(study).scale)
    out = []
    for judge in judges:
        ratings = judge_ratings_frame(judge=judge)
        first = ratings[ratings["sample_index"] == 0]
        judged = pd.DataFrame(
            {
                "conversation": [conversation_of.get(r) for r in first["response_id"]],
                "judge": first["value"].astype(int).to_numpy(),
            }
        ).dropna(subset=["conversation"])
        out.append({"judge": judge.name, **calibration_table(judged, people, categories)})
    return out
