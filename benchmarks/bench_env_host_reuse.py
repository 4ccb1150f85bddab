"""Env-host start-up with and without reuse (docs/env-host.md "Reuse"): the seconds from asking for a task's env to
its first observation, for a run of consecutive tasks, when every task starts its own far-side process (``fresh``,
the behaviour before reuse) and when one process is kept across them (``reused``).

For each family (``libero_ref``: LIBERO's tasks on robosuite 1.4.1; ``liberoplus``: LIBERO-Plus instances, each its
own task), the same ``--tasks`` consecutive tasks are built (no cameras: start-up only), reset (seeded, init state 0:
LIBERO's hard first reset and the 10 settle steps) and closed, in both modes; the modes alternate per repetition
so the shared machine's load hits both alike. Reported per mode: the first task (which starts a process in both
modes) and the median of the later ones (a new process each in ``fresh``; a kept one, ``drop`` then ``make``, in
``reused``), and the host's ``hello`` (interpreter start and imports) alone.

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_env_host_reuse.py [--family libero_ref|liberoplus|all]
[--tasks 4] [--reps 1]``
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any


def tasks_of(family: str, n: int) -> list[str]:
    from rollbench.core.registry import env_families

    fam: Any = env_families()[family]
    if family == "liberoplus":  # runnable instances of the whole categories, alternating categories
        names = [t.name for t in fam.tasks() if t.perturbation and t.perturbation.category in ("camera", "robot")]
        return names[:: max(1, len(names) // n)][:n]
    return [f"libero_ref/libero_spatial/{k}" for k in range(n)]


def one_pass(family: str, names: list[str], reuse: bool) -> list[float]:
    from rollbench.core.registry import EnvOptions, env_families
    from rollbench.envs.hosted.remote import POOL

    fam: Any = env_families()[family]
    fam.reuse_host = reuse
    POOL.close_all()
    out = []
    try:
        for seed, name in enumerate(names):
            t0 = time.perf_counter()
            env = fam.make(fam.task(name), EnvOptions(cameras=(), image_size=(256, 256)))
            env.reset(seed=seed, initial_state=0)
            out.append(time.perf_counter() - t0)
            env.close()
    finally:
        POOL.close_all()
        fam.reuse_host = type(fam).reuse_host
    return out


def hello_s(family: str) -> float:
    from rollbench.core.registry import env_families
    from rollbench.envs.hosted.remote import EnvHost, offscreen_gl_env

    fam: Any = env_families()[family]
    args = ["--package", fam.package, "--instruction", fam.instruction]
    t0 = time.perf_counter()
    host = EnvHost("bench", fam.python(), "libero_far", args, {**offscreen_gl_env(), **fam.host_env})
    took = time.perf_counter() - t0
    host.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="all", choices=("libero_ref", "liberoplus", "all"))
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    families = ["libero_ref", "liberoplus"] if a.family == "all" else [a.family]
    result: dict[str, Any] = {"machine": platform.platform(), "tasks": a.tasks, "reps": a.reps, "families": {}}
    for family in families:
        names = tasks_of(family, a.tasks)
        runs: dict[str, list[list[float]]] = {"fresh": [], "reused": []}
        for _ in range(a.reps):
            for mode in ("fresh", "reused"):
                runs[mode].append(one_pass(family, names, mode == "reused"))
        row: dict[str, Any] = {"tasks": names, "hello_s": round(hello_s(family), 2)}
        for mode, passes in runs.items():
            row[mode] = {
                "first_s": round(statistics.median(p[0] for p in passes), 2),
                "later_median_s": round(statistics.median(x for p in passes for x in p[1:]), 2),
                "total_s": round(statistics.median(sum(p) for p in passes), 2),
                "raw": [[round(x, 2) for x in p] for p in passes],
            }
        result["families"][family] = row
        print(json.dumps({family: row}), flush=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
