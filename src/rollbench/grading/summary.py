"""Results from graded episodes: per-task blocks, suites and the pooled overall block, instruction variants,
errors per fault, agent usage and the status with its reasons: the :class:`~rollbench.core.grade_model.GradeDocument`
``grade`` returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from rollbench.core.contracts import FAULTS
from rollbench.core.format import printable
from rollbench.core.grade_model import (
    AgentUsage,
    Delay,
    EpisodeUsage,
    GradedEpisode,
    GradeDocument,
    Latency,
    Paired,
    PooledBlock,
    Status,
    TaskBlock,
    Timing,
    UsageTotals,
    VariantBlock,
)
from rollbench.core.runlog_model import PlannedEpisode, RunLog
from rollbench.grading.coverage import ArmCoverage, merge, outcome_of, tally
from rollbench.grading.stats import wilson_interval
from rollbench.grading.stopped import split_missing, stop_reason


class CoverageFields(TypedDict):
    """A block's coverage-rule fields (:mod:`rollbench.grading.coverage`)."""

    scored: int
    coverage: float
    excluded: dict[str, int]
    policy_errors_as_failures: int
    scored_success_rate: float | None
    scored_ci95_low: float
    scored_ci95_high: float


def episode_fault(meta_row: Mapping[str, object]) -> str:
    """An errored episode's fault; ``unclassified`` for runs recorded before ``rollbench/error_fault`` existed."""
    fault = meta_row.get("rollbench/error_fault")
    return fault if isinstance(fault, str) and fault in FAULTS else "unclassified"


def errors_by_fault(eps: list[GradedEpisode]) -> dict[str, int]:
    """Errored episodes per fault: every fault of :data:`rollbench.core.contracts.FAULTS` (0 if none), plus ``unclassified``
    when there are any."""
    counts = dict.fromkeys(FAULTS, 0)
    for e in eps:
        if e.termination_reason == "error":
            fault = e.error_fault or "unclassified"
            counts[fault] = counts.get(fault, 0) + 1
    return counts


def coverage_fields(cov: ArmCoverage) -> CoverageFields:
    """A block's coverage-rule fields (:mod:`rollbench.grading.coverage`): ``scored``, ``coverage``, ``excluded``,
    ``policy_errors_as_failures`` and ``scored_success_rate`` with its Wilson interval ``scored_ci95_low/high``."""
    lo, hi = wilson_interval(cov.successes, cov.scored)
    return CoverageFields(
        scored=cov.scored,
        coverage=cov.coverage,
        excluded=dict(cov.excluded),
        policy_errors_as_failures=cov.policy_errors_as_failures,
        scored_success_rate=cov.success_rate,
        scored_ci95_low=lo,
        scored_ci95_high=hi,
    )


