"""The proportional-odds (ordinal logistic) model of a rating study: the rating against the condition (and the
emotion where the data allow), statsmodels' OrderedModel with frequency weights. A fit whose standard errors are
not finite is reported as not converged, with the reason, never as a result.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd


@dataclass
class OrdinalFit:
    formula: str
    converged: bool
    n: int
    coefficients: pd.DataFrame = field(default_factory=pd.DataFrame)
    note: str = ""

    def as_dict(self) -> dict:
        d = asdict(self)
        d["coefficients"] = self.coefficients.to_dict(orient="records")
        return d


def ordinal_model(
    rows: pd.DataFrame, conditions: list[str], baseline: str, *, with_emotion: bool = True
) -> OrdinalFit:
    """Proportional-odds (ordered logit) model of the rating on condition (baseline = reference), with emotion as a
    covariate when it fits. If the model with emotion fails or does not converge, the condition-only model is fitted
    and the note says why; if that fails too, the fit is returned with converged=False and the reason."""
    attempts = [True, False] if with_emotion else [False]
    notes: list[str] = []
    last: OrdinalFit | None = None
    for use_emotion in attempts:
        formula = "rating ~ condition" + (" + emotion" if use_emotion else "")
        try:
            fit = _ordinal_fit(rows, conditions, baseline, use_emotion)
        except Exception as exc:  # noqa: BLE001 — statsmodels raises many kinds (LinAlgError, ValueError, ...)
            notes.append(f"{formula}: failed ({type(exc).__name__}: {exc})")
            continue
        if fit.converged:
            fit.note = "; ".join([*notes, fit.note]).strip("; ")
            return fit
        notes.append(f"{formula}: {fit.note or 'did not converge'}")
        last = fit
    if last is not None:
        last.note = "; ".join(notes)
        return last
    return OrdinalFit(formula="rating ~ condition", converged=False, n=len(rows), note="; ".join(notes))


def _frequency_weighted_ordered_model():
    """statsmodels' OrderedModel whose log-likelihood weighs each row by a frequency.

    The ordered-logit likelihood of the ratings depends only on how many ratings fall in each (covariate pattern,
    value) cell, so the model is fitted on those cells (at most conditions × emotions × values rows) with their
    counts as weights: the same maximum, the same Hessian (statsmodels differentiates `loglike` numerically), but a
    million ratings cost what a few hundred do. A test holds the result equal to OrderedModel on the raw rows."""
    from scipy.special import expit
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    class FrequencyWeightedOrderedModel(OrderedModel):
        def __init__(self, endog, exog, *, freq_weights, **kwargs):
            super().__init__(endog, exog, **kwargs)
            self.freq_weights = np.asarray(freq_weights, dtype=float)

        def loglike(self, params):
            return float((self.loglikeobs(params) * self.freq_weights).sum())

        # The logistic CDF and density in closed form: scipy.stats.logistic's generic machinery costs ~1 ms a call
        # and the numerical Hessian calls them thousands of times. Same function, same numbers.
        def cdf(self, x):
            return expit(x)

        def pdf(self, x):
            p = expit(x)
            return p * (1 - p)

    return FrequencyWeightedOrderedModel


#: A log-odds standard error above this means separated cells, not an estimate (an odds-ratio CI of e^±98).
SE_SEPARATION = 50.0


def _exp(value: float) -> float:
    """exp of a log-odds, inf where a diverging fit (separated cells) pushes it past float range."""
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf


def _ordinal_fit(rows: pd.DataFrame, conditions: list[str], baseline: str, use_emotion: bool) -> OrdinalFit:
    present = [c for c in conditions if c in set(rows["condition"])]
    if baseline not in present or len(present) < 2:
        raise ValueError("needs the baseline and at least one other condition")
    levels = sorted(rows["value"].unique())
    if len(levels) < 3:
        raise ValueError("needs at least three distinct ratings")
    keys = ["condition", "emotion", "value"] if use_emotion else ["condition", "value"]
    if use_emotion and rows["emotion"].nunique() < 2:
        raise ValueError("one emotion only")
    cells = rows.groupby(keys, sort=True).size().rename("n").reset_index()
    endog = pd.Series(pd.Categorical(cells["value"], categories=levels, ordered=True))
    cond = pd.Categorical(cells["condition"], categories=[baseline] + [c for c in present if c != baseline])
    exog = pd.get_dummies(cond, prefix="condition", drop_first=True, dtype=float)
    if use_emotion:
        emotions = sorted(rows["emotion"].unique())
        emo = pd.get_dummies(
            pd.Categorical(cells["emotion"], categories=emotions),
            prefix="emotion",
            drop_first=True,
            dtype=float,
        )
        exog = pd.concat([exog, emo], axis=1)
    model = _frequency_weighted_ordered_model()(
        endog, exog, freq_weights=cells["n"].to_numpy(), distr="logit"
    )
    # statsmodels warns (HessianInversionWarning, RuntimeWarning from a negative variance) when the information
    # matrix cannot be inverted, and then reports NaN standard errors: recorded here, not printed, and the fit is
    # reported as not usable below instead of "converged" with blank standard errors.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = model.fit(method="bfgs", disp=False, maxiter=1000)
        params, bse, pvalues = result.params, result.bse, result.pvalues
        ci = result.conf_int()
    converged = bool(result.mle_retvals.get("converged", False))
    note = "" if converged else "optimizer did not report convergence"
    se = np.asarray(bse, dtype=float)
    if converged and not np.all(np.isfinite(se) & (se < SE_SEPARATION)):
        # A nearly singular information matrix either fails to invert (NaN) or, depending on the floating-point
        # path of the machine, inverts to standard errors of thousands on the log-odds scale: both mean the
        # cells are (quasi-)separated and no interval is meaningful.
        converged = False
        inverted = any("Hessian" in type(w.message).__name__ or "Hessian" in str(w.message) for w in caught)
        if inverted:
            reason = "the Hessian could not be inverted"
        elif np.all(np.isfinite(se)):
            reason = f"some exceed {SE_SEPARATION:g} on the log-odds scale"
        else:
            reason = "some are not finite"
        note = f"standard errors not available: {reason} (too few ratings in some cells for this model)"
    lines = []
    for name in params.index:
        if not name.startswith("condition_"):
            continue
        lines.append(
            {
                "term": name,
                "log_odds": float(params[name]),
                "se": float(bse[name]),
                "p": float(pvalues[name]),
                "odds_ratio": _exp(params[name]),
                "or_ci_low": _exp(ci.loc[name, 0]),
                "or_ci_high": _exp(ci.loc[name, 1]),
            }
        )
    return OrdinalFit(
        formula="rating ~ condition" + (" + emotion" if use_emotion else ""),
        converged=converged,
        n=int(len(rows)),
        coefficients=pd.DataFrame(lines),
        note=note,
    )
