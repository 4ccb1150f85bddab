"""rollbench vs lerobot-eval: the same deterministic policy on the same task and seeds, timed side by side, and
whether both count the same successes.

Task: gym-pusht's ``PushT-v0`` (rollbench's ``pusht/PushT-v0``; lerobot's ``--env.type=pusht``), 300 steps at most.
Policy: the scripted controller of ``benchmarks/_pusht_controller.py`` (no weights, ~86% success on seeds 0-49), a
custom policy on rollbench's side and a minimal ``PreTrainedPolicy`` on lerobot's
(``benchmarks/_lerobot_eval_side.py``, which says exactly what of lerobot runs). Episode ``i`` starts from seed
``--seed + i`` on both sides (rollbench's trial seeds; lerobot's ``eval_policy(start_seed=...)``).

Run from rollbench's core venv, after ``bash scripts/lerobot_compat.sh && bash scripts/lerobot_eval_setup.sh``::

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_lerobot_eval.py --episodes 50 --reps 3 --batch-size 1

Each side runs as its own process (``rollbench eval`` from ``.venv``; the lerobot script from ``.venv-lerobot``):

1. one untimed check pass of each, compared episode by episode: success (rollbench's grade vs lerobot's
   ``eval_policy`` rows), length, return and max reward (rollbench's recorded files vs lerobot's env as logged step
   by step), and every action (rollbench's recorded ``action`` column vs what the lerobot-side policy returned),
   bit for bit; every disagreement is printed with its cause where it is known;
2. ``--reps`` timed repetitions, interleaved (rollbench then lerobot, then the other order), reporting medians of:
   process wall time (start to exit: interpreter, imports, env, loop, writing), the evaluation loop alone
   (rollbench: ``timing.eval_wall_time_s`` of its graded run, which includes recording and committing every episode
   to disk; lerobot: the ``eval_policy`` call, which writes nothing), and episodes per hour of each. Every timed
   repetition must reproduce the check pass's successes.

Comparable work: neither side renders (rollbench's policy asks for no camera; lerobot's obs type is
``environment_state_agent_pos``). rollbench additionally records every step to parquet and grades from disk;
lerobot converts every observation to torch tensors and runs its (identity) processor pipelines. With
``--batch-size B > 1`` rollbench steps B episodes in lockstep (``--batch-size``) and lerobot a ``SyncVectorEnv`` of
B envs; lerobot's rollout then keeps stepping finished slots (auto-reset) until the batch's last episode ends.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
ROLLBENCH = REPO / ".venv" / "bin" / "rollbench"
# the lerobot line: .venv-lerobot (0.6.1), or the interpreter $ROLLBENCH_LEROBOT_PYTHON names (.venv-lerobot-0.4.4)
LEROBOT_PY = Path(os.environ.get("ROLLBENCH_LEROBOT_PYTHON") or REPO / ".venv-lerobot" / "bin" / "python")
LEROBOT_SIDE = REPO / "benchmarks" / "_lerobot_eval_side.py"
TASK = "pusht/PushT-v0"
SUM_TOL = 1e-9  # lerobot's own sums vs its env's: the same float64 rewards summed in different orders
# rollbench records rewards as float32 (``next.reward``), lerobot keeps gym-pusht's float64: over 300 steps the
# float32 rounding (~6e-8 relative per reward) adds up to at most ~2e-5 on a return.
FLOAT32_TOL = 1e-4


def timed_json(cmd: list[str], env: dict[str, str], what: str) -> tuple[float, dict[str, Any]]:
    """Run ``cmd``; returns (process wall seconds, its stdout parsed as JSON); exits naming ``what`` if it fails."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{what} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return wall, json.loads(r.stdout)


def run_rollbench(out: Path, episodes: int, seed: int, batch_size: int) -> tuple[float, dict[str, Any]]:
    """``rollbench eval`` into ``out``; returns (process wall seconds, ``grade --json``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "benchmarks")}
    cmd = [str(ROLLBENCH), "eval", "--env", TASK, "--policy", "_pusht_controller:make", "--episodes", str(episodes)]
    cmd += ["--seed", str(seed), "--batch-size", str(batch_size), "--out", str(out), "--json"]
    return timed_json(cmd, env, "rollbench eval")


def run_lerobot(episodes: int, seed: int, batch_size: int, actions: bool) -> tuple[float, dict[str, Any]]:
    """lerobot's ``eval_policy`` in ``.venv-lerobot``; returns (process wall seconds, its JSON document)."""
    cmd = [str(LEROBOT_PY), str(LEROBOT_SIDE), "--episodes", str(episodes), "--seed", str(seed)]
    cmd += ["--batch-size", str(batch_size)] + ([] if actions else ["--no-actions"])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return timed_json(cmd, env, "lerobot side")


