"""Produces tests/analysis/ppi_reference.json with ppi-python (NOT a dependency of the project).

Run in a throwaway virtualenv:
    python -m venv /tmp/ppivenv && /tmp/ppivenv/bin/pip install ppi-python==0.2.3
    /tmp/ppivenv/bin/python tests/analysis/ppi_reference_make.py > tests/analysis/ppi_reference.json
"""

import json

import numpy as np
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

rng = np.random.default_rng(20261124)
cases = []


def add(name, y, f, fu, level):
    alpha = 1 - level
    lo, hi = ppi_mean_ci(y, f, fu, alpha=alpha)
    est = ppi_mean_pointestimate(y, f, fu)
    clo, chi = classical_mean_ci(y, alpha=alpha)
    lo1, hi1 = ppi_mean_ci(y, f, fu, alpha=alpha, lam=1.0)
    cases.append(
        {
            "name": name,
            "level": level,
            "y": y.tolist(),
            "f": f.tolist(),
            "f_unlabelled": fu.tolist(),
            "ppi_estimate": float(np.ravel(est)[0]),
            "ppi_ci": [float(np.ravel(lo)[0]), float(np.ravel(hi)[0])],
            "ppi_lam1_ci": [float(np.ravel(lo1)[0]), float(np.ravel(hi1)[0])],
            "classical_ci": [float(np.ravel(clo)[0]), float(np.ravel(chi)[0])],
        }
    )


# informative 0/1 judge: agrees with the person 80% of the time
y = (rng.random(80) < 0.5).astype(float)
f = np.where(rng.random(80) < 0.8, y, 1 - y)
yu = (rng.random(400) < 0.5).astype(float)
fu = np.where(rng.random(400) < 0.8, yu, 1 - yu)
add("informative_binary", y, f, fu, 0.95)
add("informative_binary_90", y, f, fu, 0.90)
# judge shares (several samples per response)
f2 = np.clip(y * 0.6 + rng.random(80) * 0.4, 0, 1).round(2)
fu2 = np.clip(yu * 0.6 + rng.random(400) * 0.4, 0, 1).round(2)
add("informative_shares", y, f2, fu2, 0.95)
# random judge
add("random_judge", y, (rng.random(80) < 0.3).astype(float), (rng.random(400) < 0.3).astype(float), 0.95)
# contrary judge: lambda clips to 0
add("contrary_judge", y, 1 - y, (rng.random(400) < 0.5).astype(float), 0.95)
HOW = (
    "Produced by tests/analysis/ppi_reference_make.py with ppi-python 0.2.3 (ppi_mean_ci, "
    "ppi_mean_pointestimate, classical_mean_ci) in a throwaway virtualenv; ppi-python is not a dependency."
)
print(json.dumps({"how": HOW, "cases": cases}, indent=1))
