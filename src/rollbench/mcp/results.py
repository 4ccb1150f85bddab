"""The MCP tools' structured results and their plain-language summaries (see :mod:`rollbench.mcp.server`).

Every number comes from :func:`rollbench.grading.grade.grade`'s document or the run directory's ``run.json`` and
``meta/info.json``; this module only reshapes them and says them in words an agent can repeat.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rollbench.core.format import interval, pct, printable
from rollbench.core.grade_model import GradeDocument
from rollbench.core.runlog_model import RunLog
from rollbench.core.spec import EvalSpec
from rollbench.grading.stopped import listed_status

# the words an agent reads first: the server's instructions and run_policy_rollout's description
INSTRUCTIONS = (
    "rollbench evaluates robot policies in simulation. To run a policy, call run_policy_rollout once with the "
    "number of episodes you want: it resets the scene before every episode, records every step as a LeRobot "
    "dataset and grades the recording. Report its `status` and `summary` as they are: status OK means every "
    "requested episode was recorded without error; PARTIAL or FAILED lists which episodes are missing or "
    "errored and why. Use list_envs and list_policies for valid names, list_runs/get_run/grade_run for past runs."
)

RUN_POLICY_ROLLOUT = (
    "Run a robot policy in simulation for n_episodes independently reset episodes (each at most max_steps env "
    "steps; policy, env, n_episodes and max_steps are required), record every step as a LeRobot v3 dataset under the server's root, grade the recording from disk and "
    "return the result.\n\n"
    "Use this instead of stepping an environment yourself: one call records exactly the requested episodes, with "
    "a reset before each. The result's `status` is computed from the recorded files: OK only when every requested "
    "episode is recorded and none errored; PARTIAL or FAILED otherwise, and `summary` says which episodes and why. "
    "Repeat `summary` and `status` to the user as they are; never call a PARTIAL or FAILED run a success. "
    "Progress is reported after every episode. If the call is cancelled, the episodes finished so far are kept; "
    "call again with the same arguments and the same run_name (the run_id) to record the rest."
)


class TaskRow(BaseModel):
    """One task's graded numbers (success rate with its 95% Wilson interval; lengths in env steps)."""

    task: str
    episodes: int
    successes: int
    success_rate: float | None
    ci95_low: float
    ci95_high: float
    mean_length: float | None
    errors: int
    termination_reasons: dict[str, int]


class ErroredEpisode(BaseModel):
    episode_index: int
    task: str
    seed: int | None
    error: str
    error_fault: str | None = None  # policy, environment or infrastructure (grade's errors_by_fault)


class RunResult(BaseModel):
    """What run_policy_rollout and grade_run return; every number is graded from the run directory."""

    run_id: str
    run_dir: str
    status: Literal["OK", "PARTIAL", "FAILED"]
    episodes_requested: int
    episodes_recorded: int
    episodes_missing: list[int] = Field(description="Planned episode indices with no recording.")
    errored_episodes: list[ErroredEpisode]
    successes: int
    success_rate: float | None = Field(description="successes / recorded episodes; errored episodes count as failures.")
    success_rate_ci95: tuple[float, float] = Field(description="95% Wilson score interval of the success rate.")
    scored: int = Field(description="Episodes the coverage rule scores (environment/infrastructure errors left out).")
    coverage: float = Field(description="scored / recorded episodes (0 without episodes).")
    scored_success_rate: float | None = Field(
        description="successes / scored: the coverage rule's rate (docs/analysis.md, 'Errors and coverage')."
    )
    errors_by_fault: dict[str, int] = Field(description="Errored episodes per fault.")
    termination_reasons: dict[str, int]
    tasks: list[TaskRow]
    reasons: list[str] = Field(description="Why the status is not OK, in words (empty when OK).")
    dataset_total_episodes: int | None = Field(description="total_episodes in the dataset's meta/info.json.")
    episodes_recorded_before_this_call: int | None = Field(description="Episodes a resumed run already held.")
    summary: str


class RunInfo(BaseModel):
    """get_run: what a run was asked to do, its state, live progress and the status recorded in run.json."""

    run_id: str
    run_dir: str
    state: Literal["running", "stopping", "finished", "interrupted"]
    status: str = Field(description="As recorded in run.json: RUNNING while running, then OK, PARTIAL or FAILED.")
    env: str
    policy: str
    n_episodes: int
    max_steps: int | None
    seed: int
    instruction: str | None
    video: bool
    episodes_requested: int
    episodes_recorded: int | None
    success_rate: float | None
    reasons: list[str]
    created: str | None
    executions: list[dict[str, Any]]
    live: dict[str, Any] | None = Field(description="Live progress while the run is running.")
    summary: str


