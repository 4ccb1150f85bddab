"""Harness overhead: ``rollbench eval`` (the Python API, no video) against a bare hand-written gymnasium loop doing
the same steps with the same policy.

Both sides run ``metaworld/pick-place-v3`` with MetaWorld's scripted expert (``SawyerPickPlaceV3Policy``) for N
episodes, episode k seeded with ``seed + k``, each until success or ``max_steps``:

* rollbench: ``rollbench.api.evaluate(env=..., policy="metaworld-expert", ...)`` into a fresh run directory, which
  includes everything ``rollbench eval`` does after start-up: planning, building the env and policy, the episode
  loop, staging and committing each episode (parquet files, fsync), grading from disk with DuckDB, run.json.
* bare: ``gymnasium.make("Meta-World/goal_observable", env_name="pick-place-v3")``, seeded as rollbench seeds it
  (numpy ``default_rng(seed + k)`` as the env's ``np_random`` with MetaWorld's seeded, unfrozen rand_vec, since
  ``reset(seed=...)`` is ignored upstream), ``policy.get_action(obs)`` clipped to [-1, 1] as float32, ``env.step``.
  Nothing is recorded.

The two must do the same work: the script checks that both ran the same number of steps in every episode and stops
otherwise. Both sides run in this one process, after a warm-up of each, in interleaved repetitions (the order
alternates), so drift on a shared machine hits both alike; the reported ratio is median(rollbench) / median(bare).

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_harness.py [--episodes 10] [--max-steps 150] [--reps 7]``
(``--episodes 20,100``: both counts, and the overhead split into a per-run and a per-episode part. ``--no-fsync``:
diagnosis only, shows what the per-episode durable commits cost. ``--profile``: diagnosis only, runs the rollbench
side once under cProfile after the warm-up and prints where its time goes, by rollbench function. ``--ablate``:
diagnosis only, the rollbench side with grading, committing and MetaWorld's settled reset view monkeypatched out in
turn, interleaved with the bare loop; see ``ablate``. ``--split``: diagnosis only, the time inside MetaWorld's step
and reset and the expert on each side, and the rest; see ``split``.)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TASK = "pick-place-v3"


def bare_loop(episodes: int, max_steps: int, seed: int) -> tuple[list[int], float]:
    """The hand-written loop: returns the number of steps of each episode and the seconds it took."""
    import gymnasium as gym
    import metaworld  # noqa: F401  (registers the Meta-World/* gymnasium ids)
    from metaworld.policies import SawyerPickPlaceV3Policy

    t0 = time.perf_counter()
    env = gym.make("Meta-World/goal_observable", env_name=TASK, seed=seed, disable_env_checker=True)
    raw = env.unwrapped
    raw._freeze_rand_vec = False  # type: ignore[attr-defined]
    raw.seeded_rand_vec = True  # type: ignore[attr-defined]
    policy = SawyerPickPlaceV3Policy()
    lengths = []
    for k in range(episodes):
        raw.np_random = np.random.default_rng(seed + k)
        obs, _ = env.reset()
        steps = 0
        for steps in range(1, max_steps + 1):  # noqa: B007
            action = np.clip(policy.get_action(obs), -1.0, 1.0).astype(np.float32)
            obs, _, terminated, truncated, info = env.step(action)
            if info["success"] or terminated or truncated:
                break
        lengths.append(steps)
    env.close()
    return lengths, time.perf_counter() - t0


def rollbench_eval(episodes: int, max_steps: int, seed: int) -> tuple[list[int], float]:
    """``rollbench.api.evaluate`` into a fresh run directory: returns the graded length of each episode and the
    seconds ``evaluate`` took (making and removing the temporary directory is not timed)."""
    from rollbench.api import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = evaluate(
            env=f"metaworld/{TASK}",
            policy="metaworld-expert",
            episodes=episodes,
            max_steps=max_steps,
            seed=seed,
            out=Path(tmp) / "run",
        )
        elapsed = time.perf_counter() - t0
    assert result.status == "OK", result.reasons
    return [e.length for e in result.episodes], elapsed


def profile(episodes: int, max_steps: int, seed: int) -> None:
    """cProfile of one ``rollbench_eval`` after a warm-up: cumulative seconds of rollbench's own functions."""
    import cProfile
    import io
    import pstats

    rollbench_eval(episodes, max_steps, seed)
    prof = cProfile.Profile()
    prof.enable()
    rollbench_eval(episodes, max_steps, seed)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(r"rollbench/(api|grading|execute|rollout)", 25)
    print(text.getvalue())


