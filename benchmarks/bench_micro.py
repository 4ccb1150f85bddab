"""Per-call costs quoted in BENCHMARKS.md and in docstrings for issue 13's overhead work, each measured side by side
with what it replaced, in one process: DuckDB database vs connection, grading a 20-episode run, one parquet file
read through ``ParquetFile`` vs ``read_table``, and MetaWorld's reset-state copy (``copy.copy(MjData)`` vs
``mj_getState``/``mj_setState`` into a kept ``MjData``).

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_micro.py [--reps 200]`` (medians of ``--reps`` calls after a
warm-up; the 20-episode run is recorded first into a temporary directory with the pick-place expert).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    import duckdb
    import gymnasium as gym
    import metaworld  # noqa: F401  (registers Meta-World/*)
    import mujoco
    import numpy as np
    import pyarrow.parquet as pq

    from rollbench.api import evaluate
    from rollbench.grading.grade import grade
    from rollbench.record.files import read_parquet

    rows: list[tuple[str, float]] = []
    db = duckdb.connect()
    rows.append(("open a DuckDB database (duckdb.connect)", median_ms(lambda: duckdb.connect().close(), args.reps)))
    rows.append(("a connection to an open one (cursor)", median_ms(lambda: db.cursor().close(), args.reps)))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        evaluate(env="metaworld/pick-place-v3", policy="metaworld-expert", episodes=20, max_steps=150, out=run)
        rows.append(("grade a 20-episode run from disk", median_ms(lambda: grade(run), max(args.reps // 10, 5))))
        data = sorted(run.glob("data/chunk-*/file-*.parquet"))[0]
        rows.append(("one data file: pq.read_table", median_ms(lambda: pq.read_table(data), args.reps)))
        rows.append(("one data file: record.files.read_parquet", median_ms(lambda: read_parquet(data), args.reps)))
    env = gym.make("Meta-World/goal_observable", env_name="pick-place-v3", seed=0, disable_env_checker=True).unwrapped
    env.reset()
    whole = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(env.model, whole))
    view = mujoco.MjData(env.model)

    def kept() -> None:
        mujoco.mj_getState(env.model, env.data, state, whole)
        mujoco.mj_setState(env.model, view, state, whole)

    rows.append(("MetaWorld reset state: copy.copy(MjData)", median_ms(lambda: copy.copy(env.data), args.reps)))
    rows.append(("MetaWorld reset state: mj_getState/mj_setState", median_ms(kept, args.reps)))
    print("| call | median ms |")
    print("|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:.3f} |")


if __name__ == "__main__":
    main()
