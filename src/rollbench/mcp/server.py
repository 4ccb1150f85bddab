"""``rollbench mcp``: the rollout tools for LLM agents, over the Model Context Protocol (official ``mcp`` SDK).

Tools: ``run_policy_rollout``, ``list_envs``, ``list_policies``, ``get_run``, ``grade_run``, ``robustness_study``,
``list_runs``, ``compare_policies_sequential`` (:mod:`rollbench.mcp.sequential`), ``rank_checkpoints``
(:mod:`rollbench.mcp.checkpoints`). ``run_policy_rollout`` calls
:func:`rollbench.api.evaluate` (N independently reset episodes, recorded as a LeRobot v3 dataset, graded from disk)
in a worker thread, so one code path serves the CLI, this server and the tests. Its ``status`` is what
:func:`rollbench.grading.grade.grade` computed from the run directory, never a default: ``OK`` only when every
requested episode is recorded and none errored. Each finished episode is sent as an MCP progress notification; a
client cancellation (``notifications/cancelled``, or over HTTP the call's connection closed) stops the run between
episodes and leaves a resumable run directory. At most ``--max-rollouts`` rollouts run at once
(:mod:`rollbench.mcp.slots`). Runs live only under ``--root``; bad arguments return a tool error (``isError``)
naming the valid values, and write nothing. Protocol: https://modelcontextprotocol.io/specification (tools,
progress, cancellation).

No ``from __future__ import annotations``: tool signatures are evaluated when the server is built (the published
JSON schema carries the configured ``--max-steps-ceiling``)."""

import contextlib
import json
import logging
import re
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from rollbench.api import default_run_dir, evaluate, grade
from rollbench.core import registry as report_rows
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.spec import MAX_INSTRUCTION_CHARS, EvalSpec
from rollbench.grading.coverage import DEFAULT_RULE, EXCLUDE_POLICY_ERRORS_HELP, MIN_COVERAGE_HELP, CoverageRule
from rollbench.grading.robustness import study_of_run
from rollbench.mcp.catalog import env_listing
from rollbench.mcp.checkpoints import add_checkpoints_tool
from rollbench.mcp.http import HttpBinding
from rollbench.mcp.progress import Active, Notifier
from rollbench.mcp.results import (
    FOREIGN_LOG,
    INSTRUCTIONS,
    RUN_POLICY_ROLLOUT,
    PolicyRow,
    RunInfo,
    RunResult,
    RunRow,
    checked_run_info,
    run_result,
    run_row,
)
from rollbench.mcp.sequential import add_sequential_tool
from rollbench.mcp.sessions import SessionBounds
from rollbench.mcp.slots import DEFAULT_MAX_ROLLOUTS, RolloutSlots, check_max_rollouts
from rollbench.mcp.strict import (
    MAX_EPISODES,
    ServerBounds,
    check_max_steps_ceiling,
    make_strict,
    rollout_spec,
    tool_error,
)
from rollbench.record.runlog import is_locked, read_run_log, require_run_log
from rollbench.record.safe_files import MAX_LIVE_BYTES, iter_run_dirs, read_regular_json
from rollbench.wire.inbound import ConnectionBounds

log = logging.getLogger(__name__)