class RunRow(BaseModel):
    run_id: str
    status: str
    env: str
    policy: str
    episodes_requested: int
    episodes_recorded: int | None
    success_rate: float | None
    created: str | None
    updated: str


class EnvTaskRow(BaseModel):
    name: str
    max_steps: int
    cameras: list[str]
    success_rule: str
    instruction: str


class EnvFamilyRow(BaseModel):
    family: str
    description: str
    installed: bool
    missing: str | None
    suites: dict[str, list[str]]
    tasks: list[EnvTaskRow]


class PolicyRow(BaseModel):
    name: str
    description: str
    kind: Literal["policy", "fixture"] = Field(
        description="fixture: a test fixture or stand-in shipped for rollbench's own tests and benchmarks."
    )


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def run_result(result: GradeDocument, run_id: str, run_dir: Path, log_: RunLog | None, before: int | None) -> RunResult:
    """Turn grade's document into the tool result, with a summary an agent can repeat word for word."""
    planned = sorted(e.episode_index for e in log_.plan.episodes) if log_ is not None else []
    recorded = {e.episode_index for e in result.episodes}
    reasons: dict[str, int] = {}
    for t in result.tasks.values():
        for k, v in t.termination_reasons.items():
            reasons[k] = reasons.get(k, 0) + v
    from rollbench.grading.files import read_info

    info = read_info(run_dir, [])  # a regular file inside the run, else {} (grade reported why)
    o = result.overall
    r = RunResult(
        run_id=run_id,
        run_dir=str(run_dir),
        status=result.status,
        episodes_requested=result.episodes_requested,
        episodes_recorded=result.episodes_recorded,
        episodes_missing=[i for i in planned if i not in recorded],
        errored_episodes=[
            ErroredEpisode(
                episode_index=e.episode_index,
                task=printable(e.task),
                seed=e.seed,
                error=printable(e.error or ""),  # a recorded text from outside: one line, no control characters
                error_fault=e.error_fault,
            )
            for e in result.episodes
            if e.termination_reason == "error"
        ],
        successes=o.successes,
        success_rate=o.pooled_success_rate,
        success_rate_ci95=(o.pooled_ci95_low, o.pooled_ci95_high),
        # a document graded before the coverage rule (none here: grade always sets them) would score every episode
        scored=o.scored if o.scored is not None else o.episodes,
        coverage=o.coverage if o.coverage is not None else (1.0 if o.episodes else 0.0),
        scored_success_rate=o.scored_success_rate if o.scored is not None else o.pooled_success_rate,
        errors_by_fault=dict(o.errors_by_fault),
        termination_reasons=dict(sorted(reasons.items())),
        tasks=[
            TaskRow(task=name, **{k: getattr(t, k) for k in TaskRow.model_fields if k != "task"})
            for name, t in result.tasks.items()
        ],
        reasons=[printable(r) for r in result.reasons],
        dataset_total_episodes=info.get("total_episodes"),
        episodes_recorded_before_this_call=before,
        summary="",
    )
    r.summary = _result_summary(r, log_.spec if log_ is not None else None, run_id, run_dir, bool(info), before)
    return r


def _result_summary(
    r: RunResult, spec: EvalSpec | None, run_id: str, run_dir: Path, has_info: bool, before: int | None
) -> str:
    """``r`` in words an agent can repeat: what was recorded, the success rate, and the status with its reasons."""
    max_steps = spec.max_steps if spec is not None else None
    horizon = f"at most {max_steps} steps each" if max_steps else "each up to its task's horizon"
    s = [
        f"Recorded {r.episodes_recorded} of {r.episodes_requested} requested episodes of {spec.env if spec else None} with "
        f"policy {spec.policy if spec else None} ({horizon}, scene reset before every episode) in run {run_id}"
        + (f"; the dataset's meta/info.json says total_episodes={r.dataset_total_episodes}." if has_info else ".")
    ]
    if before:
        s.append(
            f"{before} of them were recorded by an earlier call (resumed); this call recorded {r.episodes_recorded - before}."
        )
    if r.episodes_recorded:
        s.append(
            f"{r.successes} succeeded: success rate {pct(r.success_rate)} (95% interval {interval(*r.success_rate_ci95)}"
            f"); termination reasons: {_counts(r.termination_reasons)}."
        )
    if r.scored != r.episodes_recorded:
        s.append(
            f"Counting only the {r.scored} scored episodes (environment and infrastructure errors are not the "
            f"policy's; coverage {pct(r.coverage)}): success rate {pct(r.scored_success_rate)}."
        )
    if r.status == "OK":
        s.append(
            "Status OK: every requested episode is recorded and none ended in error (graded from the recorded files)."
        )
    else:
        more = len(r.reasons) - 6
        s.append(
            f"Status {r.status}, not OK: "
            + "; ".join(r.reasons[:6])
            + (f"; and {more} more reasons." if more > 0 else ".")
        )
        if r.errored_episodes:
            s.append(
                "Errored episodes count as failures in the success rate; the scored rate leaves out environment "
                "and infrastructure errors."
            )
        if r.episodes_missing:
            s.append(
                f"To record the missing episodes, call run_policy_rollout again with the same arguments and "
                f"run_name={run_id!r}."
            )
    s.append(f"Dataset (LeRobot v3): {run_dir}.")
    return " ".join(s)


