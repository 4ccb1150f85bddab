"""``rollbench eval --resume RUN_DIR``: the spec a resumed run continues with, taken from its run.json, and what of
it the user must name again before rollbench loads it (issue 30, item 14: a copied run directory never runs its
code unasked)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollbench.cli.spec_flags import SpecFlag, spec_fields
from rollbench.core.contracts import ConfigError

if TYPE_CHECKING:
    from rollbench.core.spec import EvalSpec
    from rollbench.run.execution import Execution


def resumed_spec(
    resume: Path, given: list[SpecFlag], spec_file: Path | None, values: dict[str, Any], trust_run: bool
) -> EvalSpec:
    """The spec stored in ``resume``/run.json; ConfigError if ``--spec`` or spec flags other than a repeated
    ``--policy``/``--env``/``--policy-options``/``--policy-timeout`` were given. A run.json naming code to import or
    a path to read (``what_it_loads``) is resumed only when the same ``--policy``/``--env``/``--policy-options`` are
    typed again or with ``--trust-run``: a copied run directory never runs its code unasked (issue 30, item 14); one
    setting a deadline or wait likewise (:func:`refuse_waits`)."""
    from rollbench.core.spec import build_spec, what_it_loads
    from rollbench.record.runlog import require_run_log
    from rollbench.run.in_memory import is_in_memory

    confirming = {"policy", "env", "policy_options", "policy_timeout_s"}
    others = [f for f in given if f.field not in confirming]
    if others or spec_file:
        shown = ", ".join(f.option for f in others) or "--spec"
        raise ConfigError(f"--resume takes the spec from {resume}/run.json; drop {shown}")
    log = require_run_log(resume)
    spec = build_spec(**log.spec.model_dump(mode="json"))
    typed = spec_fields(values, [f for f in given if f.field in confirming])
    recorded = spec.model_dump(mode="json")
    for field, value in typed.items():
        if value != recorded.get(field):
            raise ConfigError(
                f"--resume {resume}: its run.json records {field} {recorded.get(field)!r}, not {value!r}; resume "
                "with the recorded value or choose another --out"
            )
    if is_in_memory(spec.policy):  # nothing to import or trust: the object lived in another Python process
        raise ConfigError(
            f"{resume}/run.json's policy {spec.policy} was an in-memory object; eval --resume cannot rebuild it: "
            f"resume the run with rollbench.evaluate(policy=<the object>, out={str(resume)!r}) in Python"
        )
    loads = [f"{field} {value!r}" for field, value in what_it_loads(spec) if field not in typed]
    if loads and not trust_run:
        raise ConfigError(
            f"{resume}/run.json names {', '.join(loads)}, which rollbench would import, run, read, connect to or "
            "send your token or API key to; resume only a run you trust: repeat the name on the command line (e.g. "
            "--policy/--env as recorded) or add --trust-run"
        )
    refuse_waits(f"{resume}/run.json", spec, typed, trust_run)
    return spec


def refuse_waits(source: str, spec: EvalSpec, typed: dict[str, Any], trust_run: bool) -> None:
    """ConfigError when handed-over ``spec`` (from ``source``, a run.json) sets a deadline or wait
    (:func:`~rollbench.core.spec.what_it_waits`) the user neither typed (``typed``) nor trusted: a run directory
    someone handed over never holds the user to a longer deadline than the defaults (hostile round 13, F10)."""
    from rollbench.core.spec import DEFAULT_POLICY_TIMEOUT_S, what_it_waits

    waits = [value for field, value in what_it_waits(spec) if field not in typed]
    if waits and not trust_run:
        raise ConfigError(
            f"{source} sets {', '.join(waits)}: a deadline or wait rollbench would hold you to (the default policy "
            f"deadline is {DEFAULT_POLICY_TIMEOUT_S:g} s); use it only if you trust it: type it again "
            "(--policy-timeout, --policy-options as recorded) or add --trust-run"
        )


def resume_command(spec: EvalSpec, run_dir: Path, execution: Execution | None = None) -> str:
    """The exact command that resumes ``run_dir`` (recording ``spec``), shell-quoted: ``PROGRAM eval --resume
    RUN_DIR`` plus every name :func:`resumed_spec` requires typed again (``--policy``, ``--env``,
    ``--policy-options`` as recorded, for the ones that would import, read or connect, and ``--policy-timeout``/
    ``--policy-options`` when they set a deadline or wait: :func:`refuse_waits`), so that the interrupted
    user's own run resumes without ``--trust-run``; and, given the interrupted invocation's ``execution``, each of
    its options that is not the default (``--workers``, ``--executor ray``, ``--ray-address``...: how to run is not
    recorded in the spec, so a bare resume would run locally in one process). ``PROGRAM`` is :func:`invoked_as`."""
    from rollbench.core.spec import what_it_loads, what_it_waits

    loads = {field for field, _ in what_it_loads(spec)} | {field for field, _ in what_it_waits(spec)}
    parts = [invoked_as(), "eval", "--resume", str(run_dir)]
    if "env" in loads:
        parts += ["--env", spec.env]
    if "policy" in loads:
        parts += ["--policy", spec.policy]
    if "policy_options" in loads:
        parts += ["--policy-options", json.dumps(spec.policy_options, separators=(",", ":"))]
    if "policy_timeout_s" in loads:
        parts += ["--policy-timeout", f"{spec.policy_timeout_s:g}"]
    return shlex.join(parts + (execution_flags(execution) if execution is not None else []))


def execution_flags(execution: Execution) -> list[str]:
    """The command-line options that give ``execution`` again, each only where it is not the default."""
    from rollbench.run.execution import Execution
    from rollbench.run.ray_options import RayOptions

    default, ray, plain = Execution(), execution.ray, RayOptions()
    flags: list[tuple[bool, list[str]]] = [
        (execution.workers != default.workers, ["--workers", str(execution.workers)]),
        (execution.executor != default.executor, ["--executor", execution.executor]),
        (execution.ray_address is not None, ["--ray-address", str(execution.ray_address)]),
        (execution.batch_size != default.batch_size, ["--batch-size", str(execution.batch_size)]),
        (execution.retry_errors != default.retry_errors, ["--retry-errors", execution.retry_errors]),
        (ray.cpus != plain.cpus, ["--ray-cpus", f"{ray.cpus:g}"]),
        (ray.gpus != plain.gpus, ["--ray-gpus", f"{ray.gpus:g}"]),
        (ray.resources != plain.resources, ["--ray-resources", json.dumps(ray.resources, separators=(",", ":"))]),
        (ray.placement != plain.placement, ["--ray-placement", ray.placement]),
        (ray.policy != plain.policy, ["--ray-policy-per-node"]),
        (ray.shared_fs != plain.shared_fs, ["--ray-shared-fs"]),
    ]
    return [part for differs, parts in flags if differs for part in parts]


def invoked_as() -> str:
    """How the user started rollbench, for a command they can paste: ``rollbench`` when that name on ``PATH`` is this
    program (or when it was not started by its console script, e.g. ``python -m rollbench``), else the script's path
    as typed (``.venv/bin/rollbench``: the set-up does not put the venv on ``PATH``)."""
    typed = sys.argv[0] if sys.argv else ""
    if Path(typed).name != "rollbench":
        return "rollbench"
    on_path = shutil.which("rollbench")
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(typed):
        return "rollbench"
    return typed
