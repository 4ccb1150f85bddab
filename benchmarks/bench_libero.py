"""LIBERO simulation speed: steps per second of one real LIBERO scene (rpent-libero on robosuite 1.5 / MuJoCo 3.3),
with and without rendering, through rollbench's adapter (``LiberoEnv.step``, which is LIBERO's ``env.step`` plus
the 8-D state and the success check).

Variants, each a freshly built env of ``libero/libero_spatial/0`` (or ``--task``) reset to init state 0 (10 settle
steps, not timed), then ``--steps`` random actions timed:

* ``no cameras``: the env is built without cameras and without an offscreen renderer (what a state-only policy
  costs; rollbench builds it this way when neither the policy nor the video needs images);
* ``agentview``: one camera (what ``--video`` alone renders);
* ``agentview + wrist``: both cameras (what openpi's LIBERO client needs), at ``--size`` (256: the reference);
* the same with ``fast_render`` (MuJoCo reflections and shadows off, ``--fast-render``).

Also reported: env build time and one reset (LIBERO resets hard: it rebuilds the MuJoCo model). The machine may be
shared, so each variant reports the median of ``--reps`` timed blocks.

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_libero.py [--steps 50] [--size 256] [--reps 3]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from rollbench.core.registry import EnvOptions
from rollbench.envs.libero import FAMILY, LiberoEnv


def measure(task: str, cameras: tuple[str, ...], size: int, fast: bool, steps: int, reps: int) -> dict[str, float]:
    t0 = time.perf_counter()
    env = FAMILY.make(FAMILY.task(task), EnvOptions(cameras=cameras, image_size=(size, size), fast_render=fast))
    assert isinstance(env, LiberoEnv)
    build = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        env.reset(seed=0, initial_state=0)
        reset = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        rates = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(steps):
                env.step(rng.uniform(-1, 1, 7).astype(np.float32))
                for cam in cameras:
                    env.render(cam)
            rates.append(steps / (time.perf_counter() - t0))
        return {"build_s": build, "reset_s": reset, "steps_per_s": statistics.median(rates)}
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="libero/libero_spatial/0")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    both = ("agentview", "robot0_eye_in_hand")
    variants = [
        ("no cameras", (), False),
        ("agentview", ("agentview",), False),
        ("agentview + wrist", both, False),
        ("agentview + wrist, fast_render", both, True),
    ]
    print(
        f"{args.task}, {args.steps} random steps x {args.reps} reps, {args.size}x{args.size}, MUJOCO_GL={os.environ.get('MUJOCO_GL')}"
    )
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print("| variant | steps/s (median) | ms/step | env build s | reset s |")
    print("|---|---:|---:|---:|---:|")
    for name, cams, fast in variants:
        r = measure(args.task, cams, args.size, fast, args.steps, args.reps)
        print(
            f"| {name} | {r['steps_per_s']:.1f} | {1e3 / r['steps_per_s']:.0f} | {r['build_s']:.1f} | "
            f"{r['reset_s']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
