"""Cost of the policy-call deadline (``rollbench.run.deadline.Deadline``): the ``zero`` policy (in a one-slot
``PolicyLoop``, as the episode loop drives it) called directly and through the wrapper (which hands each call to its helper thread and waits for the reply).

Run: ``.venv/bin/python benchmarks/bench_deadline.py [--calls 20000] [--reps 5]``; prints the median µs per call of
each side and the difference, the overhead every policy call of a run pays.

``--eval N`` measures what that costs a whole in-process run instead: ``evaluate`` of ``metaworld/MT10`` with N
episodes per task and MetaWorld's expert, called inline (``metaworld-expert``: ``PolicyInfo.bounded``) against the
same expert declared unbounded (``bench_deadline:threaded_expert``), so every call goes through the deadline's helper
thread while the background committer runs; interleaved repetitions, medians, identical episode lengths checked.
``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_deadline.py --eval 5 --reps 3``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from rollbench.core.batch import BatchPolicy
from rollbench.core.contracts import Observation
from rollbench.core.registry import make_policy
from rollbench.envs.scripted import TASKS
from rollbench.run.deadline import Deadline
from rollbench.run.lockstep import PolicyLoop


def per_call_us(wrapped: bool, calls: int) -> float:
    def build() -> BatchPolicy:
        return PolicyLoop([make_policy("zero", {})])

    policy: BatchPolicy = Deadline(build, 300.0, "policy") if wrapped else build()
    policy.reset_slot(0, TASKS["scripted/reach"], 0)
    obs = Observation(state=np.zeros(4, np.float32))
    t0 = time.perf_counter()
    for _ in range(calls):
        policy.act_batch([0], [obs], [""])
    elapsed = time.perf_counter() - t0
    policy.close()
    return elapsed / calls * 1e6


def threaded_expert(name: str, options: dict) -> object:
    """MetaWorld's expert with ``bounded`` cleared: its calls go through the deadline's helper thread."""
    from dataclasses import replace

    policy = make_policy("metaworld-expert", {})
    policy.info = replace(policy.info, bounded=False)
    return policy


def eval_seconds(policy: str, episodes: int) -> tuple[float, list[int]]:
    import tempfile
    from pathlib import Path

    from rollbench.api import Execution, evaluate

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = evaluate(env="metaworld/MT10", policy=policy, episodes=episodes, seed=0, out=Path(tmp) / "run",
                     execution=Execution(workers=1))  # fmt: skip
        elapsed = time.perf_counter() - t0
    assert r.status == "OK", r.reasons
    return elapsed, [e.length for e in r.episodes]


def compare_eval(episodes: int, reps: int) -> None:
    sides = {"inline (bounded)": "metaworld-expert", "deadline thread": "bench_deadline:threaded_expert"}
    times: dict[str, list[float]] = {k: [] for k in sides}
    lengths: dict[str, list[int]] = {}
    for r in range(reps):
        for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
            t, lengths[name] = eval_seconds(sides[name], episodes)
            times[name].append(t)
    if len({tuple(v) for v in lengths.values()}) != 1:
        raise SystemExit("the two sides recorded different episodes")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"load average {os.getloadavg()[0]:.2f}; MT10 x {episodes} episodes in-process, {reps} repetitions")
    for k, v in times.items():
        print(f"{k:>17}: median {med[k]:.2f} s ({', '.join(f'{x:.2f}' for x in v)})")
    print(f"deadline thread / inline: {med['deadline thread'] / med['inline (bounded)']:.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--eval", type=int, default=0, metavar="N", help="whole-run comparison, N episodes per task")
    args = ap.parse_args()
    if args.eval:
        compare_eval(args.eval, args.reps)
        return
    bare, wrapped = [], []
    for _ in range(args.reps):  # interleaved, so load drift hits both sides alike
        bare.append(per_call_us(False, args.calls))
        wrapped.append(per_call_us(True, args.calls))
    b, w = statistics.median(bare), statistics.median(wrapped)
    print(f"load average {os.getloadavg()[0]:.2f}, {args.reps} repetitions of {args.calls} calls")
    print(f"direct {b:.1f} us/call, through Deadline {w:.1f} us/call: overhead {w - b:.1f} us per policy call")


if __name__ == "__main__":
    main()