ABLATIONS = {
    "as shipped": (),
    "without grading": ("grade",),
    "without committing or grading": ("grade", "commit"),
    "without the settled reset view": ("view",),
    "without all three": ("grade", "commit", "view"),
}


def ablate(episodes: int, max_steps: int, seed: int, reps: int) -> None:
    """Diagnosis only: the rollbench side with parts monkeypatched out, interleaved with the bare loop, to show what
    each part costs. ``grade``: ``evaluate`` returns a result graded once beforehand instead of grading; ``commit``:
    finished episodes are dropped instead of written (so grading must be out too); ``view``: MetaWorld's settled
    reset view (``MetaWorldEnv._settled_reset_view``) is replaced by the stale observation of the live reset state
    and no success check. Every variant runs the same steps (checked)."""
    import rollbench.api as api
    import rollbench.record.background as background
    from rollbench.envs import metaworld as mw

    real = (api.grade_run_dir, background.BackgroundCommitter.commit, mw.MetaWorldEnv._settled_reset_view)
    with tempfile.TemporaryDirectory() as tmp:
        from rollbench.api import evaluate

        graded = evaluate(
            env=f"metaworld/{TASK}", policy="metaworld-expert", episodes=episodes, max_steps=max_steps, seed=seed,
            out=Path(tmp) / "run",
        )  # fmt: skip

    def stale_view(self: mw.MetaWorldEnv) -> tuple[np.ndarray, bool]:
        env = self._env
        current = env._get_curr_obs_combined_no_goal()
        return np.hstack((current, current, env._get_pos_goal())), False

    def use(parts: tuple[str, ...]) -> None:
        api.grade_run_dir, background.BackgroundCommitter.commit, mw.MetaWorldEnv._settled_reset_view = real  # type: ignore[method-assign]
        if "grade" in parts:
            api.grade_run_dir = lambda run_dir, **kw: graded
        if "commit" in parts:
            background.BackgroundCommitter.commit = lambda self, rec, fault: True  # type: ignore[method-assign]
        if "view" in parts:
            mw.MetaWorldEnv._settled_reset_view = stale_view  # type: ignore[method-assign]

    lengths = bare_loop(episodes, max_steps, seed)[0]
    times: dict[str, list[float]] = {name: [] for name in [*ABLATIONS, "bare"]}
    for r in range(reps + 1):  # the first round is the warm-up
        for name, parts in ABLATIONS.items():
            use(parts)
            got, elapsed = rollbench_eval(episodes, max_steps, seed)
            assert got == lengths, f"{name}: different work"
            if r:
                times[name].append(elapsed)
        use(())
        if r:
            times["bare"].append(bare_loop(episodes, max_steps, seed)[1])
    bare = statistics.median(times["bare"])
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"ablation: {episodes} episodes, {sum(lengths)} steps, {reps} interleaved repetitions, load average {load}")
    print("| variant | median s | ratio to bare |")
    print("|---|---:|---:|")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t):.3f} | {statistics.median(t) / bare:.3f} |")


def split(episodes: int, max_steps: int, seed: int, reps: int) -> None:
    """Diagnosis only: both sides as usual, with the time inside MetaWorld's ``SawyerXYZEnv.step`` and ``.reset``
    and the expert's ``get_action`` summed per run (wrappers on the classes, the same on both sides): what is left
    is everything else each side does, start-up and grading included."""
    from metaworld.policies import SawyerPickPlaceV3Policy
    from metaworld.sawyer_xyz_env import SawyerXYZEnv

    spent = {"MetaWorld step": 0.0, "MetaWorld reset": 0.0, "expert": 0.0}

    def timed(cls: Any, method: str, key: str) -> None:
        inner = getattr(cls, method)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t0

        setattr(cls, method, wrapper)

    timed(SawyerXYZEnv, "step", "MetaWorld step")
    timed(SawyerXYZEnv, "reset", "MetaWorld reset")
    timed(SawyerPickPlaceV3Policy, "get_action", "expert")
    sides = {"bare": bare_loop, "rollbench": rollbench_eval}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for r in range(reps + 1):  # the first round is the warm-up
        for name, fn in sides.items() if r % 2 == 0 else list(sides.items())[::-1]:
            spent.update(dict.fromkeys(spent, 0.0))
            elapsed = fn(episodes, max_steps, seed)[1]
            if r:
                rows[name].append({**spent, "everything else": elapsed - sum(spent.values()), "total": elapsed})
    print(f"split: {episodes} episodes, {reps} interleaved repetitions (medians, s)")
    print("| part | bare | rollbench | rollbench - bare, ms per episode |")
    print("|---|---:|---:|---:|")
    for part in rows["bare"][0]:
        b, o = (statistics.median(x[part] for x in rows[name]) for name in sides)
        print(f"| {part} | {b:.3f} | {o:.3f} | {1000 * (o - b) / episodes:.2f} |")


