"""Building an evaluation's spec from the command line and running it with progress: shared by ``rollbench eval``
and ``rollbench robustness`` (one code path for both)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rollbench.cli.common import console, fail, os_error, said
from rollbench.cli.common import terminate_as_interrupt as _terminate_as_interrupt
from rollbench.cli.spec_flags import SPEC_FLAGS, given_flags, spec_fields
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.interrupts import Terminated

if TYPE_CHECKING:
    from rollbench.core.grade_model import GradeDocument
    from rollbench.core.spec import EvalSpec
    from rollbench.run.runners import Execution


def new_spec(
    ctx: typer.Context, values: dict[str, Any], spec_file: Path | None, wire_capture: bool, trust_run: bool = False
) -> EvalSpec:
    """The spec of the flags (every one, or with ``--spec FILE`` the file's fields overridden by the flags typed; a
    file without ``episodes`` gets ``--episodes``' default, 10, as a command line without it does). A ``--spec``
    that is a recorded run.json is handed-over content, as ``--resume``'s: what it names to import, run, read or
    connect to must be typed again or ``--trust-run`` given (hostile round 11, F14)."""
    from rollbench.core.spec import build_spec

    fields, recorded_run = load_spec_file(spec_file) if spec_file else ({}, False)
    typed = spec_fields(values, given_flags(ctx, SPEC_FLAGS) if spec_file else SPEC_FLAGS)
    fields.update(typed)
    if "episodes" not in fields:  # a spec file without episodes gets the flag's default, as a command without it
        fields["episodes"] = next(f.default for f in SPEC_FLAGS if f.field == "episodes")
    if not fields.get("env") or not fields.get("policy"):
        absent = [k for k in ("env", "policy") if not fields.get(k)]
        if spec_file:
            raise ConfigError(
                f"--spec {spec_file} names no {' and no '.join(absent)}: add {'them' if len(absent) > 1 else 'it'} "
                f"to the file or give {' and '.join('--' + k for k in absent)}"
            )
        raise ConfigError("--env and --policy are required (or --spec FILE, or --resume RUN_DIR)")
    if wire_capture:
        fields["policy_options"] = _with_wire_capture(fields["policy"], fields.get("policy_options"))
    spec = build_spec(**fields)
    if recorded_run and not trust_run:
        from rollbench.core.spec import what_it_loads

        if loads := [f"{field} {value!r}" for field, value in what_it_loads(spec) if field not in typed]:
            raise ConfigError(
                f"--spec {spec_file} is a recorded run.json naming {', '.join(loads)}, which rollbench would import, "
                "run, read, connect to or send your token or API key to; use it only if you trust it: repeat the "
                "name on the command line (e.g. --policy/--env as recorded) or add --trust-run"
            )
    if recorded_run:
        from rollbench.cli.resume import refuse_waits

        refuse_waits(f"--spec {spec_file}", spec, typed, trust_run)
    return spec


def run_with_display(
    spec: EvalSpec,
    out_dir: Path | None,
    execution: Execution,
    as_json: bool,
    host_label: str | None,
    robot: str | None,
) -> tuple[GradeDocument, Path | None]:
    """Evaluate ``spec`` with progress bars (none with ``--json``); returns the result and the run directory.

    Ctrl-C or SIGTERM: one line saying how to resume, exit 130 or 143; bad input: exit 2; a run that cannot go
    on (RollbenchError): exit 1."""
    from rollbench.api import evaluate
    from rollbench.cli.display import ProgressDisplay
    from rollbench.core.stdio import isolated_output

    display = ProgressDisplay(console, enabled=not as_json)
    try:
        with isolated_output(), display, _terminate_as_interrupt():  # the policy's output and children: not ours
            result = evaluate(
                spec, out=out_dir, execution=execution, observer=display, host_label=host_label, robot=robot
            )
    except KeyboardInterrupt as exc:
        said_now = _interrupted(spec, display.run_dir if display.run_dir else out_dir, execution)
        head, _, command = said_now.partition("resume with: ")
        if console.is_terminal and command:  # the sentence wrapped at words, the command whole on a line of its own
            console.print(head + "resume with:", highlight=False, markup=False)
            console.print(command, highlight=False, markup=False, soft_wrap=True)
        elif command:  # a pipe: one line
            console.print(said_now, highlight=False, markup=False, soft_wrap=True)
        else:  # its paths escaped for markup (said)
            console.print(said_now, highlight=False, soft_wrap=not console.is_terminal)
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None
    except ConfigError as exc:
        fail(str(exc))
    except RollbenchError as exc:
        fail(str(exc), code=1)
    except OSError as exc:  # disk full, a file size limit: what was committed stays; say how to go on
        from rollbench.cli.resume import resume_command

        where = display.run_dir if display.run_dir else out_dir
        if where is not None and _recorded(where):
            fail(f"the run stopped: {os_error(exc)}; finished episodes are committed; once there is room, resume "
                 f"with: {resume_command(spec, where, execution)}", code=1)  # fmt: skip
        fail(f"the run stopped before anything was recorded: {os_error(exc)}", code=1)
    return result, display.run_dir


def _recorded(where: Path) -> bool:
    """Whether ``where`` is a run directory this eval made (it holds a run.json)."""
    return (Path(where) / "run.json").is_file()


def _interrupted(spec: EvalSpec, where: Path | None, execution: Execution | None = None) -> str:
    """What a Ctrl-C (or SIGTERM) of an eval says, from what run.json says now: the directory made (not a new
    timestamped one) and every name a resume must be given again, the command last on its line, without quotes, so
    it pastes as printed; a run that had already finished says so (hostile round 11, F5)."""
    from rollbench.cli.resume import resume_command
    from rollbench.record.runlog import read_run_log

    if where is None or not _recorded(where):
        return "interrupted before any run directory was made; nothing was recorded"
    try:
        status = (log := read_run_log(Path(where))) and log.status
    except RollbenchError:
        status = None
    if status not in (None, "RUNNING", "INTERRUPTED"):
        return f"interrupted after the run finished: run.json says {status}; rollbench grade {said(where)} shows it"
    return (
        "interrupted: finished episodes are committed and run.json says INTERRUPTED; resume with: "
        f"{resume_command(spec, where, execution)}"
    )


def _with_wire_capture(policy: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """``--wire-capture`` is the agent policy option ``wire_capture: true`` (part of the spec, so a resume keeps it)."""
    if not str(policy).startswith("agent:"):
        raise ConfigError(f"--wire-capture applies to agent:PROVIDER/MODEL policies only, not {policy!r}")
    return {**(options or {}), "wire_capture": True}


def load_spec_file(path: Path) -> tuple[dict[str, Any], bool]:
    """An EvalSpec's fields from a JSON file, and whether the file is a recorded run.json (a ``spec`` and a
    ``plan``: its ``spec`` is used) rather than a spec object."""
    from rollbench.core.jsonfile import read_json

    data = read_json(path, "--spec")
    recorded_run = isinstance(data, dict) and isinstance(data.get("spec"), dict) and "plan" in data
    if recorded_run:
        data = data["spec"]
    if not isinstance(data, dict):
        raise ConfigError(f"--spec {path}: expected a JSON object with EvalSpec fields (env, policy, episodes, ...)")
    return data, recorded_run