DEFAULT_MAX_STEPS_CEILING = 1000
HTTP_DEFAULTS = (ConnectionBounds(), SessionBounds())  # the http-only bounds a stdio server must be left at
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class RolloutService:
    """The tools' behaviour, independent of the transport. ``root`` confines every run directory."""

    def __init__(
        self,
        root: Path,
        max_steps_ceiling: int = DEFAULT_MAX_STEPS_CEILING,
        checkpoints: tuple[str, ...] = (),
        max_rollouts: int = DEFAULT_MAX_ROLLOUTS,
    ) -> None:
        check_max_steps_ceiling(max_steps_ceiling)  # 1 to MAX_STEPS_CEILING
        self.root = root.expanduser().resolve()
        self.bounds = ServerBounds(max_steps_ceiling, checkpoints)  # mcp.strict: the ceiling, the allowed policies
        self.slots = RolloutSlots(max_rollouts)  # mcp.slots: at most max_rollouts run at once, as many wait
        self.active: dict[str, Active] = {}

    def run_dir(self, run_id: str) -> Path:
        """``root / run_id`` after checking the name cannot leave root. Raises ToolError otherwise."""
        if not isinstance(run_id, str) or not RUN_NAME.fullmatch(run_id):
            raise ToolError(
                f"invalid run name {run_id!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter "
                f"or digit (no '/', no '..', no absolute paths); runs are kept under {self.root}"
            )
        path = (self.root / run_id).resolve()
        if not path.is_relative_to(self.root) or path == self.root:
            raise ToolError(f"run name {run_id!r} resolves outside {self.root}; refused")
        return path

    def existing_run_dir(self, run_id: str) -> Path:
        path = self.run_dir(run_id)
        try:
            found = read_run_log(path)
        except ConfigError as exc:  # a foreign or damaged run.json: say so, not a crash
            raise ToolError(str(exc)) from None
        if found is None:
            known = ", ".join(r.run_id for r in self.list_runs(20)) or "none yet"
            raise ToolError(f"no run named {run_id!r} under {self.root}; recent runs: {known}")
        return path

    async def run(self, spec: EvalSpec, run_name: str | None, ctx: Context | None) -> CallToolResult:
        run_id = run_name if run_name is not None else f"{default_run_dir(spec).name}-{uuid.uuid4().hex[:6]}"
        run_dir = self.run_dir(run_id)
        await self._wait_for_stopping(run_id)
        active = self.active[run_id] = Active()
        try:  # cancelled (the client cancelled or went away): see rollbench.mcp.slots; the directory stays resumable
            result = await self.slots.run(
                active, lambda: evaluate(spec, out=run_dir, observer=Notifier(run_id, active, ctx))
            )
        except anyio.get_cancelled_exc_class():
            if active.state == "ended":
                log.info("run %s stopped on cancellation after %d episodes", run_id, active.done)
            raise
        except ConfigError as exc:
            raise tool_error(exc, (spec.policy,), " (list_envs and list_policies give every valid name)") from None
        except RollbenchError as exc:
            raise tool_error(exc, (spec.policy,)) from None
        except ToolError:
            raise
        except Exception as exc:
            log.exception("run %s failed", run_id)
            raise ToolError(
                f"the run failed unexpectedly ({type(exc).__name__}: {exc}); committed episodes are kept in "
                f"{run_dir}; grade_run({run_id!r}) reports what was recorded"
            ) from None
        finally:
            if self.active.get(run_id) is active:
                del self.active[run_id]
        res = run_result(result, run_id, run_dir, read_run_log(run_dir), active.done_at_start)
        return _call_result(res.summary, res)

    async def _wait_for_stopping(self, run_id: str) -> None:
        """A cancelled run of the same name finishes its current episode first (a wait that takes no worker
        thread, and ends at once for one that never started); a live one is refused."""
        current = self.active.get(run_id)
        if current is None:
            return
        if not current.stop.is_set():
            raise ToolError(
                f"run {run_id!r} is already running in this server ({current.last or 'starting'}); "
                "call get_run to follow it, or choose another run_name"
            )
        await current.ended.wait()
        if self.active.get(run_id) is current:
            del self.active[run_id]
        if run_id in self.active:
            raise ToolError(f"run {run_id!r} was restarted by another request; call get_run to follow it")

    def grade_run(self, run_id: str) -> CallToolResult:
        run_dir = self.existing_run_dir(run_id)
        try:
            result = grade(run_dir)
        except RollbenchError as exc:
            raise ToolError(str(exc)) from None
        res = run_result(result, run_id, run_dir, read_run_log(run_dir), None)
        return _call_result(res.summary, res)

    def robustness(self, run_id: str, rule: CoverageRule = DEFAULT_RULE) -> dict[str, Any]:
        """The robustness table of a run, recomputed from its files (:mod:`rollbench.grading.robustness`)."""
        try:
            return study_of_run(self.existing_run_dir(run_id), rule)
        except RollbenchError as exc:
            raise ToolError(str(exc)) from None

    def get_run(self, run_id: str) -> CallToolResult:
        run_dir = self.existing_run_dir(run_id)
        active = self.active.get(run_id)
        state: Literal["running", "stopping", "finished", "interrupted"]
        log_ = require_run_log(run_dir)
        if active is not None:
            state = "stopping" if active.stop.is_set() else "running"
        elif log_.status == "RUNNING":
            state = "running" if is_locked(run_dir) else "interrupted"
        else:
            state = "finished"
        live = None
        if state == "running":
            with contextlib.suppress(OSError, ValueError):  # a link, FIFO or device is not read (UnsafeFile)
                live = read_regular_json(run_dir / "run.live.json", run_dir, max_bytes=MAX_LIVE_BYTES)
        if active is not None:
            live = {**(live or {}), "episodes_done": active.done, "episodes_total": active.total, "last": active.last}
        graded = None
        if state == "finished":  # the reasons grade recomputes (as grade_run), never run.json's recorded text
            try:
                graded = list(grade(run_dir).reasons)
            except RollbenchError as exc:
                graded = [str(exc)]
        info = checked_run_info(run_id, run_dir, log_, state, live, graded)
        return _call_result(info.summary, info)

    def list_runs(self, limit: int) -> list[RunRow]:
        if not self.root.is_dir():
            return []
        rows: list[tuple[float, RunRow]] = []
        for d in iter_run_dirs(self.root):  # real directories holding a regular run.json, links not followed
            try:
                mtime = (d / "run.json").stat().st_mtime
                rows.append((mtime, run_row(d.name, require_run_log(d), mtime)))
            except (OSError, RollbenchError, *FOREIGN_LOG) as exc:  # foreign run.json
                log.warning("skipping unreadable run %s: %r", d, exc)
        rows.sort(key=lambda r: r[0], reverse=True)
        return [r for _, r in rows[:limit]]


