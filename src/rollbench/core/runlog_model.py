"""The run log (``RUN_DIR/run.json``) as pydantic models.

These models own the format of run.json: it is read and written as a :class:`RunLog`, only by
:mod:`rollbench.record.runlog` (``read_run_log``/``require_run_log`` read it; ``new_run_log``, the named operations
and ``write_run_log``/``update_run_log`` write it, validating the whole document first: one the model refuses is
never written). Their JSON Schema is
``docs/run.schema.json`` (written by ``python -m rollbench.core.schemas``); ``tests/test_schemas.py`` checks that the
committed schema is what these models give and that a real run's run.json validates. Blocks rollbench alone
writes are closed (``extra="forbid"``); ``provenance`` and the policy's provenance are open, since env families and
policies add their own keys. Keys added to the format after its first version are optional. Times are UTC
``YYYY-MM-DDTHH:MM:SSZ`` strings; durations are seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_validator,
)

from rollbench.core.grade_model import Closed, GradeDocument, run_log_order
from rollbench.core.plan_size import population_problem
from rollbench.core.spec import EvalSpec

RunStatus = Literal["RUNNING", "INTERRUPTED", "OK", "PARTIAL", "FAILED"]
MAX_SEQUENTIAL_PAIRS = 5_000  # budget per sequential test: the exact error computation is O(budget^2) per threshold
# budget per sequential test that looks every few pairs (look_every > 1): its exact power is O(budget^3) (about 4 s at
# 1,000 pairs on a loaded 2-core machine, minutes at 5,000), so a design, or a recomputation of one handed over, is
# bounded (issue 42, hostile round 9)
MAX_SCHEDULED_PAIRS = 1_000


def max_pairs(look_every: int) -> int:
    """The largest budget a sequential test looking every ``look_every`` pairs may have (pairs)."""
    return MAX_SEQUENTIAL_PAIRS if look_every <= 1 else MAX_SCHEDULED_PAIRS


class Identity(Closed):
    """``host/robot/name`` of the run (:class:`rollbench.core.identity.RunIdentity`)."""

    host: str
    robot: str
    name: str


class PlanPolicy(Closed):
    """What the policy said about itself when it was probed before the first episode."""

    name: str
    chunk_size: int = Field(ge=1)
    replan_every: int | None
    needs_images: bool
    image_sizes: dict[str, Annotated[list[int], Field(min_length=2, max_length=2)]] | None = Field(
        default=None,
        description="Env family -> [height, width] the policy asked to be rendered (PolicyInfo.image_sizes); "
        "present only when it asked.",
    )
    provenance: dict[str, Any]


class Variant(Closed):
    name: str
    instruction: str


class PerturbationRecord(Closed):
    """A perturbed task's category, level and control (:class:`rollbench.core.perturbation.Perturbation`)."""

    category: str
    level: float | None = None
    control: str | None = None
    detail: str = ""
    rule: str | None = Field(default=None, description="How they were derived (plan tasks only).")


class PlanTask(Closed):
    """One task as it runs: what its first planned episode uses, and what the task declares."""

    name: str
    instruction: str
    max_steps: int = Field(ge=1)
    success_rule: Literal["any_step", "final_step"]
    declared_success_rule: Literal["any_step", "final_step"]
    cameras: list[str]
    fps: int
    settle_steps: int = Field(ge=0)
    source: str
    variants: list[Variant] | None = Field(default=None, description="Instruction sweeps only.")
    perturbation: PerturbationRecord | None = Field(default=None, description="Perturbed tasks only.")


class PlannedEpisode(Closed):
    """One planned episode (:class:`rollbench.core.plan.PlannedEpisode`)."""

    episode_index: int = Field(ge=0)
    task: str
    trial: int = Field(ge=0)
    seed: int = Field(ge=0)
    initial_state: int | None
    task_index: int = Field(ge=0)
    instruction: str
    max_steps: int = Field(ge=1)
    success_rule: Literal["any_step", "final_step"]
    variant: str | None = None
    perturbation: PerturbationRecord | None = None


