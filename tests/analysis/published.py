"""The published ratings (shared/data/llm-empathy-evaluation) as the plain frames the judge statistics take."""

import pandas as pd

from tests.studies.helpers import DATASET

CONDITIONS = ("human", "chatgpt", "chatgpt_empathy")


def published_human_ratings() -> pd.DataFrame:
    """One row per published rating: response_id, rater, value, condition, emotion, valence, words."""
    data = pd.read_csv(DATASET)
    frames = []
    for condition in CONDITIONS:
        frames.append(
            pd.DataFrame(
                {
                    "response_id": condition + ":" + data.index.astype(str),
                    "rater": data[f"annotator_{condition}"].astype(str),
                    "value": data[f"rating_{condition}"].astype(int),
                    "condition": condition,
                    "emotion": data["emotion"],
                    "valence": data["sentiment"],
                    "words": data[f"response_{condition}"].fillna("").str.split().str.len(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