def _task_block(eps: list[GradedEpisode]) -> TaskBlock:
    n = len(eps)
    s = sum(1 for e in eps if e.success)
    lo, hi = wilson_interval(s, n)
    # lengths and returns are over the episodes that ran: an episode that errored before its first step has none
    ran = [e for e in eps if e.length or e.termination_reason != "error"]
    k = len(ran)
    lengths = sorted(e.length for e in ran)
    reasons: dict[str, int] = {}
    for e in eps:
        reasons[e.termination_reason] = reasons.get(e.termination_reason, 0) + 1
    median = (lengths[(k - 1) // 2] + lengths[k // 2]) / 2 if k else None
    returns = [e.return_ for e in ran]
    return TaskBlock(
        episodes=n,
        successes=s,
        success_rate=s / n if n else None,
        ci95_low=lo,
        ci95_high=hi,
        episodes_ran=k,
        mean_length=sum(lengths) / k if k else None,
        median_length=median,
        # null when an episode's return is not a number (grade names it as a violation)
        mean_return=sum(r for r in returns if r is not None) / k if k and None not in returns else None,
        errors=reasons.get("error", 0),
        errors_by_fault=errors_by_fault(eps),
        success_at_reset=sum(1 for e in eps if e.success_at_reset),
        termination_reasons=dict(sorted(reasons.items())),
        **coverage_fields(tally([outcome_of(e) for e in eps])),
    )


def _reasons(
    episodes: list[GradedEpisode], requested: int, missing: list[int], ungraded: bool, stopped: str | None
) -> list[str]:
    """Why the status is not OK, in words: a sequential stop, episodes not recorded (or not graded), each errored
    episode with its fault, the counts per fault, episodes successful at reset or with a render failure."""
    errored = [e for e in episodes if e.termination_reason == "error"]
    reasons: list[str] = []
    if stopped:
        reasons.append(stopped)
    if missing:
        shown = ("episode " if len(missing) == 1 else "episodes ") + ", ".join(map(str, missing[:20]))
        shown += " ..." if len(missing) > 20 else ""
        reasons.append(
            f"{len(missing)} of {requested} requested episodes are not recorded ({shown})"
            if not ungraded
            else f"{len(missing)} of {requested} requested episodes are not recorded or not graded ({shown})"
        )
    for e in errored[:20]:
        reasons.append(
            f"episode {e.episode_index} ({printable(e.task)}, seed {e.seed}) ended in error ({e.error_fault} fault): "
            f"{printable(e.error)}"  # recorded text: one line, no control characters
        )
    if len(errored) > 20:
        reasons.append(f"... and {len(errored) - 20} more episodes ended in error")
    by_fault = errors_by_fault(errored)
    if errored:
        reasons.append("errors by fault: " + ", ".join(f"{n} {fault}" for fault, n in by_fault.items() if n))
    if by_fault["infrastructure"]:
        reasons.append(
            f"{by_fault['infrastructure']} episode(s) failed through no fault of the policy (infrastructure: server "
            "unreachable, disconnect, timeout, worker death, env build); re-running the same command re-runs them"
        )
    for e in episodes:
        if e.success_at_reset:
            reasons.append(f"episode {e.episode_index} was already successful at reset (not counted as success)")
        if e.render_failure:
            reasons.append(f"episode {e.episode_index} has a render failure: {e.render_failure}")
    return reasons


@dataclass(frozen=True)
class TimeBlocks:
    """The grade document's run-wide time blocks, each computed from the recorded files: policy-call ``latency``,
    wall-clock ``timing`` and, for a run with ``--latency``, the action ``delay`` (None otherwise)."""

    latency: Latency
    timing: Timing
    delay: Delay | None = None


def summarise(
    log: RunLog,
    episodes: list[GradedEpisode],
    requested: int,
    missing: list[int],
    violations: list[str],
    times: TimeBlocks,
    ungraded: bool = False,
) -> GradeDocument:
    """The grade document from graded ``episodes`` and the run's ``times``; ``missing``: the planned episodes not
    among them (not recorded, or with ``ungraded`` some recorded but without readable step rows, named in
    ``violations``). ``variants`` only for an instruction sweep, ``delay`` only when ``times`` has one,
    ``agent_usage`` only when an episode has a readable transcript: the keys a document without them never had."""
    task_names = [t.name for t in log.plan.tasks]
    tasks = {t: _task_block([e for e in episodes if e.task == t]) for t in task_names}
    suites = {name: _overall({t: tasks[t] for t in members}) for name, members in log.plan.suites.items()}
    missing, not_needed = split_missing(missing, log)  # a sequential arm stopped by its rule needs no more
    reasons = _reasons(episodes, requested, missing, ungraded, stop_reason(log, len(not_needed)))
    reasons.extend(violations)
    completed = sum(1 for e in episodes if e.termination_reason != "error")
    status: Status
    if completed == 0:
        status = "FAILED"
    elif missing or completed < len(episodes) or violations:
        status = "PARTIAL"
    else:
        status = "OK"
    if status == "FAILED" and not reasons:
        reasons.append("no episode was recorded")
    doc = GradeDocument(
        status=status,
        reasons=reasons,
        violations=violations,
        episodes_requested=requested,
        episodes_recorded=len(episodes),
        tasks=tasks,
        suites=suites,
        overall=_overall(tasks),
        latency=times.latency,
        episodes=episodes,
        timing=times.timing,
    )
    if any(ep.variant is not None for ep in log.plan.episodes):  # set only where it applies: absent otherwise
        doc.variants = _variants(log.plan.episodes, episodes)
    if times.delay is not None:
        doc.delay = times.delay
    if any(e.agent_usage is not None for e in episodes):
        doc.agent_usage = agent_usage(episodes)
    return doc


def _variants(planned: list[PlannedEpisode], episodes: list[GradedEpisode]) -> dict[str, dict[str, VariantBlock]]:
    """Instruction sweeps: task -> variant (plan order; the first is the reference) -> the task block of its
    recorded episodes, its ``instruction``, and ``paired``: counts over trials recorded for both it and the
    reference (same seed and initial state): ``pairs``, ``both``, ``reference_only``, ``variant_only``, ``neither``.
    Counts only; tests on them (McNemar) are :mod:`rollbench.analysis`'s."""
    out: dict[str, dict[str | None, str | None]] = {}
    for p in planned:
        out.setdefault(p.task, {}).setdefault(p.variant, p.instruction)
    blocks: dict[str, dict[str, VariantBlock]] = {}
    for task, variants in out.items():
        names = list(variants)
        won = {v: {e.trial: e.success for e in episodes if e.task == task and e.variant == v} for v in names}
        ref = won[names[0]]
        blocks[task] = {}
        for v in names:
            trials = sorted(set(ref) & set(won[v]))
            pairs = [(ref[k], won[v][k]) for k in trials]
            block = _task_block([e for e in episodes if e.task == task and e.variant == v])
            paired = Paired(
                reference=str(names[0]),
                pairs=len(pairs),
                both=sum(1 for a, b in pairs if a and b),
                reference_only=sum(1 for a, b in pairs if a and not b),
                variant_only=sum(1 for a, b in pairs if b and not a),
                neither=sum(1 for a, b in pairs if not a and not b),
            )
            blocks[task][str(v)] = VariantBlock(instruction=variants[v] or "", paired=paired, **block.model_dump())
    return blocks


def _overall(tasks: dict[str, TaskBlock]) -> PooledBlock:
    """Pooled count over all episodes and the unweighted mean of per-task success rates, labelled as such."""
    n = sum(t.episodes for t in tasks.values())
    s = sum(t.successes for t in tasks.values())
    rates = [t.success_rate for t in tasks.values() if t.success_rate is not None]
    lo, hi = wilson_interval(s, n)
    faults: dict[str, int] = {}
    for t in tasks.values():
        for fault, k in t.errors_by_fault.items():
            faults[fault] = faults.get(fault, 0) + k
    cov = merge(_block_coverage(t) for t in tasks.values())
    return PooledBlock(
        tasks=len(tasks),
        episodes=n,
        successes=s,
        errors=sum(t.errors for t in tasks.values()),
        errors_by_fault=faults,
        pooled_success_rate=s / n if n else None,
        pooled_ci95_low=lo,
        pooled_ci95_high=hi,
        mean_task_success_rate=sum(rates) / len(rates) if rates else None,
        **coverage_fields(cov),
    )


def _block_coverage(t: TaskBlock) -> ArmCoverage:
    """A task block's coverage counts back as an :class:`ArmCoverage` (for pooling); a block always has them here
    (summarise builds every block with the coverage fields)."""
    return ArmCoverage(
        t.episodes, t.scored or 0, t.successes, dict(t.errors_by_fault), dict(t.excluded or {}),
        t.policy_errors_as_failures or 0,
    )  # fmt: skip


def _sum_usage(blocks: list[EpisodeUsage]) -> UsageTotals:
    """Episode usage summed (``cost_usd`` None unless some episode reports one), with the episode count."""
    costs = [b.cost_usd for b in blocks if b.cost_usd is not None]
    return UsageTotals(
        episodes=len(blocks),
        model_calls=sum(b.model_calls for b in blocks),
        prompt_tokens=sum(b.prompt_tokens for b in blocks),
        completion_tokens=sum(b.completion_tokens for b in blocks),
        total_tokens=sum(b.total_tokens for b in blocks),
        cost_usd=sum(costs) if costs else None,
    )


def agent_usage(episodes: list[GradedEpisode]) -> AgentUsage:
    """``agent_usage``: model calls, tokens and cost summed over the episodes that have a transcript, ``overall``
    and ``by_task``."""
    with_usage = [(e.task, e.agent_usage) for e in episodes if e.agent_usage is not None]
    return AgentUsage(
        overall=_sum_usage([u for _, u in with_usage]),
        by_task={t: _sum_usage([u for task, u in with_usage if task == t]) for t in sorted({t for t, _ in with_usage})},
    )