def _population(value: Any) -> Any:
    if why := population_problem(value):
        raise ValueError(why)
    return value


# [first, end) of one task's shuffled trials, checked before its items (one line: core.plan_size.population_problem)
Population = Annotated[list[int], BeforeValidator(_population), Field(min_length=2, max_length=2)]


class TrialOrder(Closed):
    """``plan.trial_order``: a shuffled plan's trials (``rollbench sequential``; :func:`rollbench.core.plan.trial_order`)."""

    method: Literal["seeded-permutation"]
    seed: int = Field(ge=0, description="EvalSpec.trial_order_seed.")
    populations: dict[str, Population] = Field(description="Task -> [first, end): the trials drawn from.")


class Plan(Closed):
    episodes_requested: int = Field(ge=0)
    replan_every: int = Field(ge=1, description="Actions executed from each chunk before asking the policy again.")
    policy: PlanPolicy
    tasks: list[PlanTask]
    suites: dict[str, list[str]] = Field(description="Suites named in the spec -> their tasks.")
    instructions: list[str] = Field(description="The distinct instructions (LeRobot tasks, in task_index order).")
    episodes: list[PlannedEpisode]
    trial_order: TrialOrder | None = Field(default=None, description="Present when the trials are shuffled.")


class Provenance(BaseModel):
    """Versions and machine facts; env families with a provenance hook add a key of their own (family -> facts)."""

    model_config = ConfigDict(extra="allow")

    versions: dict[str, str | None]
    gl: dict[str, str | None] = Field(description="MUJOCO_GL (null when unset) and PYOPENGL_PLATFORM when set.")
    renderers: dict[str, str] = Field(
        default_factory=dict, description="Family -> what draws its images (MuJoCo's OpenGL, pygame, none)."
    )
    python: str
    git_commit: str | None
    host: str
    platform: str
    created: str


class RayActorPlace(Closed):
    """Where one Ray actor ran (``rollbench.run.ray_runner``): an env actor (``slot``) or a node's policy actor."""

    slot: int | None = Field(default=None, ge=0, description="Worker slot of an env actor; absent for a policy actor.")
    pid: int | None = Field(
        default=None, description="Absent only for a policy actor started that had not answered when the run ended."
    )
    ip: str | None = None
    node: str = Field(description="Ray node id.")
    gpu_ids: list[str] = Field(default_factory=list, description="GPUs Ray assigned (ray.get_gpu_ids()).")
    cuda_visible_devices: str | None = None
    episodes: Literal["shipped", "shared"] | None = Field(
        default=None, description="How an env actor's episodes reached the run directory."
    )


class RayNode(Closed):
    ip: str
    alive: bool
    resources: dict[str, float] = Field(description="The node's total Ray resources.")


class RayExecution(Closed):
    """``executions[].ray``: what ``--executor ray`` asked for and where its actors ran (never part of the spec)."""

    cpus: float = Field(gt=0, description="--ray-cpus per env worker.")
    gpus: float = Field(ge=0, description="--ray-gpus per copy of the policy.")
    resources: dict[str, float] = Field(default_factory=dict, description="--ray-resources per env worker.")
    placement: Literal["spread", "pack"]
    policy: Literal["worker", "node"] = Field(description="node: --ray-policy-per-node.")
    shared_fs: bool
    actors: list[RayActorPlace] = Field(
        default_factory=list,
        description="Every env actor that said where it runs, in that order (one still starting when the run ended is"
        " not listed: it ran nothing).",
    )
    policy_actors: list[RayActorPlace] = Field(
        default_factory=list,
        description="--ray-policy-per-node: every policy actor started, in order; node from its start (node affinity),"
        " pid and GPU ids once it answered.",
    )
    nodes: dict[str, RayNode] = Field(default_factory=dict, description="Ray node id -> node, for nodes used.")


