"""The env host's cost (docs/env-host.md): LIBERO steps/s through the interpreter boundary against the same env
in-process, same task, cameras and image size, side by side in one run; and the memory of one far-side env.

Variants, each a freshly built env of ``libero_spatial`` task 0 reset to init state 0 (10 settle steps), then
``--steps`` random actions (seeded) timed:

* ``ref in-process``: LIBERO on the reference stack (robosuite 1.4.1, MuJoCo 3.2.3) driven inside
  ``.venv-libero-ref`` by the very adapter the env host runs (``far/libero_far.py``'s ``handle``), no pipe
  (``benchmarks/_env_host_far_side.py``): the same code and stack as the next variant minus the boundary;
* ``ref via env host``: ``libero_ref/libero_spatial/0`` from rollbench (``HostedLiberoEnv`` over the pipes);
* ``libero in-process``: rollbench's own ``libero/libero_spatial/0`` (robosuite 1.5.2), for context.

Each with images of both cameras on every step (``every 1``: the worst case, 2 x 256 x 256 x 3 bytes cross per
step) and on every 5th (``every 5``: what a replan-5 policy asks for). Repetitions are interleaved so the shared
machine's load hits every variant alike; median steps/s over ``--reps``. Memory: resident set (VmRSS) of the env
host process after the build and reset, and of the in-venv process (``ru_maxrss``) for comparison.

``--part split`` (also in ``all``) measures the boundary on the very same steps, immune to the machine's load
changing between variants: the far side reports its own time in every reply (``host_s``), the near side sums the
round trips; their difference is what the boundary costs (framing, copies, pipe transfer, scheduling).

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_env_host.py [--part split|side-by-side|all] [--steps 40]
[--reps 3] [--size 256]``
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BOTH = ("agentview", "robot0_eye_in_hand")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def random_steps(env: Any, steps: int, every: int, rng: np.random.Generator) -> None:
    """``steps`` uniform random actions in [-1, 1]^7, rendering both cameras on every ``every``-th step (the only
    steps whose images are asked for)."""
    for i in range(steps):
        env.expect_images(BOTH if i % every == 0 else ())
        env.step(rng.uniform(-1, 1, 7).astype(np.float32))
        if i % every == 0:
            env.render("agentview")
            env.render("robot0_eye_in_hand")


def near_rates(family: str, size: int, steps: int, reps: int, every: int) -> tuple[list[float], float | None]:
    from rollbench.core.registry import EnvOptions, env_families

    fam: Any = env_families()[family]
    env: Any = fam.make(fam.task(f"{family}/libero_spatial/0"), EnvOptions(cameras=BOTH, image_size=(size, size)))
    rates, rss = [], None
    try:
        for r in range(reps):
            env.expect_images(BOTH)
            env.reset(seed=r, initial_state=0)
            env.render("agentview")
            if hasattr(env.sim, "host"):
                rss = rss_mb(env.sim.host.pid)
            rng = np.random.default_rng(r)
            t0 = time.perf_counter()
            random_steps(env, steps, every, rng)
            rates.append(steps / (time.perf_counter() - t0))
    finally:
        env.close()
    return rates, rss


def split(size: int, steps: int, every: int) -> dict[str, float]:
    """The boundary's share of the same steps: one ``libero_ref`` env, ``steps`` random steps rendering both cameras
    every ``every`` steps; wall time of the loop, the round trips' sum, and the far side's own time inside them
    (``host_s`` of every reply). The in-process equivalent of the loop is ``wall - (round trips - far)``."""
    from rollbench.core.registry import EnvOptions
    from rollbench.envs.libero.ref import FAMILY

    env: Any = FAMILY.make(
        FAMILY.task("libero_ref/libero_spatial/0"), EnvOptions(cameras=BOTH, image_size=(size, size))
    )
    try:
        env.expect_images(BOTH)
        env.reset(seed=0, initial_state=0)
        rss = rss_mb(env.sim.host.pid)
        host, rng = env.sim.host, np.random.default_rng(0)
        host.round_trip_s = host.far_s = 0.0
        t0 = time.perf_counter()
        random_steps(env, steps, every, rng)
        wall = time.perf_counter() - t0
        return {"wall_s": wall, "round_trip_s": host.round_trip_s, "far_s": host.far_s, "rss_mb": rss}
    finally:
        env.close()


def far_rates(python: str, size: int, steps: int, reps: int, every: int) -> dict[str, Any]:
    out = subprocess.run(
        [python, str(REPO / "benchmarks" / "_env_host_far_side.py"), str(size), str(steps), str(reps), str(every)],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--part", choices=("split", "side-by-side", "all"), default="all")
    args = ap.parse_args()
    from rollbench.core.gl import configure_offscreen_gl
    from rollbench.envs.libero.ref import FAMILY

    configure_offscreen_gl()
    python = FAMILY.python()
    if python is None:
        sys.exit(f"libero_ref is not set up: {FAMILY.missing()}")
    print(f"# {platform.node()} {platform.processor()} python {platform.python_version()}; {args}")
    for every in (1, 5) if args.part != "side-by-side" else ():
        s = split(args.size, args.steps, every)
        boundary = s["round_trip_s"] - s["far_s"]
        print(
            f"split, images every {every}: {args.steps} steps in {s['wall_s']:.1f} s, round trips {s['round_trip_s']:.1f} s, "
            f"far side {s['far_s']:.1f} s: boundary {boundary:.2f} s = {boundary / s['wall_s'] * 100:.1f}% of the loop "
            f"(steps/s {args.steps / s['wall_s']:.2f} via the host vs {args.steps / (s['wall_s'] - boundary):.2f} "
            f"without the boundary); env host RSS {s['rss_mb']:.0f} MB"
        )
    for every in (1, 5) if args.part != "split" else ():
        far = far_rates(python, args.size, args.steps, args.reps, every)
        via, rss = near_rates("libero_ref", args.size, args.steps, args.reps, every)
        inproc, _ = near_rates("libero", args.size, args.steps, args.reps, every)
        f, v, i = statistics.median(far["rates"]), statistics.median(via), statistics.median(inproc)
        print(f"images every {every}: ref in-process {f:.2f} steps/s {far['rates']}")
        print(
            f"images every {every}: ref via env host {v:.2f} steps/s {[round(x, 2) for x in via]} ({(1 - v / f) * 100:+.1f}% cost)"
        )
        print(
            f"images every {every}: libero in-process (robosuite 1.5) {i:.2f} steps/s {[round(x, 2) for x in inproc]}"
        )
        print(f"memory: env host RSS {rss:.0f} MB after build+reset; in-venv process max RSS {far['maxrss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
