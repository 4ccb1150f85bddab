"""Scenes as the unit of a paired comparison (issue 40, item 6).

A *scene* is a task's stored initial state (task x initial state). When a task's episodes repeat an initial state
(more episodes than stored states, e.g. 100 LIBERO episodes over 50 states), episodes of one scene are not
independent evidence: they share the scene's difficulty. Then the unit of independence is the scene, not the pair:

* the paired test is a **sign-flip (permutation) test** over the scene-level differences ``d_s`` = mean over the
  scene's pairs of (B - A): under the null hypothesis that A and B are exchangeable within each scene, every
  ``d_s`` is as likely to be ``-d_s``; the two-sided p-value is P(|sum_s e_s d_s| >= |sum_s d_s|) over random signs
  ``e_s``: exact enumeration of all 2^n sign patterns for n <= :data:`EXACT_MAX_SCENES` scenes, else
  :data:`RANDOM_PATTERNS` seeded random patterns (p = (1 + hits) / (1 + patterns), a valid Monte Carlo p-value);
* the interval is a **cluster bootstrap**: whole scenes are resampled with replacement (within each task, when
  pooled), and the difference is the resampled pairs' rate of B minus rate of A (percentile interval); one arm's
  success rate (``summarize``) has the same one-sample interval, :func:`cluster_bootstrap_rate`.

With one pair per scene and 0/1 outcomes the sign-flip test is the exact two-sided McNemar test (the scene
differences are the discordant pairs' +-1). Sources: R. A. Fisher (1935), *The Design of Experiments*, §21
(randomisation test of paired differences); B. Efron and R. Tibshirani (1993), *An Introduction to the Bootstrap*,
§8.4 (resampling the independent units of a clustered sample).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollbench.core.records import JsonRecord
from rollbench.grading.stats import BootstrapInterval, check_resamples, wilson_interval

EXACT_MAX_SCENES = 16  # 2^16 sign patterns enumerated at most
RANDOM_PATTERNS = 20_000
_TOL = 1e-9  # |sum| ties: scene differences are means of small integers


def repeats_scenes(scenes: Sequence[Hashable]) -> bool:
    """Whether some scene label occurs more than once (None labels, episodes without a stored initial state, are
    each their own scene and never repeat)."""
    seen = [s for s in scenes if s is not None and not (isinstance(s, tuple) and s[-1] is None)]
    return len(set(seen)) < len(seen)


@dataclass(frozen=True)
class SceneDifferences:
    """Per scene, in first-seen order: ``labels``, ``sizes`` (pairs) and ``diffs`` (mean of B - A over its pairs)."""

    labels: list[Hashable]
    sizes: np.ndarray
    diffs: np.ndarray


def scene_differences(
    a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray, scenes: Sequence[Hashable]
) -> SceneDifferences:
    """Group paired 0/1 outcomes ``a``, ``b`` (position i = one pair) by ``scenes`` (one label per pair).
    Raises ValueError on unequal lengths."""
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if not (x.size == y.size == len(scenes)):
        raise ValueError(f"need one scene per pair, got {x.size}, {y.size} outcomes and {len(scenes)} scenes")
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(s, len(index)) for s in scenes], dtype=np.int64)
    sizes = np.bincount(codes, minlength=len(index)) if codes.size else np.zeros(0, dtype=np.int64)
    sums = np.bincount(codes, weights=(y - x), minlength=len(index)) if codes.size else np.zeros(0)
    return SceneDifferences(list(index), sizes, sums / np.maximum(sizes, 1))


@dataclass(frozen=True)
class SignFlipResult(JsonRecord):
    """A two-sided sign-flip test: ``scenes`` (units), ``statistic`` (sum of the scene differences), ``p_value``,
    ``method`` (``exact`` or ``random``), ``patterns`` (sign patterns counted) and the ``seed`` of random ones."""

    scenes: int
    statistic: float
    p_value: float
    method: str
    patterns: int
    seed: int


def sign_flip_test(
    diffs: Sequence[float] | np.ndarray,
    *,
    exact_max: int = EXACT_MAX_SCENES,
    n_random: int = RANDOM_PATTERNS,
    seed: int = 0,
) -> SignFlipResult:
    """Two-sided sign-flip test of ``diffs`` (one value per independent unit) against a null symmetric about 0
    (module docstring). p = 1.0 with no unit or all differences 0. Raises ValueError for a non-1-D input."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1:
        raise ValueError(f"diffs must be 1-D, got shape {d.shape}")
    observed = float(d.sum())
    nz = d[np.abs(d) > _TOL]  # a zero difference is the same under both signs
    if nz.size == 0:
        return SignFlipResult(int(d.size), observed, 1.0, "exact", 1, seed)
    if nz.size <= exact_max:
        bits = (np.arange(2**nz.size, dtype=np.int64)[:, None] >> np.arange(nz.size)) & 1
        sums = (1 - 2 * bits) @ nz
        hits = int(np.sum(np.abs(sums) >= abs(observed) - _TOL))
        return SignFlipResult(int(d.size), observed, hits / sums.size, "exact", int(sums.size), seed)
    rng = np.random.Generator(np.random.PCG64(seed))
    signs = rng.integers(0, 2, size=(n_random, nz.size), dtype=np.int8) * 2 - 1
    sums = signs @ nz
    hits = int(np.sum(np.abs(sums) >= abs(observed) - _TOL))
    return SignFlipResult(int(d.size), observed, (1 + hits) / (1 + n_random), "random", n_random, seed)