class ExecutionEntry(Closed):
    """One invocation of ``rollbench eval`` (or ``evaluate``) on the directory, first to last."""

    started: str
    workers: int = Field(ge=1)
    executor: Literal["local", "ray"]
    batch_size: int = Field(default=1, ge=1)
    finished: str | None = None
    elapsed_s: float | None = Field(default=None, ge=0, description="Wall time, rounded to ms.")
    interrupted: bool | None = None
    error: str | None = Field(default=None, description="What stopped an invocation that raised.")
    worker_starts: int | None = Field(default=None, ge=0, description="Worker pool counters (several workers).")
    worker_deaths: int | None = Field(default=None, ge=0)
    workers_replaced: int | None = Field(default=None, ge=0)
    episodes_rerun: int | None = Field(default=None, ge=0)
    episodes_lost: int | None = Field(default=None, ge=0)
    ray: RayExecution | None = Field(default=None, description="--executor ray: resources, placement, actors.")


class ReplacedOutcome(Closed):
    termination_reason: str | None
    error: str | None
    error_fault: str | None
    length: int | None


class NewOutcome(Closed):
    termination_reason: str
    success: bool
    error: str | None
    error_fault: str | None
    length: int
    recorded: str


class Replacement(Closed):
    """An errored episode taken back to run again (``--retry-errors``), and its new outcome once recorded."""

    episode_index: int = Field(ge=0)
    task: str
    trial: int = Field(ge=0)
    seed: int = Field(ge=0)
    retry_errors: Literal["infra", "all"]
    time: str
    execution: int = Field(description="Index in executions of the invocation that took it back.")
    old: ReplacedOutcome
    new: NewOutcome | None


class SequentialDesignRecord(Closed):
    """The parameters of a sequential paired test and what they give, exactly: run.json's ``sequential.design``.

    The one declaration of a design's fields: :class:`rollbench.grading.sequential.SequentialDesign` (the rule that
    decides) is this record with its methods, so a design is recorded as it was computed."""

    alpha: float = Field(gt=0, lt=0.5, description="This test's two-sided level (the family's share for a suite).")
    beta: float = Field(gt=0, lt=0.5, description="Target futility error at the design.")
    delta: float = Field(gt=0, lt=1, description="Design difference in success rate, B - A (a fraction).")
    p_a: float = Field(gt=0, lt=1, description="Assumed success rate of A at the design.")
    discordant: float | None = Field(description="Assumed P(exactly one succeeds); null = independent policies.")
    budget: int = Field(ge=1, le=MAX_SEQUENTIAL_PAIRS, description="Most pairs of episodes.")
    look_every: int = Field(
        ge=1, le=MAX_SEQUENTIAL_PAIRS, description="Pairs between looks (the budget is always a look; at most it)."
    )
    theta1: float = Field(description="P(B only | discordant) at the design.")
    efficacy_llr: float = Field(description="Threshold a on the log-likelihood ratios: reaching it decides.")
    futility_llr: float = Field(description="Threshold b: both log-likelihood ratios at or below it is futility.")
    type1_error: float = Field(description="The exact bound on a false 'better' (<= alpha).")
    futility_error: float = Field(description="Exact sup over the discordance of P(futility | theta1).")
    power: float = Field(description="Exact P(B better) at the design's discordance, budget and looks.")
    fixed_n: int = Field(ge=1, description="Pairs the exact McNemar test needs for 1 - beta power (for reference).")
    futility: bool | None = Field(
        default=None, description="Whether the rule stops for futility; absent in designs recorded before issue 40."
    )
    power_target: float | None = Field(default=None, description="The power wanted at delta (issue 40 on).")

    @model_validator(mode="after")
    def _designable(self) -> SequentialDesignRecord:
        """The bounds ``rollbench sequential`` accepts, so that no reader recomputes a design it would refuse (or
        one whose exact power takes minutes): p_a + delta < 1, a possible ``discordant``, ``look_every`` at most the
        budget, and a budget of at most :func:`max_pairs` (``look_every``)."""
        if self.p_a + self.delta >= 1:
            raise ValueError(f"p_a + delta must be below 1, got {self.p_a:g} + {self.delta:g}")
        p_b = self.p_a + self.delta
        if self.discordant is not None and not self.delta <= self.discordant <= min(p_b + self.p_a, 2 - p_b - self.p_a):
            raise ValueError(f"discordant {self.discordant:g} is impossible for p_a {self.p_a:g}, delta {self.delta:g}")
        if self.look_every > self.budget:
            raise ValueError(f"look_every {self.look_every} is above the budget ({self.budget} pairs)")
        if self.budget > max_pairs(self.look_every):
            raise ValueError(
                f"budget {self.budget} is above the {MAX_SCHEDULED_PAIRS} pairs a test looking every "
                f"{self.look_every} pairs may have"
            )
        return self


