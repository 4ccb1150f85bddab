"""Episodes to a decision: ``rollbench sequential`` (truncated SPRT on discordant pairs) against the fixed-N exact
McNemar test sized for the same power (80% at delta) and alpha.

Part 1, simulated (numpy, seeded): for a design at delta (default 0.2 at p_a = 0.5, alpha 0.05, beta 0.2) and true
effects 0, delta/2, delta, 2 delta (B's rate p_a + effect; A and B independent on a pair, and positively correlated
in a second block), 20,000 sequences each: mean pairs to the decision, how often each decision, against the fixed-N
test's N (``compare --power``) and its exact power at that truth (``grading.power.mcnemar_power``).

Part 2, real runs (``--real``): MetaWorld push-v3 with the scripted expert at two action-noise levels, and the expert
against ``zero``, each through ``run_sequential`` (the command's code path) into a temporary directory.

Part 0, exact (issue 40; ``--exact-only`` prints it alone): expected pairs to a decision from the exact dynamic
programme (:mod:`rollbench.grading.sequential_oc`), against the fixed-N exact McNemar test with the same power at the
same truth, at delta/2, delta, 2 delta and correlations -0.3, 0, 0.3, with looks after every pair, in rounds of 8 pairs
and with looks every 8 pairs.

Reproduce: ``.venv/bin/python benchmarks/bench_sequential.py [--real | --exact-only]`` (MUJOCO_GL=egl for --real).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from rollbench.grading.power import mcnemar_power
from rollbench.grading.sequential import DECISIONS, decide_many, design

SEQUENCES = 20_000


def _pairs(rng: np.random.Generator, p_a: float, p_b: float, rho: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Correlated Bernoulli pairs (correlation ``rho`` between A's and B's outcome on a pair)."""
    both = p_a * p_b + rho * np.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    a_only, b_only = p_a - both, p_b - both
    u = rng.random((SEQUENCES, n))
    xa = (u < both + a_only).astype(np.int8)
    xb = ((u < both) | ((u >= both + a_only) & (u < both + a_only + b_only))).astype(np.int8)
    return xa, xb