def _recorded(log_: RunLog) -> tuple[int | None, float | None, list[str]]:
    res = log_.results
    if res is None:
        return None, None, []
    return res.episodes_recorded, res.overall.pooled_success_rate, list(res.reasons)


def run_row(run_id: str, log_: RunLog, mtime: float) -> RunRow:
    spec = log_.spec
    n, rate, _ = _recorded(log_)
    return RunRow(
        run_id=run_id,
        status=listed_status(log_),  # a sequential arm stopped by its rule is OK (grading.stopped)
        env=spec.env,
        policy=spec.policy,
        episodes_requested=log_.plan.episodes_requested,
        episodes_recorded=n,
        success_rate=rate,
        created=log_.provenance.created,
        updated=datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def run_info(
    run_id: str, run_dir: Path, log_: RunLog, state: Any, live: dict[str, Any] | None, graded: list[str] | None = None
) -> RunInfo:
    """get_run's answer; ``graded``: the reasons ``grade`` recomputes from the files (a finished run), shown instead
    of run.json's recorded ones (which an older version may have written with raw control characters)."""
    spec = log_.spec
    n, rate, recorded = _recorded(log_)
    reasons = [printable(r) for r in (recorded if graded is None else graded)]
    requested = log_.plan.episodes_requested
    what = f"Run {run_id} ({requested} episodes of {spec.env} with policy {spec.policy}, max_steps {spec.max_steps})"
    resume = f"call run_policy_rollout again with the same arguments and run_name={run_id!r} to record the rest"
    if state == "running":
        done = (live or {}).get("episodes_done")
        text = f"{what} is running: {done if done is not None else '?'} of {requested} episodes done so far."
    elif state == "stopping":
        text = f"{what} is stopping after a cancellation; when it has stopped, {resume}."
    elif state == "interrupted":
        text = f"{what} was interrupted before it finished and nothing is writing it; {resume}; grade_run shows what is recorded."
    else:
        text = (
            f"{what} finished with status {log_.status} (as recorded in run.json): {n} of {requested} episodes recorded"
        )
        text += f", success rate {pct(rate)}." if n else "."
        if reasons:
            text += " Reasons (recomputed from the files): " if graded is not None else " Reasons: "
            text += "; ".join(reasons[:6]) + "."
        if n is not None and n < requested:
            text += f" To finish it, {resume}."
        text += f" grade_run({run_id!r}) recomputes the results from the files."
    return RunInfo(
        run_id=run_id,
        run_dir=str(run_dir),
        state=state,
        status=log_.status,
        env=spec.env,
        policy=spec.policy,
        n_episodes=spec.episodes,
        max_steps=spec.max_steps,
        seed=spec.seed,
        instruction=spec.instruction,
        video=bool(spec.video),
        episodes_requested=requested,
        episodes_recorded=n,
        success_rate=rate,
        reasons=reasons,
        created=log_.provenance.created,
        executions=[e.model_dump(mode="json", exclude_unset=True) for e in log_.executions],
        live=live,
        summary=text,
    )


FOREIGN_LOG = (ValueError, KeyError, TypeError, AttributeError)
"""What reading the fields of a run.json of the wrong types raises (a pydantic ValidationError is a ValueError)."""


def checked_run_info(
    run_id: str, run_dir: Path, log_: RunLog, state: Any, live: dict[str, Any] | None, graded: list[str] | None = None
) -> RunInfo:
    """:func:`run_info`, or a ToolError naming the run.json whose fields have the wrong types (a run someone handed
    over), never an "Error executing tool" without a cause."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return run_info(run_id, run_dir, log_, state, live, graded)
    except FOREIGN_LOG as exc:
        raise ToolError(f"{run_dir}/run.json is not a rollbench run log ({type(exc).__name__})") from None
