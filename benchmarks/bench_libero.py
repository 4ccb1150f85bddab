"""LIBERO speed: the simulator's steps per second with and without rendering, hard vs soft reset, and rollbench
against the reference loop driving one openpi server.

**Part 1, the simulator** (``--part sim``): a freshly built env of ``libero/libero_spatial/0`` (or ``--task``) per
variant, reset to init state 0 (10 settle steps), then ``--steps`` random actions timed, rendering each step what
the variant names (``LiberoEnv.render``: on demand, as rollbench renders):

* ``no cameras``: built without cameras and without an offscreen renderer (a state-only policy);
* ``agentview``: one camera (what ``--video`` records for LIBERO);
* ``agentview + wrist``: both cameras (what openpi's LIBERO client sends), at ``--size`` (256: the reference);
* the same with ``fast_render`` (MuJoCo reflections and shadows off, ``--fast-render``).

Also per variant: env build time, the first reset (hard: LIBERO rebuilds the MuJoCo model and GL context) and a
second one (soft, as rollbench resets after the first; the first observation is bit-identical, see
``rollbench.envs.libero.scene``).

**Part 2, rollbench vs the reference** (``--part compare``): openpi's ``WebsocketPolicyServer`` (PyPI
``openpi-server``) on loopback serves a cheap policy (a float64 chunk of 10 small actions drawn from a hash of the
state: closed loop, microseconds), so that the clients' own costs are what is measured. Per repetition, interleaved
so that the shared machine's load hits every variant alike:

* ``reference``: ``tests/libero_reference.py``, a loop written from openpi's ``examples/libero/main.py`` (LIBERO's
  ``ControlEnv`` with camera observations, so both cameras render at every step, settle steps included; a hard
  reset per episode; openpi-client's ``image_tools`` and ``WebsocketClientPolicy``; replan 5); its video writing is
  not included (it would only add to its time);
* ``rollbench``: ``rollbench.api.evaluate`` of the same task and server (policy images on the steps it is asked for
  a chunk, soft resets, the dataset written and graded), without video;
* ``rollbench --video``: the same, recording agentview (the reference's video camera) every step.

Each repetition runs ``--episodes`` episodes of ``--horizon`` steps (init states 0..E-1, seeds 0..E-1) with a fresh
env (its build included in the time, as both pay it once per task); steps/s = steps executed / wall seconds, median
over ``--reps``. Also reported: peak resident memory (``ru_maxrss``) of a process that runs one rollbench LIBERO
episode in-process with both cameras (what one LIBERO worker holds).

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_libero.py [--part sim|compare|all] [--steps 50] [--reps 3]
[--episodes 2] [--horizon 60]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BOTH = ("agentview", "robot0_eye_in_hand")


# part 1: the simulator ----------------------------------------------------------------------------------------------
def measure(task: str, cameras: tuple[str, ...], size: int, fast: bool, steps: int, reps: int) -> dict[str, float]:
    from rollbench.core.registry import EnvOptions
    from rollbench.envs.libero.env import FAMILY, LiberoEnv

    t0 = time.perf_counter()
    env = FAMILY.make(FAMILY.task(task), EnvOptions(cameras=cameras, image_size=(size, size), fast_render=fast))
    assert isinstance(env, LiberoEnv)
    build = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        env.reset(seed=0, initial_state=0)
        hard = time.perf_counter() - t0
        t0 = time.perf_counter()
        env.reset(seed=1, initial_state=1)
        soft = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        rates = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(steps):
                env.step(rng.uniform(-1, 1, 7))
                for cam in cameras:
                    env.render(cam)
            rates.append(steps / (time.perf_counter() - t0))
        return {"build_s": build, "hard_s": hard, "soft_s": soft, "steps_per_s": statistics.median(rates)}
    finally:
        env.close()


def part_sim(args: argparse.Namespace) -> None:
    variants = [
        ("no cameras", (), False),
        ("agentview", ("agentview",), False),
        ("agentview + wrist", BOTH, False),
        ("agentview + wrist, fast_render", BOTH, True),
    ]
    print(f"\n{args.task}, {args.steps} random steps x {args.reps} reps, {args.size}x{args.size}")
    print("| variant | steps/s (median) | ms/step | env build s | first reset (hard) s | next reset (soft) s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, cams, fast in variants:
        r = measure(args.task, cams, args.size, fast, args.steps, args.reps)
        print(
            f"| {name} | {r['steps_per_s']:.1f} | {1e3 / r['steps_per_s']:.0f} | {r['build_s']:.1f} | "
            f"{r['hard_s']:.1f} | {r['soft_s']:.1f} |",
            flush=True,
        )


# part 2: rollbench vs the reference loop ----------------------------------------------------------------------------
class CheapPolicy:
    """openpi ``BasePolicy``: a float64 ``(10, 7)`` chunk of small actions drawn from a hash of the state."""

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        seed = int.from_bytes(hashlib.sha256(np.asarray(obs["observation/state"]).tobytes()).digest()[:8], "little")
        actions = np.random.default_rng(seed).uniform(-0.3, 0.3, size=(10, 7))
        actions[:, 6] = -1.0
        return {"actions": actions}

    def reset(self) -> None:
        pass


def run_reference(suite: str, task_id: int, port: int, episodes: int, horizon: int) -> tuple[int, float]:
    sys.path.insert(0, str(REPO / "tests"))
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    import libero_reference as ref

    t0 = time.perf_counter()
    bddl, init_file, language = ref.task_files(suite, task_id)
    env = ref.make_env(bddl)
    try:
        client = WebsocketClientPolicy("127.0.0.1", port)
        states = ref.init_states(init_file)
        steps = sum(ref.episode(env, states, k, k, language, client, horizon) for k in range(episodes))
    finally:
        env.close()
    return steps, time.perf_counter() - t0


def run_rollbench(task: str, port: int, episodes: int, horizon: int, video: bool) -> tuple[int, float]:
    from rollbench.api import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = evaluate(
            env=task,
            policy=f"ws://127.0.0.1:{port}",
            episodes=episodes,
            max_steps=horizon,
            video=video,
            out=Path(tmp) / "r",
        )
        wall = time.perf_counter() - t0
    assert result.status == "OK", result.reasons
    return sum(int(e.length) for e in result.episodes), wall


_MEMORY = """
import resource, tempfile
from rollbench.api import evaluate
with tempfile.TemporaryDirectory() as tmp:
    evaluate(env=TASK, policy="random", episodes=1, max_steps=20, cameras=("agentview", "robot0_eye_in_hand"),
             video=True, out=tmp + "/r")
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def worker_memory_mb(task: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY.replace("TASK", repr(task))], capture_output=True, text=True, check=True
    ).stdout
    return int(next(x for x in out.splitlines() if x.startswith("MAXRSS_KB")).split()[1]) / 1024


