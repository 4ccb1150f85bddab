"""Round-trip cost of a remote policy call on loopback, per protocol, against an in-process call of the same policy.

The policy is ``metaworld-expert``; the observation is a real one (``metaworld/pick-place-v3`` reset with seed 0:
the ``float64 (39,)`` state and two rendered 224×224 RGB cameras, ``corner`` and ``gripperPOV``), sent exactly as
``rollbench eval --policy ws://... / http://...`` sends it. The servers are real ``rollbench serve-policy``
subprocesses on 127.0.0.1. Backends are timed in interleaved rounds so drift on a shared machine hits all alike.

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_remote.py [--calls 200] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rollbench.core.contracts import Observation, Policy
from rollbench.core.registry import EnvOptions, make_env, make_policy, resolve_tasks

ROLLBENCH = str(Path(sys.executable).parent / "rollbench")
CAMERAS = ("corner", "gripperPOV")


def start_server(protocol: str) -> tuple[subprocess.Popen, str]:
    cmd = [ROLLBENCH, "serve-policy", "--policy", "metaworld-expert", "--protocol", protocol, "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise SystemExit(f"serve-policy --protocol {protocol} did not start: {line!r}")
    return proc, line.split()[-1]


def timed_calls(act: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        act()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="calls per backend per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    task = resolve_tasks("metaworld/pick-place-v3")[0]
    env = make_env(task, EnvOptions(cameras=CAMERAS, image_size=(224, 224)))
    obs = env.reset(0)
    with_images = Observation(state=obs.state, images={c: env.render(c) for c in CAMERAS}, raw=obs.raw)
    state_only = Observation(state=obs.state, raw=obs.raw)
    env.close()

    servers = [start_server("ws"), start_server("http")]
    try:
        policies: dict[str, Policy] = {
            "in-process": make_policy("metaworld-expert"),
            "ws (openpi msgpack)": make_policy(servers[0][1]),
            "http (JSON /act)": make_policy(servers[1][1]),
        }
        for p in policies.values():
            p.reset(task, 0)
        cases = {"2 cameras 224x224 + state": with_images, "state only": state_only}
        times: dict[tuple[str, str], list[float]] = {(c, b): [] for c in cases for b in policies}
        for o in cases.values():  # warm-up: connections, imports, caches
            for p in policies.values():
                timed_calls(lambda p=p, o=o: p.act(o, task.instruction), 20)
        for _ in range(args.rounds):
            for case, o in cases.items():
                for name, p in policies.items():
                    times[case, name] += timed_calls(lambda p=p, o=o: p.act(o, task.instruction), args.calls)
        for p in policies.values():
            p.close()
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()

    n = args.calls * args.rounds
    print(f"metaworld-expert, metaworld/pick-place-v3 observation; {n} calls per row; loopback; median and p95")
    print(f"{'observation':<28} {'backend':<22} {'ms/call':>9} {'p95 ms':>8} {'x in-process':>13} {'overhead ms':>12}")
    for case in cases:
        base = float(np.median(times[case, "in-process"]))
        for name in policies:
            t = np.asarray(times[case, name])
            med, p95 = float(np.median(t)), float(np.percentile(t, 95))
            print(
                f"{case:<28} {name:<22} {1e3 * med:>9.3f} {1e3 * p95:>8.3f} {med / base:>13.1f} "
                f"{1e3 * (med - base):>12.3f}"
            )


if __name__ == "__main__":
    main()