def measure(episodes: int, max_steps: int, seed: int, reps: int) -> tuple[int, dict[str, list[float]]]:
    """Warm-up, the same-work check, then ``reps`` interleaved timings of each side: (steps in all, side -> s)."""
    sides = {"bare": bare_loop, "rollbench": rollbench_eval}
    lengths = {name: fn(episodes, max_steps, seed)[0] for name, fn in sides.items()}  # warm-up
    if lengths["bare"] != lengths["rollbench"]:
        raise SystemExit(f"the two loops did different work: {lengths}")
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(reps):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name in order:
            got, elapsed = sides[name](episodes, max_steps, seed)
            times[name].append(elapsed)
            assert got == lengths[name]
    return sum(lengths["bare"]), times


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument(
        "--episodes",
        default="10",
        help="episodes per run; a comma-separated list (e.g. 20,100) measures each and splits the overhead into a "
        "per-run and a per-episode part (least squares over the counts)",
    )
    ap.add_argument("--max-steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=7, help="timed repetitions of each side (after one warm-up)")
    ap.add_argument(
        "--no-fsync",
        action="store_true",
        help="diagnosis only: make os.fsync a no-op in this process, to show what rollbench's durable commits cost",
    )
    ap.add_argument("--profile", action="store_true", help="diagnosis only: cProfile of one rollbench run")
    ap.add_argument("--ablate", action="store_true", help="diagnosis only: what grading, commits and the view cost")
    ap.add_argument("--split", action="store_true", help="diagnosis only: time in MetaWorld and the expert vs the rest")
    args = ap.parse_args()
    counts = [int(x) for x in str(args.episodes).split(",")]
    if args.profile:
        profile(counts[0], args.max_steps, args.seed)
        return
    if args.ablate:
        ablate(counts[0], args.max_steps, args.seed, args.reps)
        return
    if args.split:
        split(counts[0], args.max_steps, args.seed, args.reps)
        return
    if args.no_fsync:
        os.fsync = lambda fd: None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    fsync = ", os.fsync disabled (diagnosis)" if args.no_fsync else ""
    overheads: list[tuple[int, float]] = []
    for episodes in counts:
        steps, times = measure(episodes, args.max_steps, args.seed, args.reps)
        med = {name: statistics.median(t) for name, t in times.items()}
        ratio = med["rollbench"] / med["bare"]
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"\nmetaworld/{TASK}, metaworld-expert: {episodes} episodes, {steps} steps in all (max {args.max_steps})")
        print(
            f"commit {commit}, python {platform.python_version()}, load average {load}, {args.reps} repetitions{fsync}"
        )
        print("| side | median s | min s | max s | ms/step (median) |")
        print("|---|---:|---:|---:|---:|")
        for name, t in times.items():
            print(f"| {name} | {med[name]:.3f} | {min(t):.3f} | {max(t):.3f} | {1000 * med[name] / steps:.3f} |")
        overhead = med["rollbench"] - med["bare"]
        print(f"ratio rollbench / bare (medians): {ratio:.3f}x; overhead {1000 * overhead:.0f} ms")
        overheads.append((episodes, overhead))
    if len(overheads) > 1:
        n = np.array([e for e, _ in overheads], dtype=float)
        o = np.array([v for _, v in overheads])
        per_episode, per_run = np.polyfit(n, o, 1)
        print(
            f"\noverhead = per run {1000 * per_run:.0f} ms + per episode {1000 * per_episode:.2f} ms "
            f"(least squares over {', '.join(str(e) for e, _ in overheads)} episodes)"
        )


if __name__ == "__main__":
    main()
