"""The pairwise preference analysis of one frame of votes, and the files it writes: Bradley–Terry strengths (plain,
length-controlled and with the left side's advantage) with two-way cluster bootstrap intervals, the win matrix,
win rates against the baseline, position bias and agreement on repeated pairs (kinds.pairwise.bradley_terry computes
them; this module assembles, tabulates and draws).

`pairwise_analyze_frame(frame, baseline=...)` takes the frame of the pairwise export (one row per answered
non-attention pair, kinds.pairwise.bradley_terry's module doc) and returns a dict of DataFrames and a JSON-serialisable
"summary"; `pairwise_outputs_write(result, out_dir)` writes bt_scores.csv (`condition,strength,ci_low,ci_high`
first), win_matrix.csv, win_rates.csv, position_bias.csv, agreement.csv, model_terms.csv, summary.json, two PNG
figures and a self-contained report.html. The same frame, baseline, seed and replicates give the same bytes.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from . import bradley_terry as bt

# Each test of the pairwise kind's declared plan (studies/kinds/pairwise.py PAIRWISE_PLAN) by its key: the table
# of the result that reports it. The analysis reports the declared primary test's table as primary.
TABLE_BY_KEY = {
    "bradley_terry": "bt_scores",
    "win_rates": "win_rates",
    "length": "model_terms",
    "position": "position_bias",
    "agreement": "agreement",
}
FIT_LABELS = {
    "plain": "Davidson Bradley–Terry",
    "length": "controlling for length (the replies' length difference as a covariate)",
    "position": "with the left side's advantage as a covariate",
}
TERM_LABELS = {
    "tie": "tie parameter ν",
    "position": "left side's advantage γ (log-odds)",
    "length": "length β (log-odds per doubling of one reply's length over the other's)",
}
METHOD = (
    "Strengths are log-strengths of a Bradley–Terry model with ties (Davidson), fitted by maximum likelihood, the "
    "baseline fixed at 0: a condition 0.2 above another wins e^0.2 ≈ 1.22 times as often as it loses against it. "
    "95 % intervals from a two-way cluster bootstrap: raters, prompts and votes each resampled, variance V_rater + "
    "V_prompt − V_vote (Cameron, Gelbach & Miller), Student's t on the fewer of raters and prompts. Win rates count non-tied votes, with intervals clustered by "
    "rater; ties are reported apart."
)


def _clean(value):
    """JSON-safe: NaN and infinities become None, numpy scalars plain numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _records(frame: pd.DataFrame) -> list[dict]:
    return _clean(frame.to_dict(orient="records"))


def _fit_with_intervals(votes, baseline, covariates, *, seed, n_boot):
    fit = bt.davidson_fit(votes, baseline=baseline, covariates=covariates, check=False)
    boot = bt.twoway_bootstrap(votes, fit, covariates=covariates, n_boot=n_boot, seed=seed)
    return fit, boot


def pairwise_analyze_frame(
    frame: pd.DataFrame,
    *,
    baseline: str,
    seed: int = 0,
    n_boot: int = 1000,
    conditions: Sequence[str] | None = None,
) -> dict:
    """Everything the pairwise analysis reports, from the votes in `frame` (module doc). `conditions`: the study's
    conditions (default: those voted on), so that one without votes is named in the error. BradleyTerryError (a
    ValueError) when the votes cannot give strengths: a missing column or a bad choice, a condition without votes,
    conditions never compared, a condition that never won or tied (its strength unbounded)."""
    bt.frame_check(frame)
    if frame.empty:
        raise bt.BradleyTerryError("there are no answered pairs to analyse")
    votes = bt.votes_from_frame(frame, conditions)
    votes.index(baseline)
    bt.identification_check(votes)
    notes: list[str] = []
    plain, plain_boot = _fit_with_intervals(votes, baseline, (), seed=seed, n_boot=n_boot)
    fits = {"plain": (plain, plain_boot)}
    for name in ("length", "position"):
        try:
            fits[name] = _fit_with_intervals(votes, baseline, (name,), seed=seed, n_boot=n_boot)
        except bt.BradleyTerryError as exc:
            notes.append(f"The fit {FIT_LABELS[name]} is not reported: {exc}")
    matrix = bt.win_matrix(frame, votes.conditions)
    scores = _scores(votes, fits, matrix)
    rates = bt.win_rates(frame, baseline=baseline, conditions=votes.conditions)
    position = _position_table(frame, fits)
    agree = bt.agreement(frame)
    agreement_table = pd.DataFrame(
        [
            {"measure": f"{what} {kind}", "value": agree[f"{what}_{kind}"], "units": agree["units_repeated"],
             "votes": agree["votes_on_repeated_units"]}
            for what in ("choice", "both_inadequate")
            for kind in ("percent_agreement", "alpha")
            if f"{what}_{kind}" in agree
        ],
        columns=["measure", "value", "units", "votes"],
    )  # fmt: skip
    if not agree["units_repeated"]:
        notes.append("Agreement: no prompt and pair of conditions was answered by two raters.")
    terms = _terms(fits)
    unbounded = {name: sum(boot.unbounded.values()) for name, (_, boot) in fits.items()}
    if any(unbounded.values()):
        notes.append(
            "In some bootstrap replicates a condition never won or never lost (an unbounded strength): "
            f"{unbounded} of {3 * n_boot} per fit. They are left out of the intervals, which are then too narrow "
            "if there are many: too few votes for the intervals to be trusted."
        )
    summary = {
        "kind": "pairwise",
        "baseline": baseline,
        "conditions": list(votes.conditions),
        "votes": votes.n,
        "raters": int(votes.rater.max()) + 1,
        "prompts": int(votes.prompt.max()) + 1,
        "tie_share": float((votes.outcome == bt.TIE).mean()),
        "both_inadequate_share": float(bt.flag_values(frame["both_inadequate"]).mean()),
        "seed": seed,
        "bootstrap_replicates_per_unit": n_boot,
        "interval_degrees_of_freedom": plain_boot.df,
        "method": METHOD,
        "strengths": _records(scores),
        "model_terms": _records(terms),
        "win_rates": _records(rates),
        "position_bias": _records(position),
        "agreement": _clean(agree),
        "unbounded_bootstrap_replicates": unbounded,
        "notes": notes,
    }
    return {
        "baseline": baseline,
        "conditions": list(votes.conditions),
        "bt_scores": scores,
        "model_terms": terms,
        "win_matrix": matrix,
        "win_rates": rates,
        "position_bias": position,
        "agreement": agreement_table,
        "summary": _clean(summary),
    }