class CoverageRuleRecord(Closed):
    """The coverage rule a sequential comparison counts its pairs under (:class:`rollbench.grading.coverage.CoverageRule`)."""

    min_coverage: float = Field(ge=0, le=1, description="--min-coverage: scored / attempted needed in each arm.")
    exclude_policy_errors: bool = Field(description="--exclude-policy-errors: policy errors left out, not failures.")


class SequentialRecord(Closed):
    """``run.json`` ``sequential``: this run is one arm of a sequential paired comparison (``rollbench sequential``)."""

    rule: Literal["truncated-sprt-discordant"]
    arm: Literal["a", "b"]
    partner: str = Field(description="run_id of the other arm (a sibling directory).")
    task: str
    family: list[str] = Field(description="The tasks whose decisions share the family-wise error (suite order).")
    alpha_family: float = Field(
        gt=0, lt=0.5, description="Family-wise level, split equally (Bonferroni) over the tasks and the pooled test."
    )
    design: SequentialDesignRecord
    decision: Literal["b_better", "a_better", "futility", "budget_exhausted", "insufficient_coverage"] | None = None
    stopped_at: int | None = Field(
        default=None,
        ge=0,
        description="Pairs at the look that decided (0: no pair scored, e.g. insufficient coverage).",
    )
    coverage_rule: CoverageRuleRecord | None = Field(
        default=None, description="The coverage rule's options; absent = its defaults (0.95, policy errors counted)."
    )


class EliminationRunRecord(Closed):
    """``run.json`` ``elimination``: this run is one checkpoint of ``rollbench checkpoints --eliminate`` and the rule
    stopped it: ``look`` (1-based, of the looks taken) and ``trials`` (its planned episodes 0 .. trials - 1 were
    needed) of the look that eliminated it, or of the final look for the chosen and kept checkpoints."""

    look: int = Field(ge=1, description="The look (1-based) at which the elimination ended for this checkpoint.")
    trials: int = Field(ge=1, description="Episodes per checkpoint at that look: planned episodes 0 .. trials - 1.")
    decision: Literal["eliminated", "chosen", "kept"]


class RunLog(Closed):
    """``run.json``: what was asked (spec, plan), where and how it ran, and the results as last graded."""

    rollbench_run_log: Literal[1]
    run_id: str
    identity: Identity | None = Field(default=None, description="Absent in runs recorded before identities.")
    spec: EvalSpec
    spec_identity: str = Field(description="EvalSpec.identity(): 16 hex digits.")
    plan: Plan
    provenance: Provenance
    warnings: list[str]
    status: RunStatus
    executions: list[ExecutionEntry] = Field(default_factory=list)
    replacements: list[Replacement] = Field(default_factory=list, description="Present once an episode was replaced.")
    results: GradeDocument | None = Field(default=None, description="The grade document as of the last finish.")
    sequential: SequentialRecord | None = Field(default=None, description="Present in an arm of rollbench sequential.")
    elimination: EliminationRunRecord | None = Field(
        default=None, description="Present in a checkpoint's run once rollbench checkpoints --eliminate stopped it."
    )

    @field_serializer("results", mode="wrap")
    def _results_order(self, results: GradeDocument | None, handler: SerializerFunctionWrapHandler) -> object:
        """``results`` in the key order run.json has always kept them in (:func:`~rollbench.core.grade_model.run_log_order`)."""
        doc = handler(results)
        return run_log_order(doc) if isinstance(doc, dict) else doc

    def to_json(self) -> dict[str, Any]:
        """The document as run.json holds it: the keys it was read or built with, JSON values."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)