def _call_result(summary: str, model: BaseModel) -> CallToolResult:
    """The summary first (what an agent reads), the full JSON second, and the structured content."""
    data = model.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=summary), TextContent(type="text", text=json.dumps(data, indent=1))],
        structured_content=data,
    )


def build_server(
    root: Path,
    max_steps_ceiling: int = DEFAULT_MAX_STEPS_CEILING,
    checkpoints: tuple[str, ...] = (),
    max_rollouts: int = DEFAULT_MAX_ROLLOUTS,
) -> MCPServer:
    """The MCP server with rollbench's tools; every run directory is created under ``root``; at most
    ``max_rollouts`` rollouts run at once (:mod:`rollbench.mcp.slots`)."""
    svc = RolloutService(root, max_steps_ceiling, checkpoints, max_rollouts)
    from importlib.metadata import version

    # WARNING: the SDK's INFO lines (one per request, and each refused call as a block) would reach the terminal
    # of the client that launched the server over stdio (issue 30, item 22); refusals go back to the client
    server: MCPServer = MCPServer(
        "rollbench", version=version("rollbench"), instructions=INSTRUCTIONS, log_level="WARNING"
    )
    _add_run_tool(server, svc)
    _add_read_tools(server, svc)
    add_sequential_tool(server, svc, _call_result)
    add_checkpoints_tool(server, svc)
    make_strict(server)  # arguments as published: no coercion, no unknown names (rollbench.mcp.strict)
    return server


def _add_run_tool(server: MCPServer, svc: RolloutService) -> None:
    """run_policy_rollout: its arguments' JSON schema carries this server's ``--max-steps-ceiling``."""
    ceiling = svc.bounds.ceiling
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)

    @server.tool(annotations=writes, structured_output=True, description=RUN_POLICY_ROLLOUT)
    async def run_policy_rollout(
        policy: Annotated[
            str,
            Field(
                description="Policy name from list_policies (e.g. scripted-expert) or a policy-server URL (ws://host:port)."
            ),
        ],
        env: Annotated[
            str,
            Field(
                description="Task from list_envs (e.g. metaworld/reach-v3), a suite (e.g. metaworld/MT10) or comma-separated tasks."
            ),
        ],
        n_episodes: Annotated[
            int,
            Field(
                description=f"Episodes to record per task (1 to {MAX_EPISODES}); the scene is reset before each one.",
                json_schema_extra={"minimum": 1, "maximum": MAX_EPISODES},
            ),
        ],
        max_steps: Annotated[
            int,
            Field(
                description=f"Required. Horizon: the most env steps one episode may take (1 to {ceiling}).",
                json_schema_extra={"minimum": 1, "maximum": ceiling},
            ),
        ],
        seed: Annotated[
            int, Field(ge=0, le=2**31 - 1, description="Base seed; episode k of each task is reset with seed + k.")
        ] = 0,
        instruction: Annotated[
            str | None, Field(max_length=MAX_INSTRUCTION_CHARS, description="Override of the task's instruction.")
        ] = None,
        video: Annotated[bool, Field(description="Also record one mp4 per episode (slower).")] = False,
        run_name: Annotated[
            str | None,
            Field(
                description="Name of the run directory under the server's root (letters, digits, '.', '_', '-'). Reuse a name with the same arguments to resume a cancelled or partial run. Default: generated."
            ),
        ] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, RunResult]:
        spec = rollout_spec(svc.bounds, policy, env, n_episodes, max_steps, seed, instruction, video)
        return await svc.run(spec, run_name, ctx)


