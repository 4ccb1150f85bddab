"""Episodes used by ``rollbench checkpoints --eliminate`` against evaluating every checkpoint at the fixed N that
gives the same guarantee, P(chosen more than delta below the best) <= alpha (simulated, numpy, seeded).

The training run: 10 checkpoints, the best at 0.80, two near it (0.79, 0.78), seven 10 to 30 points below
(0.70, 0.67, 0.63, 0.60, 0.57, 0.53, 0.50). Trials are independent scenes; ``shared`` is the chance that a
checkpoint's outcome on a scene is decided by the scene's one difficulty draw rather than its own (checkpoints of
one training run tend to succeed and fail on the same scenes): 0, 0.5 and 0.8. For each, 4,000 simulated runs of
the rule (:func:`rollbench.checkpoints.simulate.simulate`, the same look logic as the command) at delta 0.1 and 0.05,
alpha 0.05: mean episodes used over all checkpoints, wrong choices, and the fixed-N design's 10 x N.

Reproduce: ``.venv/bin/python benchmarks/bench_checkpoints.py``.
"""

from __future__ import annotations

import time

import numpy as np

from rollbench.checkpoints.eliminate import design
from rollbench.checkpoints.simulate import simulate

RATES = [0.80, 0.79, 0.78, 0.70, 0.67, 0.63, 0.60, 0.57, 0.53, 0.50]
RUNS = 4000


def main() -> None:
    print("| delta | alpha | shared | looks | episodes used (mean) | fixed N x 10 | saved | wrong choices |")
    print("|---|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    for delta in (0.1, 0.05):
        d = design(len(RATES), delta, 0.05)
        for shared in (0.0, 0.5, 0.8):
            r = simulate(RATES, d, RUNS, np.random.default_rng(43), shared=shared)
            saved = 1 - r["trials"] / r["fixed_trials"]
            print(f"| {delta} | 0.05 | {shared} | {len(d.looks)} (N_max {d.looks[-1]}) | {r['trials']:.0f} | "
                  f"{r['fixed_trials']} | {saved:.1%} | {r['wrong']} / {r['runs']} |")  # fmt: skip
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
