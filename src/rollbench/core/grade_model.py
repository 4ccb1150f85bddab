"""The grade document (``rollbench grade --json``, and ``results`` in run.json) as pydantic models.

These models describe what :func:`rollbench.grading.grade.grade` returns; grade builds plain dicts and does not use
them. Their JSON Schema is ``docs/grade.schema.json`` (written by ``python -m rollbench.core.schemas``), so other
tools can validate a document without rollbench; ``tests/test_schemas.py`` checks that the committed schema is what
these models give and that a real run's documents validate. Every block is closed (``extra="forbid"``): grade writes
exactly these keys. Rates and interval bounds are fractions in [0, 1]; lengths are env steps; times are seconds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["OK", "PARTIAL", "FAILED"]


class Closed(BaseModel):
    """A block with exactly the declared keys."""

    model_config = ConfigDict(extra="forbid")


class TaskBlock(Closed):
    """One task's results over its recorded episodes. ``success_rate`` counts every errored episode as a failure
    (all recorded episodes); ``scored_success_rate`` follows the coverage rule (docs/analysis.md, "Errors and
    coverage"): environment-, infrastructure- and unclassified-fault errors left out, policy errors as failures.
    The coverage fields are absent in documents graded before the rule existed."""

    episodes: int = Field(ge=0, description="Recorded episodes of the task (attempted).")
    successes: int = Field(ge=0)
    success_rate: float | None = Field(
        description="successes / episodes, every errored episode a failure; null without episodes."
    )
    ci95_low: float = Field(ge=0, le=1, description="95% Wilson score interval, low end (0 without episodes).")
    ci95_high: float = Field(ge=0, le=1, description="95% Wilson score interval, high end (1 without episodes).")
    scored: int | None = Field(default=None, ge=0, description="Episodes the coverage rule scores.")
    coverage: float | None = Field(default=None, ge=0, le=1, description="scored / episodes (0 without episodes).")
    excluded: dict[str, int] | None = Field(default=None, description="Episodes left out of scoring, per fault.")
    policy_errors_as_failures: int | None = Field(default=None, ge=0, description="Policy errors scored as failures.")
    scored_success_rate: float | None = Field(default=None, description="successes / scored; null when none scored.")
    scored_ci95_low: float | None = Field(default=None, ge=0, le=1, description="Wilson interval over scored.")
    scored_ci95_high: float | None = Field(default=None, ge=0, le=1)
    episodes_ran: int = Field(ge=0, description="Episodes that ran (not errored before their first step).")
    mean_length: float | None = Field(description="Mean steps over the episodes that ran.")
    median_length: float | None
    mean_return: float | None = Field(description="Mean summed reward over the episodes that ran.")
    errors: int = Field(ge=0)
    errors_by_fault: dict[str, int] = Field(
        description="Errored episodes per fault: policy, environment, infrastructure (and unclassified if any)."
    )
    success_at_reset: int = Field(ge=0, description="Episodes already successful at reset (never counted).")
    termination_reasons: dict[str, int]


class PooledBlock(Closed):
    """A suite or the whole run: the pooled count over its episodes and the unweighted mean over its tasks."""

    tasks: int = Field(ge=0)
    episodes: int = Field(ge=0)
    successes: int = Field(ge=0)
    errors: int = Field(ge=0)
    errors_by_fault: dict[str, int]
    pooled_success_rate: float | None = Field(description="successes / episodes, every errored episode a failure.")
    pooled_ci95_low: float = Field(ge=0, le=1)
    pooled_ci95_high: float = Field(ge=0, le=1)
    mean_task_success_rate: float | None = Field(description="Unweighted mean of the tasks' success rates.")
    scored: int | None = Field(default=None, ge=0, description="Episodes the coverage rule scores.")
    coverage: float | None = Field(default=None, ge=0, le=1, description="scored / episodes.")
    excluded: dict[str, int] | None = Field(default=None, description="Episodes left out of scoring, per fault.")
    policy_errors_as_failures: int | None = Field(default=None, ge=0)
    scored_success_rate: float | None = Field(default=None, description="successes / scored (the coverage rule).")
    scored_ci95_low: float | None = Field(default=None, ge=0, le=1)
    scored_ci95_high: float | None = Field(default=None, ge=0, le=1)


class LatencyBlock(Closed):
    """Policy-call latency (seconds) over the steps that called the policy."""

    policy_calls: int = Field(ge=0)
    calls_per_episode: float | None
    p50_s: float | None
    p95_s: float | None
    p99_s: float | None
    mean_s: float | None


class Latency(LatencyBlock):
    by_task: dict[str, LatencyBlock]


class Paired(Closed):
    """Counts over the trials recorded for both a variant and the reference variant (same seed and state)."""

    reference: str
    pairs: int = Field(ge=0)
    both: int = Field(ge=0)
    reference_only: int = Field(ge=0)
    variant_only: int = Field(ge=0)
    neither: int = Field(ge=0)


class VariantBlock(TaskBlock):
    """One instruction variant of a task in a sweep."""

    instruction: str
    paired: Paired


class EpisodeUsage(Closed):
    """Model calls, tokens and cost (USD, null when no call reports one) from an episode's transcript."""

    model_calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)
    cost_usd: float | None


