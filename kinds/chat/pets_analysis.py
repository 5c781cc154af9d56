"""PETS (kinds/chat/pets.py: its items, factors and keys) on the analysis frame: ten items answered on 0–100
sliders, two covarying factors, Emotional Responsiveness (ER) and Understanding & Trust (UT). A factor's score is
the mean of its items (0–100); the total is the mean of all ten. In the frame items are numbered 1–10 in the
order of `pets.PETS_ITEMS` (E1–E6, then U1–U4), columns `pets_1`…`pets_10`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import pets

PETS_ITEMS = tuple(range(1, len(pets.PETS_ITEMS) + 1))
PETS_FACTORS = {
    f"pets_{factor}": (name, tuple(i for i, (_, f, _) in enumerate(pets.PETS_ITEMS, start=1) if f == factor))
    for factor, name in pets.FACTORS.items()
}
PETS_TOTAL = "pets"
PETS_OUTCOMES = {PETS_TOTAL: "PETS (all ten items)", **{k: v[0] for k, v in PETS_FACTORS.items()}}


def item_column(item: int) -> str:
    """The frame's column of PETS item `item` (1–10)."""
    return f"pets_{item}"


def pets_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the PETS total and factor scores added (`pets`, `pets_er`, `pets_ut`): the mean of the
    answered items of each, on 0–100. A conversation missing any item of a score gets NaN for it (no partial
    means: the sliders are all required, so a gap is a record that did not finish the scale)."""
    missing = [item_column(i) for i in PETS_ITEMS if item_column(i) not in frame]
    if missing:
        raise ValueError(f"the frame has no PETS column {', '.join(missing)}")
    out = frame.copy()
    items = out[[item_column(i) for i in PETS_ITEMS]].astype(float)
    bad = ((items < 0) | (items > 100)).to_numpy()
    if bad.any():
        raise ValueError("PETS answers are on 0–100")
    out[PETS_TOTAL] = items.mean(axis=1, skipna=False)
    for key, (_, numbers) in PETS_FACTORS.items():
        out[key] = items[[item_column(i) for i in numbers]].mean(axis=1, skipna=False)
    return out


def cronbach_alpha(frame: pd.DataFrame, items: tuple[int, ...]) -> float:
    """Cronbach's α of `items` over the complete rows; NaN with fewer than two rows or items."""
    values = frame[[item_column(i) for i in items]].dropna().to_numpy(dtype=float)
    n, k = values.shape
    if n < 2 or k < 2:
        return float("nan")
    total_var = values.sum(axis=1).var(ddof=1)
    if total_var == 0:
        return float("nan")
    return float(k / (k - 1) * (1 - values.var(axis=0, ddof=1).sum() / total_var))


def reliability(frame: pd.DataFrame) -> dict[str, float]:
    """Cronbach's α of the whole scale and of each factor, on the study's own answers."""
    out = {PETS_TOTAL: cronbach_alpha(frame, PETS_ITEMS)}
    for key, (_, numbers) in PETS_FACTORS.items():
        out[key] = cronbach_alpha(frame, numbers)
    return {k: (round(v, 3) if np.isfinite(v) else None) for k, v in out.items()}
