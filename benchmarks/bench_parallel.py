"""Episodes per hour of rollbench's runners side by side: 1 vs 2 local workers, local vs Ray at 2 workers, and the
harness overhead against a bare hand-written MetaWorld loop in 2 processes.

Configuration (default): MetaWorld MT10 (10 tasks) x 30 episodes, ``metaworld-expert``, no video, each task's own
horizon (500 steps; the expert usually succeeds in 50-100 steps and the episode ends there, ``any_step`` rule).

Variants, each run in a fresh Python process (so every one pays its own imports), interleaved over ``--repeats``
rounds to spread the noise of a shared machine, median reported:

* ``rollbench-1``: ``evaluate(..., Execution(workers=1))`` (in-process runner)
* ``rollbench-2``: ``Execution(workers=2)`` (2 spawned worker processes)
* ``ray-2``: ``Execution(workers=2, executor="ray")`` (2 actors on a private local Ray started by the run)
* ``bare-1`` / ``bare-2``: the same episodes (task, seed) in 1 or 2 spawned processes (half each), a hand-written
  gymnasium loop: MetaWorld env + ``metaworld.policies`` expert, step until ``info["success"]`` or the horizon;
  nothing recorded. The env is configured and seeded as rollbench's adapter does (same scenes).

Two rates per variant: *end-to-end* (episodes / wall time of the whole process, start-up included: interpreter,
imports, worker spawn, Ray start, grading) and *steady* ((N - 1) episodes / time between the first and the last
episode finishing, i.e. without start-up).

Reproduce: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_parallel.py [--episodes 30] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV = "metaworld/MT10"
POLICY = "metaworld-expert"
VARIANTS = ("rollbench-1", "rollbench-2", "ray-2", "bare-1", "bare-2")


def run_rollbench(
    variant: str, episodes: int, max_steps: int | None, out: Path, ray_address: str | None = None
) -> dict[str, Any]:
    """One variant (``rollbench-N`` or ``ray-N``: N workers; ``ray_address``: an existing cluster) of ``episodes``
    per MT10 task: the episode end times (monotonic s), total steps, lengths and successes. Also used by
    bench_cluster.py."""
    from rollbench.api import Execution, evaluate
    from rollbench.run.observer import EpisodeSummary, RunObserver

    class EndTimes(RunObserver):
        def on_episode_end(self, summary: EpisodeSummary) -> None:
            ends.append(time.monotonic())

    workers = int(variant.rsplit("-", 1)[1])
    ray = variant.startswith("ray")
    execution = Execution(workers=workers, executor="ray" if ray else "local", ray_address=ray_address if ray else None)
    ends: list[float] = []
    result = evaluate(
        env=ENV,
        policy=POLICY,
        episodes=episodes,
        max_steps=max_steps,
        out=out,
        execution=execution,
        observer=EndTimes(),
    )
    assert result.status == "OK", result.reasons
    return {
        "ends": ends,
        "steps": sum(e.length for e in result.episodes),
        "lengths": [e.length for e in result.episodes],
        "successes": sum(e.success for e in result.episodes),
    }


def bare_loop(episodes: list[tuple[str, int]], max_steps: int | None) -> list[tuple[float, int, bool]]:
    """The hand-written loop: ``(end time, length, success)`` per episode. Runs in a spawned process."""
    import numpy as np
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    from metaworld.policies import ENV_POLICY_MAP

    out = []
    envs: dict[str, Any] = {}
    for task, seed in episodes:
        name = task.split("/", 1)[1]
        if name not in envs:
            env = ALL_V3_ENVIRONMENTS[name]()
            env._partially_observable = False  # as rollbench's adapter: goal observable, seeded scenes
            env.__dict__.pop("sawyer_observation_space", None)
            env.observation_space = env.sawyer_observation_space
            env._set_task_called, env._freeze_rand_vec, env.seeded_rand_vec = True, False, True
            env.max_path_length = 2**62
            envs[name] = env
        env, policy = envs[name], ENV_POLICY_MAP[name]()
        env.np_random = np.random.default_rng(seed)
        obs, _ = env.reset()
        success, t = False, 0
        for t in range(max_steps or 500):  # noqa: B007 - t is the episode length afterwards (500: MetaWorld's horizon)
            obs, _, _, _, info = env.step(np.clip(policy.get_action(obs), -1.0, 1.0).astype(np.float32))
            if info["success"]:
                success = True
                break
        out.append((time.monotonic(), t + 1, success))
    return out


def run_bare(variant: str, episodes: int, max_steps: int | None) -> dict[str, Any]:
    from rollbench.core.plan import make_plan
    from rollbench.core.spec import build_spec

    plan = make_plan(build_spec(env=ENV, policy=POLICY, episodes=episodes, max_steps=max_steps))
    todo = [(e.task, e.seed) for e in plan.episodes]
    k = int(variant.rsplit("-", 1)[1])
    half = (len(todo) + k - 1) // k
    parts = [todo[i : i + half] for i in range(0, len(todo), half)]
    with mp.get_context("spawn").Pool(k) as pool:
        results = pool.starmap(bare_loop, [(p, max_steps) for p in parts])
    rows = [r for part in results for r in part]
    return {
        "ends": sorted(r[0] for r in rows),
        "steps": sum(r[1] for r in rows),
        "lengths": [r[1] for r in rows],
        "successes": sum(r[2] for r in rows),
    }


def child(variant: str, episodes: int, max_steps: int | None, out: Path) -> None:
    if variant.startswith("bare"):
        r = run_bare(variant, episodes, max_steps)
    else:
        r = run_rollbench(variant, episodes, max_steps, out)
    print("RESULT " + json.dumps(r))


def measure(variant: str, episodes: int, max_steps: int | None, root: Path) -> dict[str, Any]:
    out = root / variant
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, __file__, "--child", variant, "--episodes", str(episodes), "--out", str(out)]
    if max_steps:
        cmd += ["--max-steps", str(max_steps)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{variant} failed:\n{p.stderr[-3000:]}")
    r = json.loads(next(line for line in p.stdout.splitlines() if line.startswith("RESULT "))[7:])
    shutil.rmtree(out, ignore_errors=True)
    n = len(r["ends"])
    steady = (n - 1) / (r["ends"][-1] - r["ends"][0])
    return {"wall_s": wall, "eph_end_to_end": 3600 * n / wall, "eph_steady": 3600 * steady, **r}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=30, help="episodes per MT10 task (default 30: 300 episodes)")
    ap.add_argument("--max-steps", type=int, default=None, help="horizon override (default: the task's, 500)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds; the median is reported")
    ap.add_argument("--json", type=Path, default=None, help="also write all measurements here")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.episodes, a.max_steps, a.out)
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
    root = Path(tempfile.mkdtemp(prefix="rollbench-bench-"))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    try:
        for i in range(a.repeats):
            for v in VARIANTS:
                m = measure(v, a.episodes, a.max_steps, root)
                runs[v].append(m)
                print(
                    f"round {i + 1} {v:<12} wall {m['wall_s']:6.1f} s  end-to-end {m['eph_end_to_end']:8.0f} ep/h  "
                    f"steady {m['eph_steady']:8.0f} ep/h  steps {m['steps']}",
                    flush=True,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {
        v: {k: statistics.median(m[k] for m in ms) for k in ("wall_s", "eph_end_to_end", "eph_steady")}
        for v, ms in runs.items()
    }
    n = a.episodes * 10
    print(
        f"\nMetaWorld MT10 x {a.episodes} episodes = {n} episodes, {POLICY}, no video, horizon "
        f"{a.max_steps or 'task default (500)'}; cores: {os.cpu_count()}; median of {a.repeats} rounds\n"
    )
    print(f"{'variant':<13}{'wall s':>8}{'end-to-end ep/h':>17}{'steady ep/h':>13}")
    for v in VARIANTS:
        print(f"{v:<13}{med[v]['wall_s']:>8.1f}{med[v]['eph_end_to_end']:>17.0f}{med[v]['eph_steady']:>13.0f}")
    print()
    for label, num, den, target in (
        ("2 local workers / 1 worker", "rollbench-2", "rollbench-1", ">= 1.8"),
        ("Ray 2 actors / 2 local workers", "ray-2", "rollbench-2", ">= 0.9"),
        ("rollbench 2 workers / bare loop 2 processes", "rollbench-2", "bare-2", "(1 - this = harness overhead)"),
        ("bare loop 2 processes / 1 process (machine ceiling)", "bare-2", "bare-1", ""),
    ):
        e2e = med[num]["eph_end_to_end"] / med[den]["eph_end_to_end"]
        steady = med[num]["eph_steady"] / med[den]["eph_steady"]
        print(f"{label:<52} end-to-end {e2e:5.2f}   steady {steady:5.2f}   target {target}")
    same = {v: runs[v][0]["lengths"] for v in ("rollbench-1", "rollbench-2", "ray-2")}
    print(
        f"\nrollbench variants recorded identical episode lengths: {len({json.dumps(x) for x in same.values()}) == 1}"
    )
    if a.json:
        a.json.write_text(
            json.dumps({"config": vars(a) | {"json": str(a.json)}, "median": med, "runs": runs}, indent=1)
        )


if __name__ == "__main__":
    main()
