"""The ``rollbench`` command line: a thin layer over :mod:`rollbench.api`.

Every command is a plain function in a module of :mod:`rollbench.cli` (``eval``, ``grade``, ``envs`` and ``policies``
in this one) and is registered one way, by the table :data:`COMMANDS` at the end of this module, in the
order ``rollbench --help`` lists them.

Exit codes: 0 = status OK; 1 = PARTIAL or FAILED (the reasons are printed); 2 = bad input (nothing was run).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rollbench.cli.analysis import compare_cmd, report_cmd, summarize_cmd
from rollbench.cli.checkpoints import checkpoints_cmd
from rollbench.cli.common import (
    OneLineErrors,
    console,
    guard_process_streams,
    os_error,
    out,
    print_json,
    reserve_document_stdout,
)
from rollbench.cli.common import fail as _fail
from rollbench.cli.dashboard import dashboard_cmd
from rollbench.cli.eval_run import new_spec as _new_spec
from rollbench.cli.eval_run import run_with_display as _run_with_display
from rollbench.cli.mcp import mcp_cmd
from rollbench.cli.optimize import optimize_instruction
from rollbench.cli.release import release_cmd
from rollbench.cli.reproduce import reproduce_cmd
from rollbench.cli.resume import resumed_spec
from rollbench.cli.robustness import robustness_cmd
from rollbench.cli.run_flags import eval_options, execution
from rollbench.cli.runs import runs_cmd
from rollbench.cli.sequential import sequential_cmd
from rollbench.cli.serve import serve_policy_cmd
from rollbench.cli.spec_flags import SPEC_FLAGS, given_flags
from rollbench.core.contracts import ConfigError, RollbenchError

if TYPE_CHECKING:
    from rollbench.core.grade_model import GradeDocument

app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain errors, one line each (OneLineErrors)
    pretty_exceptions_enable=False,
    help="Evaluate robot policies in simulation: N independently reset episodes, recorded and graded from disk.",
)


def _print_version(value: bool) -> None:
    if value:
        from rollbench.core.versions import installed_version

        print(f"rollbench {installed_version('rollbench')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the installed version and exit."),
    ] = False,
) -> None:
    """Evaluate robot policies in simulation: N independently reset episodes, recorded and graded from disk."""


@eval_options()
def eval_cmd(
    ctx: typer.Context,
    spec_file: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            help='EvalSpec as a JSON file (e.g. run.json\'s "spec"); flags given override it; episodes default to 10.',
        ),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Run directory (default runs/<task>-<policy>-<UTC>).")
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume RUN_DIR with the spec stored in its run.json.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the graded result as JSON.")] = False,
    trust_run: Annotated[
        bool,
        typer.Option(
            "--trust-run",
            help="--resume, or --spec RUN/run.json: load the modules, paths, servers and agents that run.json names, "
            "and keep its deadlines and waits.",
        ),
    ] = False,
    **options: Any,
) -> None:
    """Run a policy for N independently reset episodes per task, record them, grade from disk, print results."""
    try:
        if resume is not None:
            given = given_flags(ctx, SPEC_FLAGS)
            spec, out_dir = resumed_spec(resume, given, spec_file, options, trust_run), resume
        else:
            spec = _new_spec(ctx, options, spec_file, options["wire_capture"], trust_run)
        run = execution(options)
    except ConfigError as exc:
        _fail(str(exc))
    except RollbenchError as exc:  # e.g. a run.json that cannot be read
        _fail(str(exc), code=1)
    result, run_dir = _run_with_display(spec, out_dir, run, as_json, options["host_label"], options["robot"])
    _emit(result, as_json, run_dir, with_run_dir=True)


def _emit(result: GradeDocument, as_json: bool, run_dir: Path | None, with_run_dir: bool = False) -> None:
    """Print the grade document (its JSON with ``--json``; ``with_run_dir``: plus where the run went, also without
    ``--out``) and exit 0 when its status is OK, else 1."""
    from rollbench.cli.display import print_result

    if as_json:
        doc = result.to_json()
        print_json(out, json.dumps({**doc, "run_dir": str(run_dir)} if with_run_dir and run_dir is not None else doc))
    else:
        print_result(out, result, run_dir)
    raise typer.Exit(0 if result.status == "OK" else 1)


def grade_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `rollbench eval`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    check_videos: Annotated[bool, typer.Option("--check-videos/--no-check-videos")] = True,
) -> None:
    """Recompute every result of a run from its files and check its invariants."""
    from rollbench.api import grade
    from rollbench.cli.runs import stale_note

    try:
        result = grade(run_dir, check_videos=check_videos)
    except RollbenchError as exc:
        _fail(str(exc))
        return
    if (note := stale_note(run_dir)) is not None:  # on stderr: stdout stays the JSON document with --json
        print(note, file=sys.stderr)
    _emit(result, as_json, run_dir)


def envs_cmd(
    family: Annotated[str | None, typer.Argument(help="Only this family (e.g. metaworld).")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    tasks: Annotated[
        bool | None,
        typer.Option(
            "--tasks/--no-tasks",
            help="List every task, not just families (default: the tasks of a family named, the families alone).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List env families, their tasks (horizon, cameras, success rule) and whether each is installed."""
    from rollbench.cli.display import print_envs
    from rollbench.core.registry import env_families, list_envs, unknown_name_error

    rows = list_envs(family)
    if family is not None and not rows:
        _fail(str(unknown_name_error("env family", family, list(env_families()))))
    if as_json:
        print_json(out, json.dumps(rows))
    else:
        show = tasks if tasks is not None else family is not None
        print_envs(out, rows, show_tasks=show)
        if not show and family is None:  # the whole list is ~1,400 lines (a new user's hour)
            out.print("[dim]rollbench envs FAMILY lists a family's tasks; --tasks lists every family's.[/]")


def policies_cmd(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the available policies, one line each: real policies first, then test fixtures and stand-ins."""
    from rollbench.core.registry import list_policies

    rows = list_policies()
    if as_json:
        print_json(out, json.dumps(rows))
        return
    from rollbench.cli.display import print_policies

    print_policies(out, rows)


COMMANDS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("eval", eval_cmd),
    ("grade", grade_cmd),
    ("envs", envs_cmd),
    ("policies", policies_cmd),
    ("mcp", mcp_cmd),
    ("serve-policy", serve_policy_cmd),
    ("runs", runs_cmd),
    ("dashboard", dashboard_cmd),
    ("summarize", summarize_cmd),
    ("compare", compare_cmd),
    ("report", report_cmd),
    ("optimize-instruction", optimize_instruction),
    ("reproduce", reproduce_cmd),
    ("sequential", sequential_cmd),
    ("robustness", robustness_cmd),
    ("checkpoints", checkpoints_cmd),
    ("release", release_cmd),
)
for _name, _command in COMMANDS:
    app.command(_name)(_command)


def main() -> None:
    guard_process_streams(sys.argv[1:])
    reserve_document_stdout(sys.argv[1:])  # before any policy, env or plug-in is imported
    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted: committed episodes are kept; re-run the same command to resume")
        sys.exit(130)
    except OSError as exc:  # the machine refused a read or write (disk full, file size limit): one line, exit 1
        console.print(f"error: {os_error(exc)}", highlight=False, soft_wrap=True, markup=False)
        sys.exit(1)