def _scores(votes, fits, matrix: pd.DataFrame) -> pd.DataFrame:
    plain, boot = fits["plain"]
    rows = []
    for name in votes.conditions:
        mine = matrix[matrix["condition"] == name]
        row = {
            "condition": name,
            "strength": plain.strengths[name],
            "ci_low": boot.ci_low[name],
            "ci_high": boot.ci_high[name],
            "se": boot.se[name],
        }
        for suffix, key in (("lc", "length"), ("pos", "position")):
            fit, fit_boot = fits.get(key, (None, None))
            row[f"strength_{suffix}"] = fit.strengths[name] if fit else math.nan
            row[f"ci_low_{suffix}"] = fit_boot.ci_low[name] if fit else math.nan
            row[f"ci_high_{suffix}"] = fit_boot.ci_high[name] if fit else math.nan
        row.update(
            votes=int(mine["votes"].sum()),
            wins=int(mine["wins"].sum()),
            losses=int(mine["losses"].sum()),
            ties=int(mine["ties"].sum()),
        )
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.sort_values(["strength", "condition"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )


def _terms(fits) -> pd.DataFrame:
    rows = []
    for fit_name, (fit, boot) in fits.items():
        for term in ("tie", *fit.coefficients):
            rows.append(
                {"fit": fit_name, "term": term, "label": TERM_LABELS[term], "estimate": boot.estimates[term],
                 "se": boot.se[term], "ci_low": boot.ci_low[term], "ci_high": boot.ci_high[term]}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["fit", "term", "label", "estimate", "se", "ci_low", "ci_high"])


def _position_table(frame: pd.DataFrame, fits) -> pd.DataFrame:
    share = bt.position_bias(frame)
    rows = [
        {"measure": "left_share_of_non_tied_votes", "estimate": share["left_share"], "null": 0.5,
         "se": share["se"], "ci_low": share["ci_low"], "ci_high": share["ci_high"], "p": share["p"],
         "left_wins": share["left_wins"], "right_wins": share["right_wins"], "ties": share["ties"]}
    ]  # fmt: skip
    if "position" in fits:
        _, boot = fits["position"]
        rows.append(
            {"measure": "left_side_advantage_log_odds", "estimate": boot.estimates["position"], "null": 0.0,
             "se": boot.se["position"], "ci_low": boot.ci_low["position"], "ci_high": boot.ci_high["position"],
             "p": float(2 * norm.sf(abs(boot.estimates["position"]) / boot.se["position"]))
             if boot.se["position"] > 0 else math.nan,
             "left_wins": share["left_wins"], "right_wins": share["right_wins"], "ties": share["ties"]}
        )  # fmt: skip
    return pd.DataFrame(rows)


# --- files ---------------------------------------------------------------------------------------------------------

CSV_TABLES = ("bt_scores", "win_matrix", "win_rates", "position_bias", "agreement", "model_terms")


def _strengths_figure(scores: pd.DataFrame):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 0.9 + 0.55 * len(scores)), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(scores))
    for offset, suffix, label, colour in (
        (-0.15, "", "plain", "#2471a3"),
        (0.15, "_lc", "length-controlled", "#c0392b"),
    ):
        estimate = scores[f"strength{suffix}"].to_numpy(dtype=float)
        low, high = (
            scores[f"ci_low{suffix}"].to_numpy(dtype=float),
            scores[f"ci_high{suffix}"].to_numpy(dtype=float),
        )
        if np.isnan(estimate).all():
            continue
        ax.errorbar(estimate, y + offset, xerr=[estimate - low, high - estimate], fmt="o", color=colour,
                    capsize=3, label=label)  # fmt: skip
    ax.axvline(0, color="#555", linewidth=0.8)
    ax.set_yticks(y, scores["condition"])
    ax.invert_yaxis()
    ax.set_xlabel("log-strength (baseline = 0), 95 % interval")
    ax.set_title("Bradley–Terry strengths")
    ax.legend(loc="lower right", fontsize=8)
    return fig