def _add_read_tools(server: MCPServer, svc: RolloutService) -> None:
    """list_envs, list_policies, get_run, grade_run, robustness_study, list_runs: they read, never write."""
    reads = ToolAnnotations(read_only_hint=True)

    @server.tool(annotations=reads)
    def list_envs(
        family: Annotated[str | None, Field(description="Only this env family (e.g. metaworld): its tasks.")] = None,
        detail: Annotated[bool, Field(description="Full rows: horizon, cameras, success rule per task.")] = False,
    ) -> list[dict[str, Any]]:
        """List env families (name, one line, installed, task count, suites); with family, that family's tasks and instructions; with detail, every field."""
        try:
            return env_listing(report_rows.list_envs(), family, detail)
        except ConfigError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=reads)
    def list_policies() -> list[PolicyRow]:
        """List the policies run_policy_rollout accepts, one line of description each (URL forms connect to a policy server); kind "fixture" marks test fixtures and stand-ins, listed last."""
        return [PolicyRow.model_validate(r) for r in report_rows.list_policies()]

    @server.tool(annotations=reads, structured_output=True)
    def get_run(
        run_id: Annotated[str, Field(description="A run id from run_policy_rollout or list_runs.")],
    ) -> Annotated[CallToolResult, RunInfo]:
        """Describe one run: what was asked (env, policy, episodes, horizon), its state (running, stopping, finished, interrupted), live progress while it runs, and the status recorded when it last finished. Call grade_run for results recomputed from the files."""
        return svc.get_run(run_id)

    @server.tool(annotations=reads, structured_output=True)
    def grade_run(
        run_id: Annotated[str, Field(description="A run id from run_policy_rollout or list_runs.")],
    ) -> Annotated[CallToolResult, RunResult]:
        """Re-grade a run from its recorded files: status, episodes recorded of requested, success rate with 95% interval, termination reasons, per-task table, and which episodes are missing or errored and why."""
        return svc.grade_run(run_id)

    @server.tool(annotations=reads)
    def robustness_study(
        run_id: Annotated[str, Field(description="A run id from run_policy_rollout or list_runs.")],
        min_coverage: Annotated[float, Field(ge=0, le=1, description=MIN_COVERAGE_HELP)] = DEFAULT_RULE.min_coverage,
        exclude_policy_errors: Annotated[bool, Field(description=EXCLUDE_POLICY_ERRORS_HELP)] = False,
    ) -> dict[str, Any]:
        """Robustness table of a run of perturbed tasks and their controls (e.g. LIBERO-PRO suites with their base suites): per perturbation category and level, control and perturbed success rates over paired trials, the paired difference with its 95% interval, the exact McNemar p-value and Holm's adjusted one; recomputed from the files."""
        return svc.robustness(run_id, CoverageRule(min_coverage, exclude_policy_errors))

    @server.tool(annotations=reads)
    def list_runs(
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many runs, newest first.")] = 20,
    ) -> list[RunRow]:
        """List the runs under the server's root, newest first, with the status recorded when each last finished."""
        return svc.list_runs(limit)


def serve(
    transport: str = "stdio",
    root: Path = Path("runs"),
    max_steps_ceiling: int = DEFAULT_MAX_STEPS_CEILING,
    checkpoints: tuple[str, ...] = (),
    http: HttpBinding | None = None,
    max_rollouts: int = DEFAULT_MAX_ROLLOUTS,
) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (http: streamable HTTP at
    ``http://host:port/mcp`` of ``http`` (default :class:`~rollbench.mcp.http.HttpBinding`), with the token and
    Host/Origin checks of :mod:`rollbench.mcp.http`); at most ``max_rollouts`` rollouts run at once. Raises
    ConfigError, before anything is created, for an unknown transport, an unusable root, ``max_rollouts`` out of range,
    or an http host that is not loopback and has no token."""
    from rollbench.mcp import http as mcp_http
    from rollbench.mcp.stdio import run_stdio

    binding = http or HttpBinding()
    check_max_rollouts(max_rollouts)
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport {transport!r}; valid transports: stdio, http")
    if transport == "http":  # refuse an unsafe host before anything is created
        mcp_http.allowed_names(binding.host, binding.token, binding.allow_hosts)
    elif binding.token is not None or binding.allow_hosts or (binding.bounds, binding.sessions) != HTTP_DEFAULTS:
        raise ConfigError(
            "--token, --allow-host, --request-timeout-s, --max-connections, --max-sessions and --session-idle-s "
            "apply to --transport http only"
        )
    root = root.expanduser().resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the runs root {root}: {exc}") from None
    server = build_server(root, max_steps_ceiling, checkpoints, max_rollouts)
    log.debug("rollbench mcp: runs are written under %s", root)
    if transport == "stdio":
        run_stdio(server)
    else:
        mcp_http.run_http(server, binding)