def simulated(delta: float, p_a: float, look_every: int) -> None:
    rule = design(delta, p_a=p_a)
    n_fixed = rule.fixed_n
    print(f"\n### design delta {delta:g} at p_a {p_a:g}, look every {look_every} pair(s)")
    print(f"budget {rule.budget} pairs; fixed-N exact McNemar: {n_fixed} pairs (80% power at delta); exact type-I")
    print(f"error bound {rule.type1_error:.4f}, futility error {rule.futility_error:.3f}, power {rule.power:.3f}\n")
    print("| rho | true effect | p_A -> p_B | fixed N (pairs) | fixed-N power | sequential mean pairs | saving |"
          " P(B better) | P(A better) | P(futility) | P(budget) | stopped by N |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rho in (0.0, 0.3):
        for label, eff in (("0", 0.0), ("δ/2", delta / 2), ("δ", delta), ("2δ", 2 * delta)):
            p_b = min(p_a + eff, 0.999)
            rng = np.random.default_rng([32, int(eff * 1000), int(rho * 10), look_every])
            xa, xb = _pairs(rng, p_a, p_b, rho, rule.budget)
            code, pairs = decide_many(rule, xa, xb, look_every)
            share = {name: float(np.mean(code == i)) for i, name in enumerate(DECISIONS)}
            both = p_a * p_b + rho * np.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
            fixed_power = mcnemar_power(n_fixed, p_a - both, p_b - both) if eff else float("nan")
            print(f"| {rho:g} | {label} | {p_a:g} -> {p_b:g} | {n_fixed} | {fixed_power:.3f} | {pairs.mean():.1f} | "
                  f"{1 - pairs.mean() / n_fixed:+.0%} | {share['b_better']:.3f} | {share['a_better']:.3f} | "
                  f"{share['futility']:.3f} | {share['budget_exhausted']:.3f} | {np.mean(pairs <= n_fixed):.3f} |")  # fmt: skip


def real() -> None:
    from rollbench.core.spec import build_spec
    from rollbench.sequential.runner import SequentialConfig, run_sequential

    os.environ.setdefault("MUJOCO_GL", "egl")
    cases = [
        ("expert noise 1.0 (A) vs expert noise 0.3 (B)", ("metaworld-expert", 1.0), ("metaworld-expert", 0.3)),
        ("zero (A) vs expert (B)", ("zero", 0.0), ("metaworld-expert", 0.0)),
        ("expert noise 0.3 (A) vs expert noise 0.5 (B)", ("metaworld-expert", 0.3), ("metaworld-expert", 0.5)),
    ]
    print("\n| task | A vs B | decision | at pair | B only / A only | episodes run | fixed-N episodes | wall s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, (pa, na), (pb, nb)) in enumerate(cases):
            a = build_spec(env="metaworld/push-v3", policy=pa, action_noise=na, episodes=1)
            b = build_spec(env="metaworld/push-v3", policy=pb, action_noise=nb, episodes=1)
            t0 = time.monotonic()
            doc = run_sequential(a, b, Path(tmp) / str(i), SequentialConfig(delta=0.2))
            t = doc["tasks"][0]
            last = t["looks"][-1]
            ran = t["episodes_recorded"]["a"] + t["episodes_recorded"]["b"]
            print(f"| metaworld/push-v3 | {label} | {t['decision']} | {t['stopped_at']} | {last['b_only']} / "
                  f"{last['a_only']} | {ran} | {2 * t['design']['fixed_n']} | {time.monotonic() - t0:.0f} |")  # fmt: skip


def _split(p_a: float, p_b: float, rho: float) -> tuple[float, float]:
    """(P(A only), P(B only)) of a pair whose outcomes have correlation ``rho``."""
    both = p_a * p_b + rho * np.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    return p_a - both, p_b - both


def _fixed_n_for(power: float, a_only: float, b_only: float, start: int) -> int:
    """The smallest N at which the exact McNemar test (alpha 0.05) has at least ``power`` (exact)."""
    n = max(1, start)
    while n > 1 and mcnemar_power(n - 1, a_only, b_only) >= power:
        n -= 1
    while mcnemar_power(n, a_only, b_only) < power and n < 100_000:
        n += 1
    return n


def exact_table(delta: float = 0.2, p_a: float = 0.5) -> None:
    """Issue 40's table, exact (dynamic programming, no simulation): expected pairs to a decision against the fixed-N
    exact McNemar test with the same power at the same truth, at delta/2, delta, 2 delta and rho -0.3, 0, 0.3; looks
    after every pair (one pair at a time, or rounds of 8 pairs: workers x batch = 8) and looks every 8 pairs."""
    from rollbench.grading.sequential_oc import schedule_oc

    designs = {1: design(delta, p_a=p_a), 8: design(delta, p_a=p_a, look_every=8)}
    print(f"\n### exact, design delta {delta:g} at p_a {p_a:g}, alpha 0.05, 80% power wanted")
    for look, rule in designs.items():
        print(f"look every {look}: budget {rule.budget}, exact type-I bound {rule.type1_error:.4f}, power at delta "
              f"{rule.power:.4f} (fixed-N test: {rule.power_target:.4f} at {rule.fixed_n} pairs)")  # fmt: skip
    print("\n| truth | rho | schedule | power (seq.) | fixed N, equal power | E[pairs] seq. | saving |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for label, eff in (("δ/2", delta / 2), ("δ", delta), ("2δ", 2 * delta)):
        for rho in (-0.3, 0.0, 0.3):
            a_only, b_only = _split(p_a, p_a + eff, rho)
            for name, look, rnd in (("every pair", 1, 1), ("rounds of 8, looks every pair", 1, 8),
                                    ("looks every 8", 8, 8)):  # fmt: skip
                rule = designs[look]
                oc = schedule_oc(rule.bounds.upper, rule.bounds.futile, b_only, a_only, look)
                n_eq = _fixed_n_for(oc.b_better, a_only, b_only, rule.fixed_n)
                pairs = oc.expected_pairs(rnd)
                print(f"| {label} | {rho:+g} | {name} | {oc.b_better:.4f} | {n_eq} | {pairs:.1f} | "
                      f"{1 - pairs / n_eq:+.1%} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="also run the MetaWorld comparisons")
    ap.add_argument("--exact-only", action="store_true", help="only issue 40's exact table")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {SEQUENCES} sequences per row")
    exact_table()
    if args.exact_only:
        return
    simulated(0.2, 0.5, 1)
    simulated(0.2, 0.5, 10)
    simulated(0.15, 0.6, 1)
    if args.real:
        real()


if __name__ == "__main__":
    main()