def part_compare(args: argparse.Namespace) -> None:
    _, suite, task_id = args.task.split("/")
    sys.path.insert(0, str(REPO / "tests"))
    from openpi_recording import Server  # openpi's WebsocketPolicyServer on loopback in a thread

    server = Server(CheapPolicy())
    rates: dict[str, list[float]] = {"reference": [], "rollbench": [], "rollbench --video": []}
    try:
        for rep in range(args.reps):
            for name in rates:
                if name == "reference":
                    steps, wall = run_reference(suite, int(task_id), server.port, args.episodes, args.horizon)
                else:
                    steps, wall = run_rollbench(args.task, server.port, args.episodes, args.horizon, "video" in name)
                rates[name].append(steps / wall)
                print(f"rep {rep} {name}: {steps} steps in {wall:.1f} s = {steps / wall:.2f} steps/s", flush=True)
    finally:
        server.close()
    ref = statistics.median(rates["reference"])
    print(f"\n{args.task}, {args.episodes} episodes x {args.horizon} steps per repetition, {args.reps} interleaved")
    print("| client | steps/s per rep | median | vs reference |")
    print("|---|---|---:|---:|")
    for name, rs in rates.items():
        med = statistics.median(rs)
        print(f"| {name} | {', '.join(f'{r:.2f}' for r in rs)} | {med:.2f} | {med / ref:.2f}x |")
    print(
        f"\npeak RSS of one in-process rollbench LIBERO worker (both cameras, video): {worker_memory_mb(args.task):.0f} MB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("sim", "compare", "all"), default="all")
    ap.add_argument("--task", default="libero/libero_spatial/0")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--horizon", type=int, default=60)
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}")  # fmt: skip
    if args.part in ("sim", "all"):
        part_sim(args)
    if args.part in ("compare", "all"):
        part_compare(args)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