class UsageTotals(EpisodeUsage):
    episodes: int = Field(ge=0, description="Episodes with a transcript summed here.")


class AgentUsage(Closed):
    overall: UsageTotals
    by_task: dict[str, UsageTotals]


class Timing(Closed):
    """Wall time from run.json's executions and the graded episodes' own times."""

    eval_wall_time_s: float | None = Field(description="Summed elapsed_s of the finished invocations.")
    invocations: int = Field(ge=0, description="Invocations that finished (recorded elapsed_s).")
    invocations_unrecorded: int | None = Field(
        default=None, ge=0, description="Invocations that left no elapsed_s (killed); absent in older documents."
    )
    episode_time_s: float = Field(ge=0, description="Summed per-episode wall times (reset to last step).")


class DelayStats(Closed):
    """How late the executed actions were (env steps) and how often the robot held, over recorded steps."""

    steps: int = Field(ge=0, description="Steps recorded (padding frames left out).")
    hold_steps: int = Field(ge=0, description="Steps that ran the task's hold action.")
    hold_share: float | None = Field(description="hold_steps / steps; null without steps.")
    mean_delay_steps: float | None = Field(description="Over policy actions: step minus its observation's step.")
    max_delay_steps: int | None


class Delay(DelayStats):
    """Runs with a latency other than ``none`` (:mod:`rollbench.grading.delay`)."""

    latency: str = Field(description="The spec's latency: fixed:MS, steps:K or measured.")
    stale: Literal["skip", "execute"]
    call_delay_steps: int | None = Field(description="Delay of every policy call in steps; null for measured.")
    by_task: dict[str, DelayStats]


class GradedEpisode(Closed):
    """One recorded episode, recomputed from its step rows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    episode_index: int = Field(ge=0)
    task: str
    trial: int = Field(ge=0)
    seed: int = Field(ge=0)
    initial_state: int | None
    instruction: str | None
    variant: str | None
    success: bool
    success_at_reset: bool
    length: int = Field(ge=0, description="Steps executed.")
    return_: float = Field(alias="return", description="Sum of next.reward.")
    termination_reason: str
    error: str | None
    error_fault: str | None = Field(
        description="policy, environment, infrastructure or unclassified; null unless error."
    )
    render_failure: str | None = Field(
        description="Why the images were black or frozen (then the episode is an environment error); else null."
    )
    render_fault: str | None = Field(
        deprecated=True,
        description="Deprecated (issue 29: 'fault' names only the category of an error): render_failure's old name, "
        "the same value; to be removed.",
    )
    transcript: str | None = Field(description="Path of the agent transcript, relative to the run directory.")
    agent_usage: EpisodeUsage | None = Field(default=None, description="Present when the transcript was readable.")


class GradeDocument(Closed):
    """What ``rollbench grade --json`` prints and run.json keeps under ``results``."""

    status: Status
    reasons: list[str] = Field(
        description="Why the status is not OK, in words (empty when OK, except the stop of a sequential arm)."
    )
    violations: list[str] = Field(description="Broken invariants of the recorded files.")
    episodes_requested: int = Field(ge=0)
    episodes_recorded: int = Field(ge=0)
    tasks: dict[str, TaskBlock]
    suites: dict[str, PooledBlock]
    overall: PooledBlock
    latency: Latency
    episodes: list[GradedEpisode]
    variants: dict[str, dict[str, VariantBlock]] | None = Field(
        default=None, description="Instruction sweeps only: task -> variant (the first is the reference)."
    )
    agent_usage: AgentUsage | None = Field(default=None, description="When any episode has a transcript.")
    delay: Delay | None = Field(default=None, description="Runs with a latency other than none.")
    timing: Timing