def _matrix_figure(matrix: pd.DataFrame, conditions: list[str]):
    from matplotlib.figure import Figure

    k = len(conditions)
    share = np.full((k, k), np.nan)
    text = [["" for _ in range(k)] for _ in range(k)]
    for row in matrix.itertuples():
        i, j = conditions.index(row.condition), conditions.index(row.opponent)
        share[i, j] = row.win_share
        text[i][j] = f"{row.win_share:.0%} / {row.tie_share:.0%}\nn={row.votes}"
    fig = Figure(figsize=(2 + 1.4 * k, 1.5 + 1.0 * k), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(np.nan_to_num(share, nan=0.0), cmap="Greens", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, text[i][j] or "—", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(k), conditions, rotation=30, ha="right")
    ax.set_yticks(range(k), conditions)
    ax.set_xlabel("opponent")
    ax.set_ylabel("condition")
    ax.set_title("Win share / tie share of each condition (row) against each opponent (column)")
    fig.colorbar(image, ax=ax, label="win share")
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    return buffer.getvalue()


def _alt_strengths(scores: pd.DataFrame) -> str:
    parts = [
        f"{r.condition} {r.strength:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        + (f", length-controlled {r.strength_lc:+.2f}" if not math.isnan(r.strength_lc) else "")
        for r in scores.itertuples()
    ]
    return "Log-strengths with 95 % intervals, baseline 0: " + "; ".join(parts) + "."


def _alt_matrix(matrix: pd.DataFrame) -> str:
    parts = [
        f"{r.condition} against {r.opponent}: wins {r.win_share:.0%}, ties {r.tie_share:.0%} of {r.votes}"
        for r in matrix.itertuples()
    ]
    return "Win matrix. " + "; ".join(parts) + "."


def pairwise_outputs_write(result: dict, out_dir: Path) -> list[Path]:
    """Write the analysis `result` (pairwise_analyze_frame) into `out_dir`: the CSV tables, summary.json, the
    figures (PNG) and report.html (figures embedded, each with a text alternative; headed by `result["title"]`
    when the caller sets one, e.g. the study's title and slug). Returns the paths."""
    from django.template.loader import render_to_string

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CSV_TABLES:
        path = out / f"{name}.csv"
        result[name].to_csv(path, index=False, lineterminator="\n")
        written.append(path)
    path = out / "summary.json"
    path.write_text(
        json.dumps(result["summary"], indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    written.append(path)
    figures = []
    for name, fig, alt in (
        ("bt_strengths", _strengths_figure(result["bt_scores"]), _alt_strengths(result["bt_scores"])),
        (
            "win_matrix",
            _matrix_figure(result["win_matrix"], result["conditions"]),
            _alt_matrix(result["win_matrix"]),
        ),
    ):
        data = _png(fig)
        path = out / f"{name}.png"
        path.write_bytes(data)
        written.append(path)
        figures.append(
            {"name": name, "alt": alt, "src": "data:image/png;base64," + base64.b64encode(data).decode()}
        )
    tables = [
        (caption, result[key].to_html(index=False, classes="data", border=0, float_format=lambda v: f"{v:.3f}",
                                      na_rep="n/a"))
        for key, caption in (
            ("bt_scores", "Strengths (log-strength, baseline 0) with 95 % intervals; _lc: length-controlled; "
                          "_pos: with the left side's advantage"),
            ("model_terms", "Model terms"),
            ("win_rates", f"Win rates against the baseline ({result['baseline']}), non-tied votes"),
            ("position_bias", "Position bias"),
            ("win_matrix", "Win matrix (ties apart)"),
            ("agreement", "Agreement between raters on repeated pairs"),
        )
    ]  # fmt: skip
    html = render_to_string(
        "analysis/pairwise_report.html",
        {
            "summary": result["summary"],
            "figures": figures,
            "tables": tables,
            "title": result.get("title", ""),
        },
    )
    path = out / "report.html"
    path.write_text(html, encoding="utf-8")
    written.append(path)
    return written
