"""Load on one ``rollbench serve-policy`` server: 1, 8, 32 and 64 concurrent sessions, ws and http, with and without
an image, on loopback (127.0.0.1 only).

Each session is rollbench's own client (``make_policy("ws://..." | "http://...")``) in its own thread, reset to
``scripted/reach`` and then calling ``act`` a fixed number of times (bounded: ``--calls`` calls in total per
configuration, at least 10 per session). The served policy is ``scripted-expert`` (microseconds per call), so the
numbers are the cost of the transport and the server. Each session sends its own state, and every reply is compared
with the in-process expert's action for that state: a mismatch would be cross-talk between sessions. The image is
one 224x224 RGB camera (the task's ``top``), as a VLA client sends it. Clients and server share this machine, so the
clients' own cost (one Python process, one GIL) is part of every figure.

Reported per configuration: calls, wall time, throughput (calls/s), per-call latency p50/p95/p99/max (ms), errors,
mismatches, and the server's peak resident memory (``VmHWM`` of /proc/PID/status) after it.

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_load.py [--calls 640] [--concurrency 1,8,32,64]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from rollbench.core.contracts import Observation
from rollbench.core.registry import make_policy, resolve_tasks

ROLLBENCH = str(Path(sys.executable).parent / "rollbench")
TASK = resolve_tasks("scripted/reach")[0]


def start_server(protocol: str) -> tuple[subprocess.Popen, str]:
    cmd = [ROLLBENCH, "serve-policy", "--policy", "scripted-expert", "--protocol", protocol, "--port", "0"]
    proc = subprocess.Popen([*cmd, "--host", "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise SystemExit(f"serve-policy --protocol {protocol} did not start: {line!r}")
    return proc, line.split()[-1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def observation(i: int, image: bool) -> Observation:
    rng = np.random.default_rng(i)
    state = rng.uniform(-0.9, 0.9, TASK.state_dim).astype(np.float32)
    images = {TASK.cameras[0]: rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)} if image else {}
    return Observation(state=state, images=images)


def run(url: str, sessions: int, calls: int, image: bool) -> dict[str, float]:
    per = max(10, calls // sessions)
    expert = make_policy("scripted-expert")
    expert.reset(TASK, 0)
    obs = [observation(i, image) for i in range(sessions)]
    expected = [np.atleast_2d(expert.act(o, TASK.instruction)).astype(np.float32) for o in obs]
    clients = [make_policy(url, {"timeout_s": 60}) for _ in range(sessions)]
    for c in clients:
        c.reset(TASK, 0)
    times: list[list[float]] = [[] for _ in range(sessions)]
    errors, mismatches = [0], [0]
    start = threading.Barrier(sessions + 1)

    def session(i: int) -> None:
        start.wait()
        for _ in range(per):
            t0 = time.perf_counter()
            try:
                got = clients[i].act(obs[i], TASK.instruction)
            except Exception as exc:
                errors[0] += 1
                if errors[0] == 1:
                    print(f"  first error ({sessions} sessions): {type(exc).__name__}: {exc}", flush=True)
                continue
            times[i].append(time.perf_counter() - t0)
            if not np.array_equal(got, expected[i]):
                mismatches[0] += 1

    threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for c in clients:
        c.close()
    lat = np.asarray([x for ts in times for x in ts])
    return {
        "calls": float(sessions * per),
        "wall_s": wall,
        "calls_per_s": len(lat) / wall,
        "p50": 1e3 * float(np.percentile(lat, 50)),
        "p95": 1e3 * float(np.percentile(lat, 95)),
        "p99": 1e3 * float(np.percentile(lat, 99)),
        "max": 1e3 * float(lat.max()),
        "errors": float(errors[0]),
        "mismatches": float(mismatches[0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=640, help="calls per configuration (>= 10 per session)")
    ap.add_argument("--concurrency", default="1,8,32,64", help="comma-separated session counts (at most 64)")
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    if not all(1 <= c <= 64 for c in levels):
        raise SystemExit("--concurrency levels must be 1..64 (the server's default --max-sessions)")

    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    head = f"{'protocol':<9}{'image':<7}{'sessions':>9}{'calls':>7}{'calls/s':>9}{'p50 ms':>9}{'p95 ms':>9}"
    print(head + f"{'p99 ms':>9}{'max ms':>9}{'errors':>7}{'mismatch':>9}{'server RSS MB':>14}")
    for protocol in ("ws", "http"):
        proc, url = start_server(protocol)
        try:
            run(url, 1, 20, True)  # warm-up: imports, first instance, connections
            for image in (False, True):
                for n in levels:
                    r = run(url, n, args.calls, image)
                    print(
                        f"{protocol:<9}{'224²' if image else '-':<7}{n:>9}{int(r['calls']):>7}{r['calls_per_s']:>9.0f}"
                        f"{r['p50']:>9.2f}{r['p95']:>9.2f}{r['p99']:>9.2f}{r['max']:>9.1f}{int(r['errors']):>7}"
                        f"{int(r['mismatches']):>9}{peak_rss_mb(proc.pid):>14.0f}",
                        flush=True,
                    )
        finally:
            proc.kill()
            proc.wait()
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
