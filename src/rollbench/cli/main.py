"""The ``rollbench`` command line: a thin layer over :mod:`rollbench.api`.

Exit codes: 0 = status OK; 1 = PARTIAL or FAILED (the reasons are printed); 2 = bad input (nothing was run).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from rollbench.cli import analysis as cli_analysis
from rollbench.cli import dashboard as cli_dashboard
from rollbench.cli import optimize as cli_optimize
from rollbench.cli import reproduce as cli_reproduce
from rollbench.cli.common import console, out
from rollbench.cli.common import fail as _fail
from rollbench.cli.release import register as _register_release
from rollbench.cli.runs import register as register_runs
from rollbench.core.types import ConfigError, RollbenchError
from rollbench.record.safe_files import read_regular_json
from rollbench.serve.server import serve_policy

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain click errors: "Error: Invalid value for '--episodes': ..." on one line
    pretty_exceptions_enable=False,
    help="Evaluate robot policies in simulation: N independently reset episodes, recorded and graded from disk.",
)


def _print_version(value: bool) -> None:
    if value:
        import importlib.metadata

        print(f"rollbench {importlib.metadata.version('rollbench')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the installed version and exit."),
    ] = False,
) -> None:
    """Evaluate robot policies in simulation: N independently reset episodes, recorded and graded from disk."""


def _image_size(value: str) -> tuple[int, int]:
    try:
        parts = [int(v) for v in value.lower().replace("x", ",").split(",")]
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not HEIGHTxWIDTH or a single size, e.g. 224 or 240x320") from None
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2:
        raise typer.BadParameter(f"{value!r} is not HEIGHTxWIDTH")
    return parts[0], parts[1]


class Terminated(KeyboardInterrupt):
    """SIGTERM during ``rollbench eval``: handled like Ctrl-C (the run ends INTERRUPTED, resumable), exit 143."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM (what systemd, ``docker stop``, Slurm and a plain ``kill`` send) into :class:`Terminated` while
    a run executes, so that it ends like a Ctrl-C instead of leaving run.json saying RUNNING. (A background job
    started by a non-interactive shell ignores SIGINT, a shell rule rollbench keeps; SIGTERM is the signal to send
    it.)"""

    def stop(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command("eval")
def eval_cmd(
    ctx: typer.Context,
    env: Annotated[
        str | None, typer.Option(help="Task, suite or comma-separated tasks, e.g. metaworld/pick-place-v3.")
    ] = None,
    policy: Annotated[str | None, typer.Option(help="Policy name (see `rollbench policies`) or server URL.")] = None,
    episodes: Annotated[int, typer.Option(min=1, help="Independently reset episodes per task.")] = 10,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Horizon in steps (default: the task's).")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Base seed; episode k of each task uses seed + k.")] = 0,
    action_noise: Annotated[float, typer.Option(min=0.0, help="Std of Gaussian action noise (action units).")] = 0.0,
    replan_every: Annotated[
        int | None, typer.Option(min=1, help="Actions executed per chunk (default: policy's, else 1).")
    ] = None,
    video: Annotated[bool, typer.Option("--video/--no-video", help="Record an mp4 per camera per episode.")] = False,
    cameras: Annotated[str | None, typer.Option(help="Comma-separated cameras (default: the task's first).")] = None,
    image_size: Annotated[
        str | None, typer.Option(help="Rendered image size, HxW or one number (default: the task's, 224; LIBERO 256).")
    ] = None,
    success_rule: Annotated[str | None, typer.Option(help="Override: any_step or final_step.")] = None,
    instruction: Annotated[str | None, typer.Option(help="Override the task's instruction.")] = None,
    policy_options: Annotated[
        str | None, typer.Option(help="Policy options (e.g. obs_map, timeout_s): a JSON object or a JSON file.")
    ] = None,
    spec_file: Annotated[
        Path | None,
        typer.Option("--spec", help='EvalSpec as a JSON file (e.g. run.json\'s "spec"); flags given override it.'),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Run directory (default runs/<task>-<policy>-<UTC>).")
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume RUN_DIR with the spec stored in its run.json.")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Local worker processes (or Ray actors).")] = 1,
    executor: Annotated[str, typer.Option(help="local or ray.")] = "local",
    batch_size: Annotated[
        int, typer.Option(min=1, help="Episodes each worker runs in lockstep, one batched policy call per step.")
    ] = 1,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local one).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the graded result as JSON.")] = False,
    policy_timeout: Annotated[
        float, typer.Option(min=0.001, help="Deadline of every policy call in seconds; past it the episode errors.")
    ] = 300.0,
    first_trial: Annotated[
        int, typer.Option(min=0, help="Run trials FIRST_TRIAL.. of each task, with the full plan's seeds and states.")
    ] = 0,
    retry_errors: Annotated[
        str, typer.Option(help="On resume, re-run errored episodes: infra (infrastructure faults), all or none.")
    ] = "infra",
    success_hold: Annotated[
        int, typer.Option(min=1, help="Success must hold this many consecutive steps to count (recorded).")
    ] = 1,
    fast_render: Annotated[
        bool, typer.Option("--fast-render/--no-fast-render", help="Reflections and shadows off (LIBERO; recorded).")
    ] = False,
    host_label: Annotated[
        str | None, typer.Option(help="Host segment of the run's identity host/robot/name (default: machine name).")
    ] = None,
    robot: Annotated[
        str | None, typer.Option(help="Robot segment of the run's identity (default: the env family's embodiment).")
    ] = None,
    instructions: Annotated[
        Path | None,
        typer.Option(help="Instruction sweep: a file, one instruction per line or JSON with names; paired per task."),
    ] = None,
    instruction_perturb: Annotated[
        str | None,
        typer.Option(help="Robustness sweep: comma-separated paraphrase, synonym, drop-object, distractor."),
    ] = None,
    wire_capture: Annotated[
        bool,
        typer.Option("--wire-capture", help="agent:* policies: keep raw provider requests/responses (keys redacted)."),
    ] = False,
) -> None:
    """Run a policy for N independently reset episodes per task, record them, grade from disk, print results."""
    from rollbench.api import Execution, evaluate
    from rollbench.cli.display import ProgressDisplay
    from rollbench.core.spec import build_spec
    from rollbench.core.variants import read_variants
    from rollbench.wire.obs_map import load_policy_options

    flags: dict[str, Any] = {
        "env": env,
        "policy": policy,
        "episodes": episodes,
        "max_steps": max_steps,
        "seed": seed,
        "action_noise": action_noise,
        "replan_every": replan_every,
        "video": video,
        "cameras": cameras,
        "image_size": image_size,
        "success_rule": success_rule,
        "instruction": instruction,
        "policy_options": policy_options,
        "policy_timeout_s": policy_timeout,
        "first_trial": first_trial,
        "success_hold": success_hold,
        "fast_render": fast_render,
        "instructions": instructions,
        "instruction_perturb": instruction_perturb,
    }
    # flags typed on the command line (typer vendors click, so compare the source by name)
    display = ProgressDisplay(console, enabled=not as_json)
    params = {"policy_timeout_s": "policy_timeout"}  # spec field -> CLI parameter, where they differ
    given = [k for k in flags if getattr(ctx.get_parameter_source(params.get(k, k)), "name", None) == "COMMANDLINE"]
    try:
        if resume is not None:
            from rollbench.record.runlog import read_run_log

            if given or spec_file:
                shown = ", ".join("--" + params.get(k, k).replace("_", "-") for k in given) or "--spec"
                raise ConfigError(f"--resume takes the spec from {resume}/run.json; drop {shown}")
            log = read_run_log(resume)
            if log is None:
                raise ConfigError(f"{resume} is not a rollbench run directory (no run.json)")
            spec = build_spec(**log["spec"])
            out_dir = resume
        else:
            fields = _load_spec_file(spec_file) if spec_file else {}
            for k in given if spec_file else list(flags):
                value: Any = flags[k]
                if k == "cameras":
                    value = tuple(c.strip() for c in cameras.split(",")) if cameras else None
                elif k == "image_size":
                    value = _image_size(image_size) if image_size else None
                elif k == "policy_options":
                    value = load_policy_options(policy_options)
                elif k == "instructions":
                    value = read_variants(instructions) if instructions else None
                elif k == "instruction_perturb":
                    value = tuple(p.strip() for p in instruction_perturb.split(",")) if instruction_perturb else None
                fields[k] = value
            if not fields.get("env") or not fields.get("policy"):
                raise ConfigError("--env and --policy are required (or --spec FILE, or --resume RUN_DIR)")
            if wire_capture:
                fields["policy_options"] = _with_wire_capture(fields["policy"], fields.get("policy_options"))
            spec = build_spec(**fields)
        if executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {executor!r}; valid executors: local, ray")
        execution = Execution(
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            batch_size=batch_size,
            retry_errors=retry_errors,
        )
        with display, _terminate_as_interrupt():
            result = evaluate(
                spec, out=out_dir, execution=execution, progress=display.update, host_label=host_label, robot=robot
            )
    except KeyboardInterrupt as exc:
        where = display.run_dir if display.run_dir else out_dir
        console.print(
            f"interrupted: finished episodes are committed and run.json says INTERRUPTED; resume with "
            f"`rollbench eval --resume {where}` (or the same command)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None
    except ConfigError as exc:
        _fail(str(exc))
        return
    except RollbenchError as exc:
        _fail(str(exc), code=1)
        return
    if as_json and display.run_dir is not None:
        result = {**result, "run_dir": str(display.run_dir)}  # where the run went (also without --out)
    _emit(result, as_json, display.run_dir)


def _with_wire_capture(policy: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """``--wire-capture`` is the agent policy option ``wire_capture: true`` (part of the spec, so a resume keeps it)."""
    if not str(policy).startswith("agent:"):
        raise ConfigError(f"--wire-capture applies to agent:PROVIDER/MODEL policies only, not {policy!r}")
    return {**(options or {}), "wire_capture": True}


def _load_spec_file(path: Path) -> dict[str, Any]:
    """An EvalSpec's fields from a JSON file: a spec object, or a run.json (its ``spec`` is used)."""
    try:
        data = read_regular_json(path, follow_links=True)  # a FIFO or device is refused, never waited on
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--spec {path}: cannot read a JSON object ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("spec"), dict) and "plan" in data:
        data = data["spec"]
    if not isinstance(data, dict):
        raise ConfigError(f"--spec {path}: expected a JSON object with EvalSpec fields (env, policy, episodes, ...)")
    return data