def recorded_steps(run_dir: Path) -> dict[int, dict[str, np.ndarray]]:
    """episode index -> ``action`` ``float32 (T, 2)`` and ``reward`` ``float64 (T,)`` from rollbench's data files."""
    files = sorted(run_dir.glob("data/chunk-*/file-*.parquet"))
    out: dict[int, dict[str, np.ndarray]] = {}
    for f in files:
        t = pq.read_table(f, columns=["episode_index", "frame_index", "action", "next.reward"]).to_pydict()
        order = np.argsort(np.asarray(t["frame_index"]))
        out[int(t["episode_index"][0])] = {
            "action": np.asarray(t["action"], dtype=np.float32)[order],
            "reward": np.asarray(t["next.reward"], dtype=np.float64)[order],
        }
    return out


def compare(graded: dict[str, Any], steps: dict[int, dict[str, np.ndarray]], lr: dict[str, Any]) -> list[dict]:
    """One row per episode: both sides' figures and every disagreement, with its explanation where known."""
    rows = []
    rb_eps = sorted(graded["episodes"], key=lambda e: e["episode_index"])
    for rb, rep, env in zip(rb_eps, lr["per_episode"], lr["env_episodes"], strict=True):
        k = rb["episode_index"]
        issues: list[str] = []
        if not rb["seed"] == rep["seed"] == env["seed"]:
            issues.append(f"seeds differ: rollbench {rb['seed']}, lerobot {rep['seed']}/{env['seed']}")
        rb_act, rb_rew = steps[k]["action"], steps[k]["reward"]
        lr_act = np.asarray(env.get("actions", []), dtype=np.float32)
        first_diff = None
        if "actions" in env:
            n = min(len(rb_act), len(lr_act))
            differ = np.nonzero(np.any(rb_act[:n] != lr_act[:n], axis=1))[0]
            first_diff = int(differ[0]) if len(differ) else (None if len(rb_act) == len(lr_act) else n)
            if first_diff is not None:
                issues.append(f"actions first differ at step {first_diff}: the two sides played different episodes")
        if bool(rb["success"]) != bool(env["success"]) or rb["length"] != env["length"]:
            issues.append(
                f"the envs disagree: rollbench success={rb['success']} length={rb['length']}, lerobot's env "
                f"success={env['success']} length={env['length']}"
            )
        if bool(rep["success"]) != bool(env["success"]):
            issues.append(
                f"lerobot's eval_policy counts success={rep['success']} but its env ended the episode with "
                f"is_success={env['success']}"
            )
        if abs(rb["return"] - env["return"]) > FLOAT32_TOL:
            issues.append(f"returns differ: rollbench {rb['return']:.6f}, lerobot's env {env['return']:.6f}")
        extra = rep["sum_reward"] - env["return"]
        if abs(extra) > SUM_TOL:
            nxt = env.get("next_step_reward")
            why = (
                "lerobot's eval_policy keeps one step past the episode's end (mask `<= done_indices + 1` in "
                "lerobot_eval.py), the first step of the slot's auto-reset episode, whose reward is "
                f"{nxt:.6f}"
                if nxt is not None and abs(extra - nxt) <= SUM_TOL
                else "unexplained"
            )
            issues.append(f"lerobot's sum_reward exceeds the episode's return by {extra:.6f}: {why}")
        rb_max = float(np.max(rb_rew)) if len(rb_rew) else float("nan")
        if abs(rep["max_reward"] - rb_max) > FLOAT32_TOL:
            issues.append(f"max reward differs: rollbench {rb_max:.6f}, lerobot eval_policy {rep['max_reward']:.6f}")
        rows.append(
            {
                "seed": rb["seed"],
                "rollbench_success": bool(rb["success"]),
                "lerobot_success": bool(rep["success"]),
                "rollbench_length": rb["length"],
                "lerobot_env_length": env["length"],
                "rollbench_return": rb["return"],
                "lerobot_sum_reward": rep["sum_reward"],
                "rollbench_max_reward": rb_max,
                "lerobot_max_reward": rep["max_reward"],
                "first_action_diff": first_diff,
                "issues": issues,
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    print(
        f"{'seed':>5} {'success rb':>10} {'success lr':>10} {'len rb':>6} {'len lr':>6} {'return rb':>10} "
        f"{'sum_rew lr':>10} {'max rb':>7} {'max lr':>7}  agree"
    )
    for r in rows:
        flag = "NO" if r["issues_success"] else ("yes*" if r["issues"] else "yes")
        print(
            f"{r['seed']:>5} {r['rollbench_success']!s:>10} {r['lerobot_success']!s:>10} {r['rollbench_length']:>6} "
            f"{r['lerobot_env_length']:>6} {r['rollbench_return']:>10.4f} {r['lerobot_sum_reward']:>10.4f} "
            f"{r['rollbench_max_reward']:>7.4f} {r['lerobot_max_reward']:>7.4f}  {flag}"
        )
    print("(rb: rollbench's graded run; lr: lerobot's eval_policy rows, lengths from its env's step log. yes*: the")
    print(" episode, its success and its actions agree, but a figure lerobot reports does not; see differences)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions of each side, interleaved")
    parser.add_argument("--batch-size", type=int, default=1, help="rollbench --batch-size; lerobot's env count")
    parser.add_argument("--json", type=Path, help="also write the rows and timings here")
    args = parser.parse_args()
    for exe in (ROLLBENCH, LEROBOT_PY):
        if not exe.exists():
            raise SystemExit(f"missing {exe}: see this script's docstring for the set-up")

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-lerobot-eval-") as tmp:
        run_dir = Path(tmp) / "check"
        _, graded = run_rollbench(run_dir, args.episodes, args.seed, args.batch_size)
        _, lr = run_lerobot(args.episodes, args.seed, args.batch_size, actions=True)
        rows = compare(graded, recorded_steps(run_dir), lr)
        for r in rows:
            r["issues_success"] = sum(
                1 for i in r["issues"] if not i.startswith("lerobot's sum_reward") and not i.startswith("max reward")
            )
        print(
            f"lerobot {lr['lerobot_version']}, task {TASK}, seeds {args.seed}..{args.seed + args.episodes - 1}, "
            f"batch size {args.batch_size}\n"
        )
        print_table(rows)
        rb_succ = sum(r["rollbench_success"] for r in rows)
        lr_succ = sum(r["lerobot_success"] for r in rows)
        same = all(r["rollbench_success"] == r["lerobot_success"] for r in rows)
        identical = all(r["first_action_diff"] is None for r in rows)
        print(
            f"\nsuccesses: rollbench {rb_succ}/{len(rows)}, lerobot eval_policy {lr_succ}/{len(rows)}; "
            f"per-episode success {'AGREES on every seed' if same else 'DISAGREES'}"
        )
        print(f"actions: {'identical, step by step, on every episode' if identical else 'DIFFER (see below)'}")
        issues = [(r["seed"], i) for r in rows for i in r["issues"]]
        if issues:
            print("\ndifferences:")
            for seed, i in issues:
                print(f"  seed {seed}: {i}")

        timings: dict[str, list[float]] = {k: [] for k in ("rb_wall", "rb_loop", "lr_wall", "lr_loop", "lr_import")}
        for rep in range(args.reps):
            order = ("rb", "lr") if rep % 2 == 0 else ("lr", "rb")
            for side in order:
                if side == "rb":
                    wall, g = run_rollbench(Path(tmp) / f"rep{rep}", args.episodes, args.seed, args.batch_size)
                    timings["rb_wall"].append(wall)
                    timings["rb_loop"].append(g["timing"]["eval_wall_time_s"])
                    succ = [bool(e["success"]) for e in sorted(g["episodes"], key=lambda e: e["episode_index"])]
                    if succ != [r["rollbench_success"] for r in rows]:
                        raise SystemExit(f"rollbench repetition {rep} counted different successes than its check pass")
                else:
                    wall, d = run_lerobot(args.episodes, args.seed, args.batch_size, actions=False)
                    timings["lr_wall"].append(wall)
                    timings["lr_loop"].append(d["timing"]["make_env_s"] + d["timing"]["eval_s"])
                    timings["lr_import"].append(d["timing"]["import_s"])
                    if [bool(e["success"]) for e in d["per_episode"]] != [r["lerobot_success"] for r in rows]:
                        raise SystemExit(f"lerobot repetition {rep} counted different successes than its check pass")
            print(f"rep {rep}: rollbench {timings['rb_wall'][-1]:.2f} s wall, lerobot {timings['lr_wall'][-1]:.2f} s")

    med = {k: statistics.median(v) for k, v in timings.items() if v}
    n = args.episodes

    def eph(seconds: float) -> float:
        return n / seconds * 3600

    print(
        f"\nmedians over {args.reps} interleaved repetitions, {n} episodes each (load average before: "
        f"{' '.join(f'{x:.2f}' for x in load_before)}):"
    )
    print(f"{'':34} {'rollbench':>12} {'lerobot-eval':>12}")
    print(f"{'process wall time (s)':34} {med['rb_wall']:>12.2f} {med['lr_wall']:>12.2f}")
    print(f"{'episodes per hour (process)':34} {eph(med['rb_wall']):>12.0f} {eph(med['lr_wall']):>12.0f}")
    print(f"{'evaluation loop (s)':34} {med['rb_loop']:>12.2f} {med['lr_loop']:>12.2f}")
    print(f"{'episodes per hour (loop)':34} {eph(med['rb_loop']):>12.0f} {eph(med['lr_loop']):>12.0f}")
    print(f"{'lerobot side: imports (s)':34} {'':>12} {med['lr_import']:>12.2f}")
    print(f"\nsteps played (both sides): {sum(r['rollbench_length'] for r in rows)}")
    if args.json:
        doc = {"rows": rows, "timings": timings, "medians": med, "load_before": load_before}
        args.json.write_text(json.dumps(doc, indent=1))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
