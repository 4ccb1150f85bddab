"""The reproduction verdict for one suite: a run's successes/episodes against a published rate.

The test (two-sided, level :data:`ALPHA` = 0.05):

* reference episode count unknown: the exact binomial test of the run's successes against the published rate taken
  as exact (:func:`scipy.stats.binomtest`, two-sided by the "minimum likelihood" rule: the p-value sums the
  probabilities of all outcomes no more likely than the one observed);
* reference count known (stated, or the whole number that prints as the rate): Fisher's exact test of the 2x2 table
  run vs reference (:func:`rollbench.grading.stats.fisher_exact_test`). Fisher over Boschloo's unconditional test
  (:func:`scipy.stats.boschloo_exact`, more powerful): Boschloo took 20.7 s for one 1500-vs-1500 table on this
  machine (Fisher: 0.01 s), and a report compares four or more suites; Fisher's test is conservative, so a
  ``below``/``above`` from it is not overstated.

Power (:func:`binomial_power`): the probability that the exact binomial test above rejects the published rate when
the true rate is ``gap`` points away from it (below it, or above when below is impossible), with the run's episode
count, computed exactly by summing Binomial(n, p_ref - gap) over the test's rejection region. With a known reference
count it is the power against the reference *rate*, an upper bound on the two-sample test's power (the reference's
own sampling noise is ignored). ``episodes_needed`` is the smallest n (scanning n = 1, 2, …; at most
:data:`MAX_EPISODES_SCAN`) whose power reaches :data:`TARGET_POWER` = 0.8; ``detectable_gap_pts`` is the smallest
whole gap (in points) the run's n detects with that power.

Verdict rule (stated once, applied to every suite and the overall row):

* ``below`` / ``above``: p < 0.05 and the run's rate is below / above the reference (whatever the power: a
  significant difference is a finding);
* ``consistent``: p >= 0.05 and the run's rate is within ``gap_pts`` (default 5) points of the reference: no
  evidence of a difference, and the estimate itself is close;
* ``underpowered``: p >= 0.05 but the run's rate is more than ``gap_pts`` points from the reference: the estimate
  differs by more than the gap and the run is too small to tell whether the difference is real.

Every row also carries the run's power to detect a ``gap_pts``-point gap and ``episodes_needed`` for 80% power, so
a ``consistent`` run of few episodes says how much (or how little) its agreement rules out.

Sources: exact binomial test and Fisher's exact test, Agresti, *Categorical Data Analysis*, 3rd ed., §1.4 and §3.5;
the 0.8 power convention, J. Cohen (1988), *Statistical Power Analysis for the Behavioral Sciences*, §2.4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from rollbench.core.records import JsonRecord

ALPHA = 0.05
TARGET_POWER = 0.8
DEFAULT_GAP_PTS = 5.0
MAX_EPISODES_SCAN = 5000
_REL_TIE = 1 + 1e-7  # scipy.stats.binomtest's relative tolerance for "no more likely than" (scipy 1.17 _binomtest.py)

Verdict = Literal["consistent", "below", "above", "underpowered"]


def rejection_region(n: int, p_ref: float, alpha: float = ALPHA) -> np.ndarray:
    """Boolean mask over k = 0..n (shape ``(n + 1,)``): True where the two-sided exact binomial test of k successes
    in n against ``p_ref`` has p <= ``alpha``. The same p-values as :func:`scipy.stats.binomtest` (checked in the
    tests for every k), computed for all k at once: p(k) sums the Binomial(n, p_ref) probabilities of outcomes no
    more likely than k (relative tolerance 1e-7, as scipy), and is 1 when k = n * p_ref."""
    from scipy.stats import binom

    ks = np.arange(n + 1)
    pmf = binom.pmf(ks, n, p_ref)
    order = np.sort(pmf)
    cum = np.cumsum(order)
    idx = np.searchsorted(order, pmf * _REL_TIE, side="right")
    pvals = np.minimum(1.0, cum[idx - 1])
    pvals[np.isclose(ks, n * p_ref, rtol=0.0, atol=1e-12)] = 1.0
    return pvals <= alpha


def _alternative(p_ref: float, gap: float) -> float | None:
    if p_ref - gap >= 0.0:
        return p_ref - gap
    return p_ref + gap if p_ref + gap <= 1.0 else None


def binomial_power(n: int, p_ref: float, gap: float, alpha: float = ALPHA) -> float:
    """Exact power (probability in [0, 1]) of the two-sided exact binomial test with ``n`` episodes against
    ``p_ref`` when the true rate is ``p_ref - gap`` (``p_ref + gap`` when that is below 0); 0.0 when ``n == 0`` or
    neither alternative is a probability. ``gap`` is a fraction (0.05 = 5 points)."""
    from scipy.stats import binom

    alt = _alternative(p_ref, gap)
    if n <= 0 or alt is None:
        return 0.0
    mask = rejection_region(n, p_ref, alpha)
    return float(min(1.0, binom.pmf(np.arange(n + 1), n, alt)[mask].sum()))


def episodes_needed(p_ref: float, gap: float, target: float = TARGET_POWER) -> int | None:
    """Smallest n in 1..:data:`MAX_EPISODES_SCAN` whose :func:`binomial_power` reaches ``target``; None past it."""
    for n in range(1, MAX_EPISODES_SCAN + 1):
        if binomial_power(n, p_ref, gap) >= target:
            return n
    return None


def detectable_gap_pts(n: int, p_ref: float, target: float = TARGET_POWER) -> int | None:
    """Smallest whole gap in points (1..100) that ``n`` episodes detect with power >= ``target``; None if none."""
    for g in range(1, 101):
        if binomial_power(n, p_ref, g / 100.0) >= target:
            return g
    return None


@dataclass(frozen=True)
class SuiteVerdict(JsonRecord):
    """One row of a reproduction: run counts and Wilson interval, reference, difference (points), test, verdict."""

    successes: int
    episodes: int
    rate: float | None
    ci95_low: float
    ci95_high: float
    reference_rate: float
    reference_successes: int | None
    reference_episodes: int | None
    difference_pts: float | None
    test: str
    p_value: float
    gap_pts: float
    power: float
    episodes_needed: int | None
    detectable_gap_pts: int | None
    verdict: Verdict


def judge(
    successes: int,
    episodes: int,
    reference_rate_pct: float,
    reference_successes: int | None,
    reference_episodes: int | None,
    gap_pts: float = DEFAULT_GAP_PTS,
) -> SuiteVerdict:
    """The verdict (module docstring) for ``successes``/``episodes`` against a published rate in percent, with the
    reference's counts when known. Raises ValueError on counts outside ``0 <= successes <= episodes``."""
    from scipy.stats import binomtest

    from rollbench.grading.stats import fisher_exact_test, wilson_interval

    low, high = wilson_interval(successes, episodes)
    p_ref = reference_rate_pct / 100.0
    if reference_successes is not None and reference_episodes is not None:
        test = "fisher-exact (two-sided), run vs reference counts"
        p = fisher_exact_test(successes, episodes, reference_successes, reference_episodes).p_value
    else:
        test = "exact binomial (two-sided) against the published rate"
        p = float(binomtest(successes, episodes, p_ref).pvalue) if episodes else 1.0
    rate = successes / episodes if episodes else None
    diff = None if rate is None else round(100.0 * rate - reference_rate_pct, 10)
    power = binomial_power(episodes, p_ref, gap_pts / 100.0)
    if p < ALPHA and diff is not None and diff != 0:
        verdict: Verdict = "below" if diff < 0 else "above"
    else:
        verdict = "consistent" if diff is not None and abs(diff) <= gap_pts else "underpowered"
    return SuiteVerdict(
        successes=successes,
        episodes=episodes,
        rate=rate,
        ci95_low=low,
        ci95_high=high,
        reference_rate=reference_rate_pct,
        reference_successes=reference_successes,
        reference_episodes=reference_episodes,
        difference_pts=diff,
        test=test,
        p_value=min(1.0, p),
        gap_pts=gap_pts,
        power=power,
        episodes_needed=episodes_needed(p_ref, gap_pts / 100.0),
        detectable_gap_pts=detectable_gap_pts(episodes, p_ref),
        verdict=verdict,
    )