def _emit(result: dict[str, Any], as_json: bool, run_dir: Path | None) -> None:
    from rollbench.cli.display import print_result

    if as_json:
        out.print_json(json.dumps(result))
    else:
        print_result(out, result, run_dir)
    raise typer.Exit(0 if result["status"] == "OK" else 1)


@app.command("grade")
def grade_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `rollbench eval`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    check_videos: Annotated[bool, typer.Option("--check-videos/--no-check-videos")] = True,
) -> None:
    """Recompute every result of a run from its files and check its invariants."""
    from rollbench.api import grade

    try:
        result = grade(run_dir, check_videos=check_videos)
    except RollbenchError as exc:
        _fail(str(exc))
        return
    _emit(result, as_json, run_dir)


@app.command("envs")
def envs_cmd(
    family: Annotated[str | None, typer.Argument(help="Only this family (e.g. metaworld).")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    tasks: Annotated[bool, typer.Option("--tasks/--no-tasks", help="List every task, not just families.")] = True,
) -> None:
    """List env families, their tasks (horizon, cameras, success rule) and whether each is installed."""
    from rollbench.cli.display import print_envs
    from rollbench.core.registry import list_envs, unknown_name_error

    rows = list_envs()
    if family is not None:
        if family not in {r["family"] for r in rows}:
            _fail(str(unknown_name_error("env family", family, [r["family"] for r in rows])))
        rows = [r for r in rows if r["family"] == family]
    if as_json:
        out.print_json(json.dumps(rows))
    else:
        print_envs(out, rows, show_tasks=tasks)


@app.command("policies")
def policies_cmd(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the available policies, one line each."""
    from rollbench.core.registry import list_policies

    rows = list_policies()
    if as_json:
        out.print_json(json.dumps(rows))
        return
    from rich.text import Text

    for r in rows:  # plain text (no markup from docstrings), never cut: a long line is left to the terminal to wrap
        out.print(Text.assemble((f"{r['name']:<22}", "bold"), " ", r["description"]), soft_wrap=True)
    out.print(
        Text.assemble(
            (f"{'module:factory':<22}", "bold"),
            ' Your own policy: factory(name, options) in an importable module (README, "Your own policy or env").',
        ),
        soft_wrap=True,
    )


@app.command("mcp")
def mcp_cmd(
    transport: Annotated[
        str, typer.Option(help="stdio (the agent launches this server) or http (streamable HTTP at /mcp).")
    ] = "stdio",
    root: Annotated[Path, typer.Option(help="Directory every run is written under; run names cannot leave it.")] = Path(
        "runs"
    ),
    max_steps_ceiling: Annotated[int, typer.Option(min=1, help="Largest max_steps a client may request.")] = 1000,
    host: Annotated[str, typer.Option(help="http only: interface to bind (loopback unless trusted).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="http only: port.")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="ROLLBENCH_MCP_TOKEN",
            help="http only: secret clients send as 'Authorization: Bearer TOKEN'; required off loopback.",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(help="http only: a host name clients use to reach the server (Host/Origin check); repeatable."),
    ] = None,
) -> None:
    """Serve run_policy_rollout and the run tools to LLM agents over the Model Context Protocol (docs/mcp.md)."""
    from rollbench.mcp.server import serve

    try:
        serve(transport, root, max_steps_ceiling, host, port, token, tuple(allow_host or ()))
    except ConfigError as exc:
        _fail(str(exc))


app.command("serve-policy")(serve_policy)
register_runs(app)

cli_dashboard.register(app)
cli_analysis.register(app)
cli_optimize.register(app)
cli_reproduce.register(app)
_register_release(app)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted: committed episodes are kept; re-run the same command to resume")
        sys.exit(130)
