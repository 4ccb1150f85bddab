"""Seeded simulation of the early-elimination rule (:mod:`.eliminate`), vectorised over runs: the guarantee's test
and the benchmark both call :func:`simulate`. Trials are independent; within a trial the K checkpoints share a scene:
with probability ``shared`` a checkpoint's outcome is ``u < p_i`` for the trial's one uniform ``u`` (hard scenes are
hard for every checkpoint), else it draws its own uniform."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rollbench.checkpoints.eliminate import Design, fixed_n


def _outcomes(rng: np.random.Generator, runs: int, n: int, p: np.ndarray, shared: float) -> np.ndarray:
    """(runs, K, n) 0/1 outcomes of ``n`` new trials."""
    u = rng.random((runs, 1, n))
    own = rng.random((runs, p.size, n))
    use_shared = rng.random((runs, p.size, n)) < shared
    return (np.where(use_shared, u, own) < p[None, :, None]).astype(np.int8)


def simulate(
    p: Sequence[float], d: Design, runs: int, rng: np.random.Generator, shared: float = 0.0, chunk: int = 500
) -> dict[str, Any]:
    """The rule on ``runs`` simulated training runs with true rates ``p``: ``{"runs", "wrong"`` (chosen more than
    delta below the best), ``"trials"`` (mean trials run, all checkpoints), ``"fixed_trials"`` (K x fixed N)``}``."""
    rate = np.asarray(p, dtype=float)
    wrong, trials = 0, 0.0
    for start in range(0, runs, chunk):
        w, t = _chunk(rate, d, min(chunk, runs - start), rng, shared)
        wrong, trials = wrong + w, trials + t
    return {
        "runs": runs,
        "wrong": wrong,
        "trials": trials / runs,
        "fixed_trials": rate.size * fixed_n(rate.size, d.delta, d.alpha),
    }


def _chunk(rate: np.ndarray, d: Design, runs: int, rng: np.random.Generator, shared: float) -> tuple[int, float]:
    k = rate.size
    alive = np.ones((runs, k), dtype=bool)
    chosen = np.full(runs, -1)
    succ = np.zeros((runs, k))
    both = np.zeros((runs, k, k))  # trials both succeeded
    used = np.zeros((runs, k))
    prev = 0
    rows = np.arange(runs)
    for n_look, n in enumerate(d.looks):
        going = chosen < 0
        if n > prev:
            x = _outcomes(rng, runs, n - prev, rate, shared).astype(np.float32)
            succ += x.sum(axis=2)
            both += x @ x.transpose(0, 2, 1)
            used += (n - prev) * (alive & going[:, None])
        prev = n
        rates = np.where(alive, succ / n, -1.0)
        best = np.argmax(rates, axis=1)
        sb = succ[rows, best][:, None]
        s = sb - succ  # (runs, k): sum of x_best - x_j over the n trials
        disc = sb + succ - 2 * both[rows, best]  # trials where exactly one of the two succeeded
        lower = s / n - d.radius(n, disc, s)
        other = alive & (np.arange(k)[None, :] != best[:, None])
        out = other & (lower > 0) & going[:, None]
        alive &= ~out
        rest = other & ~out
        stop = going & (~rest.any(axis=1) | (n_look == len(d.looks) - 1) | np.all(~rest | (lower >= -d.delta), axis=1))
        chosen[stop] = best[stop]
    return int(np.sum(rate.max() - rate[chosen] > d.delta)), float(used.sum())
