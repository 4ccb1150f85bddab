"""Batched stepping throughput: episodes per hour at ``--batch-size B`` against ``B = 1``, with the ``gpu-standin``
policy (a fixed latency per call whatever the batch size: a model of GPU inference, see
``rollbench/testing/standin.py``) over MetaWorld's scripted expert.

Every variant runs the same plan (``metaworld/reach-v3``, N episodes, seed 0, a fixed horizon) in this one process,
in interleaved repetitions (the order alternates), and the script checks that every variant recorded the same
per-episode results as ``B = 1`` (the batching must change the speed only). Reported: median wall seconds per
variant, episodes per hour, and the ratio to ``B = 1``. The target (issue 13) is ``B = 8`` ≥ 5× ``B = 1`` with a 50 ms
policy.

``--served ws|http`` runs the same stand-in behind one ``rollbench serve-policy --max-batch max(sizes)`` on loopback
for every variant: ``B = 1`` sends one observation per request, ``B > 1`` one batch request per lockstep step, which
the server answers with one batched call of the stand-in (50 ms for the whole batch).

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_batch.py [--episodes 16] [--latency-ms 50] [--reps 3]
[--sizes 1,4,8] [--served ws|http] [--window-ms 5]``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollbench.api import Execution, evaluate


@contextlib.contextmanager
def served(protocol: str, options: dict[str, Any], max_batch: int, window_ms: float) -> Iterator[str]:
    """``rollbench serve-policy --max-batch`` of the stand-in on a loopback port; yields the URL to evaluate."""
    cmd = [sys.executable, "-m", "rollbench", "serve-policy", "--policy", "gpu-standin", "--protocol", protocol]
    cmd += ["--port", "0", "--policy-options", json.dumps(options), "--max-batch", str(max_batch)]
    cmd += ["--batch-window-ms", str(window_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving gpu-standin at URL", once the port is open
        if not line.startswith("serving "):
            raise SystemExit(f"serve-policy did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def run(policy: str, options: dict[str, Any], episodes: int, max_steps: int, batch: int) -> tuple[float, Any]:
    out = Path(tempfile.mkdtemp(prefix="bench-batch-")) / "run"
    t0 = time.perf_counter()
    result = evaluate(
        env="metaworld/reach-v3",
        policy=policy,
        policy_options=options,
        episodes=episodes,
        max_steps=max_steps,
        seed=0,
        out=out,
        execution=Execution(batch_size=batch),
    )
    wall = time.perf_counter() - t0
    facts = [(e.length, e.success, e.termination_reason) for e in result.episodes]
    return wall, facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="1,4,8")
    ap.add_argument("--served", choices=("ws", "http"), default=None)
    ap.add_argument("--window-ms", type=float, default=5.0, help="serve-policy --batch-window-ms (--served)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    options = {"inner": "metaworld-expert", "latency_ms": args.latency_ms}
    walls: dict[int, list[float]] = {b: [] for b in sizes}
    reference = None
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        run_options: dict[str, Any]
        if args.served:  # one server for every variant: B = 1 sends single requests, B > 1 batch requests
            policy = stack.enter_context(served(args.served, options, max(sizes), args.window_ms))
            run_options = {}
        else:
            policy, run_options = "gpu-standin", options
        for rep in range(args.reps):
            for b in sizes if rep % 2 == 0 else reversed(sizes):
                wall, facts = run(policy, run_options, args.episodes, args.max_steps, b)
                if reference is None:
                    reference = facts
                if facts != reference:
                    raise SystemExit(f"batch size {b} recorded different episodes than the first variant")
                walls[b].append(wall)
    where = (
        f"served over {args.served} by serve-policy --max-batch {max(sizes)} --batch-window-ms {args.window_ms:g}"
        if args.served
        else "in-process"
    )
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"gpu-standin {args.latency_ms:g} ms over metaworld-expert, {where}; metaworld/reach-v3 x {args.episodes}")
    print(f"episodes, max-steps {args.max_steps}, {args.reps} reps (median); {now}; {os.cpu_count()} cores; load")
    print(f"average (1/5/15 min) {'/'.join(f'{x:.1f}' for x in load_before)} before, ", end="")
    print(f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())} after; identical per-episode results in every variant")
    print("| batch size | wall s (median) | all reps s | episodes/hour | vs B=1 |")
    print("|---:|---:|---|---:|---:|")
    base = statistics.median(walls[sizes[0]])
    for b in sizes:
        m = statistics.median(walls[b])
        reps = ", ".join(f"{w:.1f}" for w in walls[b])
        print(f"| {b} | {m:.2f} | {reps} | {args.episodes / m * 3600:,.0f} | {base / m:.2f}x |")


if __name__ == "__main__":
    main()
