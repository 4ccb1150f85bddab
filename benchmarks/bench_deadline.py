"""Cost of the policy-call deadline (``rollbench.policies.deadline.Deadline``): the ``zero`` policy (in a one-slot
``PolicyLoop``, as the episode loop drives it) called directly and through the wrapper (which hands each call to its helper thread and waits for the reply).

Run: ``.venv/bin/python benchmarks/bench_deadline.py [--calls 20000] [--reps 5]``; prints the median µs per call of
each side and the difference, the overhead every policy call of a run pays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from rollbench.batching import BatchPolicy, PolicyLoop
from rollbench.envs.scripted import TASKS
from rollbench.policies.deadline import Deadline
from rollbench.registry import make_policy
from rollbench.types import Observation


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    bare, wrapped = [], []
    for _ in range(args.reps):  # interleaved, so load drift hits both sides alike
        bare.append(per_call_us(False, args.calls))
        wrapped.append(per_call_us(True, args.calls))
    b, w = statistics.median(bare), statistics.median(wrapped)
    print(f"load average {os.getloadavg()[0]:.2f}, {args.reps} repetitions of {args.calls} calls")
    print(f"direct {b:.1f} us/call, through Deadline {w:.1f} us/call: overhead {w - b:.1f} us per policy call")


if __name__ == "__main__":
    main()
