"""How far below the fixed-N test can a sequential rule go at delta? Bayes-optimal boundaries by backward induction
(the dynamic programme STEP uses), evaluated exactly, to put issue 40's 40% goal in context (not what
``rollbench sequential`` runs).

For weights ``l0`` (a false "better" under theta = 1/2) and ``l1`` (no "B better" under theta1, and symmetrically),
and a cost of 1 per discordant pair under theta1 or 1 - theta1, backward induction over (discordant pairs d, B-only
k), d <= D, gives the decision at every state; the tables are then evaluated exactly: type-I error bound (futility
non-binding, :func:`rollbench.grading.sequential.type1_error`), power and expected pairs at p_a 0.5 -> 0.7,
independent arms (:mod:`rollbench.grading.sequential_oc`), the pair budget 3 D (rarely binding). ``l0`` is bisected
for alpha = 0.05; ``l1`` is swept (power rises with it).

Reproduce: ``PYTHONPATH=src .venv/bin/python benchmarks/bench_sequential_bayes.py`` (about a minute per row on the
loaded shared machine).
"""

from __future__ import annotations

import math

import numpy as np

from rollbench.grading.sequential import Boundaries, type1_error
from rollbench.grading.sequential_oc import schedule_oc

THETA1, ALPHA, D, FIXED_N = 0.7, 0.05, 100, 104  # FIXED_N: exact McNemar pairs with power >= 0.8035 at 0.5 -> 0.7


def bayes_tables(l0: float, l1: float, big: float = 1e4) -> Boundaries:
    """Decision tables (budget 3 D pairs) of the Bayes rule; every state at d = D stops."""
    up = np.zeros(D + 1, dtype=np.int64)
    fut = np.full(D + 1, -1, dtype=np.int64)
    risk = np.zeros(0)
    for d in range(D, -1, -1):
        k = np.arange(d + 1)
        lp = np.exp(k * math.log(2 * THETA1) + (d - k) * math.log(2 * (1 - THETA1)))  # likelihood ratios vs 1/2
        lm = np.exp((d - k) * math.log(2 * THETA1) + k * math.log(2 * (1 - THETA1)))
        r_b, r_a, r_f = l0 + big * lm, l0 + big * lp, l1 * (lp + lm)
        cont = (lp + lm) + 0.5 * (risk[1:] + risk[:-1]) if d < D else np.full(d + 1, np.inf)
        is_b = (r_b <= r_a) & (r_b <= r_f) & (r_b <= cont)
        is_f = (r_f < r_b) & (r_f < r_a) & (r_f <= cont)
        up[d] = k[is_b].min() if is_b.any() else d + 1
        fut[d] = max(k[is_f].max(), d - k[is_f].min()) if is_f.any() else -1
        risk = np.minimum(np.minimum(np.minimum(r_b, r_a), r_f), cont)
    m = 3 * D
    return Boundaries(np.concatenate([up, np.arange(D + 2, m + 2)]), np.concatenate([fut, np.arange(D + 1, m + 1)]))


def main() -> None:
    print("| l1 | type-I bound | power at δ | E[pairs] | saving vs 104 | rounds of 8 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for l1 in (60.0, 62.0, 63.0, 65.0):
        lo, hi = 1.0, 1e6
        for _ in range(30):
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if type1_error(bayes_tables(mid, l1), 3 * D) <= ALPHA else (mid, hi)
        tables = bayes_tables(hi, l1)
        oc = schedule_oc(tables.upper, tables.futile, 0.35, 0.15, 1)
        e1, e8 = oc.expected_pairs(1), oc.expected_pairs(8)
        print(f"| {l1:g} | {type1_error(tables, 3 * D):.4f} | {oc.b_better:.4f} | {e1:.1f} | {1 - e1 / FIXED_N:+.1%} | "
              f"{1 - e8 / FIXED_N:+.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()