def cluster_bootstrap_difference(
    a: Sequence[int] | np.ndarray,
    b: Sequence[int] | np.ndarray,
    scenes: Sequence[Hashable],
    *,
    strata: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> BootstrapInterval:
    """Percentile interval for rate(B) - rate(A) on paired 0/1 outcomes, resampling whole scenes with replacement
    (within each stratum, e.g. task, given per pair by ``strata``; a scene lies in one stratum). The observed
    difference is over all pairs; each resample's is its pairs' rates. ``None`` fields for no pair. Raises
    ValueError on unequal lengths or a confidence outside (0, 1); ConfigError for too many resamples."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    sd = scene_differences(x, y, scenes)
    check_resamples(n_resamples, len(sd.labels))
    if x.size == 0:
        return BootstrapInterval(None, None, None, confidence, n_resamples, seed, True)
    pair_stratum = list(strata) if strata is not None else [0] * x.size
    stratum_of = dict(zip(scenes, pair_stratum, strict=True))
    sums = sd.diffs * sd.sizes  # B - A successes per scene
    rng = np.random.Generator(np.random.PCG64(seed))
    total_diff, total_n = np.zeros(n_resamples), np.zeros(n_resamples)
    labels = np.array([str(stratum_of[s]) for s in sd.labels])
    for label in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == label)
        draw = idx[rng.integers(0, idx.size, size=(n_resamples, idx.size))]
        total_diff += sums[draw].sum(axis=1)
        total_n += sd.sizes[draw].sum(axis=1)
    diffs = total_diff / total_n
    tail = (1 - confidence) / 2
    low, high = np.quantile(diffs, [tail, 1 - tail])
    return BootstrapInterval(float(y.mean() - x.mean()), float(low), float(high), confidence, n_resamples, seed, True)


def cluster_bootstrap_rate(
    outcomes: Sequence[int] | np.ndarray,
    scenes: Sequence[Hashable],
    *,
    strata: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """Percentile interval ``(low, high)`` for one success rate from 0/1 ``outcomes`` (one per episode), resampling
    whole scenes (``scenes``: one label per episode) with replacement, within each stratum (``strata``: one label
    per episode, e.g. task; a scene lies in one stratum). Each resample's rate is its episodes' successes over its
    episodes; ``n_resamples`` resamples from numpy's PCG64 seeded by ``seed`` (the same interval every time).
    ``(None, None)`` for no episode. Raises ValueError on unequal lengths or a confidence outside (0, 1);
    ConfigError for too many resamples."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    y = np.asarray(outcomes, dtype=np.int64)
    if y.size != len(scenes) or (strata is not None and len(strata) != y.size):
        raise ValueError(f"need one scene (and stratum) per outcome, got {y.size} outcomes and {len(scenes)} scenes")
    if y.size == 0:
        return None, None
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(s, len(index)) for s in scenes], dtype=np.int64)
    check_resamples(n_resamples, len(index))
    sizes = np.bincount(codes, minlength=len(index))
    wins = np.bincount(codes, weights=y, minlength=len(index))
    stratum_of = dict(zip(scenes, strata if strata is not None else [0] * y.size, strict=True))
    labels = np.array([str(stratum_of[s]) for s in index])
    rng = np.random.Generator(np.random.PCG64(seed))
    total_wins, total_n = np.zeros(n_resamples), np.zeros(n_resamples)
    for label in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == label)
        draw = idx[rng.integers(0, idx.size, size=(n_resamples, idx.size))]
        total_wins += wins[draw].sum(axis=1)
        total_n += sizes[draw].sum(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(total_wins / total_n, [tail, 1 - tail])
    return float(low), float(high)


def rate_interval(
    outcomes: Sequence[int], tasks: Sequence[str], initial_states: Sequence[Hashable | None], *, seed: int = 0
) -> dict[str, Any]:
    """One success rate's 95% interval with the unit it resamples: ``{"unit", "scenes", "ci95_low", "ci95_high",
    "interval"}``. When some (task, initial state) repeats among the episodes (``initial_states`` None: a scene of its
    own), the unit is the scene: :func:`cluster_bootstrap_rate` stratified by task (10,000 resamples, ``seed``);
    else the episode, with the Wilson score interval. ``scenes``: distinct scenes (None for the episode unit)."""
    labels = [
        (t, s) if s is not None else (t, "episode", i)
        for i, (t, s) in enumerate(zip(tasks, initial_states, strict=True))
    ]
    if not repeats_scenes(labels):
        low, high = wilson_interval(int(sum(outcomes)), len(outcomes))
        return {"unit": "episode", "scenes": None, "ci95_low": low, "ci95_high": high, "interval": "Wilson"}
    b_low, b_high = cluster_bootstrap_rate(outcomes, labels, strata=list(tasks), seed=seed)
    how = f"cluster bootstrap over scenes (percentile, 10,000 resamples, seed {seed}, stratified by task)"
    return {"unit": "scene", "scenes": len(set(labels)), "ci95_low": b_low, "ci95_high": b_high, "interval": how}
