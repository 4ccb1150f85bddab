"""Results from graded episode rows: per-task blocks, suites and the pooled overall block, instruction variants,
errors per fault, agent usage and the status with its reasons (the numbers ``grade --json`` reports)."""

from __future__ import annotations

from typing import Any

from rollbench.core.contracts import FAULTS
from rollbench.core.format import printable
from rollbench.core.runlog_model import PlannedEpisode, RunLog
from rollbench.grading.coverage import ArmCoverage, merge, outcome_of, tally
from rollbench.grading.stats import wilson_interval
from rollbench.grading.stopped import split_missing, stop_reason
from rollbench.record.transcript import sum_totals


def episode_fault(meta_row: dict[str, Any]) -> str:
    """An errored episode's fault; ``unclassified`` for runs recorded before ``rollbench/error_fault`` existed."""
    fault = meta_row.get("rollbench/error_fault")
    return fault if fault in FAULTS else "unclassified"


def errors_by_fault(eps: list[dict[str, Any]]) -> dict[str, int]:
    """Errored episodes per fault: every fault of :data:`rollbench.core.contracts.FAULTS` (0 if none), plus ``unclassified``
    when there are any."""
    counts = dict.fromkeys(FAULTS, 0)
    for e in eps:
        if e["termination_reason"] == "error":
            counts[e["error_fault"]] = counts.get(e["error_fault"], 0) + 1
    return counts


def coverage_fields(cov: ArmCoverage) -> dict[str, Any]:
    """A block's coverage-rule fields (:mod:`rollbench.grading.coverage`): ``scored``, ``coverage``, ``excluded``,
    ``policy_errors_as_failures`` and ``scored_success_rate`` with its Wilson interval ``scored_ci95_low/high``."""
    lo, hi = wilson_interval(cov.successes, cov.scored)
    return {
        "scored": cov.scored,
        "coverage": cov.coverage,
        "excluded": dict(cov.excluded),
        "policy_errors_as_failures": cov.policy_errors_as_failures,
        "scored_success_rate": cov.success_rate,
        "scored_ci95_low": lo,
        "scored_ci95_high": hi,
    }


def _task_block(eps: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(eps)
    s = sum(1 for e in eps if e["success"])
    lo, hi = wilson_interval(s, n)
    # lengths and returns are over the episodes that ran: an episode that errored before its first step has none
    ran = [e for e in eps if e["length"] or e["termination_reason"] != "error"]
    k = len(ran)
    lengths = sorted(e["length"] for e in ran)
    reasons: dict[str, int] = {}
    for e in eps:
        reasons[e["termination_reason"]] = reasons.get(e["termination_reason"], 0) + 1
    median = (lengths[(k - 1) // 2] + lengths[k // 2]) / 2 if k else None
    return {
        "episodes": n,
        "successes": s,
        "success_rate": s / n if n else None,
        "ci95_low": lo,
        "ci95_high": hi,
        "episodes_ran": k,
        "mean_length": sum(lengths) / k if k else None,
        "median_length": median,
        # null when an episode's return is not a number (grade names it as a violation)
        "mean_return": sum(e["return"] for e in ran) / k if k and all(e["return"] is not None for e in ran) else None,
        "errors": reasons.get("error", 0),
        "errors_by_fault": errors_by_fault(eps),
        "success_at_reset": sum(1 for e in eps if e["success_at_reset"]),
        "termination_reasons": dict(sorted(reasons.items())),
        **coverage_fields(tally([outcome_of(e) for e in eps])),
    }


def summarise(
    log: RunLog,
    episodes: list[dict[str, Any]],
    requested: int,
    missing: list[int],
    violations: list[str],
    latency: dict[str, Any],
    ungraded: bool = False,
) -> dict[str, Any]:
    """The grade document from graded ``episodes``; ``missing``: the planned episodes not among them (not
    recorded, or with ``ungraded`` some recorded but without readable step rows, named in ``violations``)."""
    task_names = [t.name for t in log.plan.tasks]
    tasks = {t: _task_block([e for e in episodes if e["task"] == t]) for t in task_names}
    suites = {name: _overall({t: tasks[t] for t in members}) for name, members in log.plan.suites.items()}
    errored = [e for e in episodes if e["termination_reason"] == "error"]
    reasons: list[str] = []
    missing, not_needed = split_missing(missing, log)  # a sequential arm stopped by its rule needs no more
    if stopped := stop_reason(log, len(not_needed)):
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
            f"episode {e['episode_index']} ({printable(e['task'])}, seed {e['seed']}) ended in error "
            f"({e['error_fault']} fault): {printable(e['error'])}"  # recorded text: one line, no control characters
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
        if e["success_at_reset"]:
            reasons.append(f"episode {e['episode_index']} was already successful at reset (not counted as success)")
        if e["render_failure"]:
            reasons.append(f"episode {e['episode_index']} has a render failure: {e['render_failure']}")
    reasons.extend(violations)
    completed = len(episodes) - len(errored)
    if completed == 0:
        status = "FAILED"
    elif missing or errored or violations:
        status = "PARTIAL"
    else:
        status = "OK"
    if status == "FAILED" and not reasons:
        reasons.append("no episode was recorded")
    result = {
        "status": status,
        "reasons": reasons,
        "violations": violations,
        "episodes_requested": requested,
        "episodes_recorded": len(episodes),
        "tasks": tasks,
        "suites": suites,
        "overall": _overall(tasks),
        "latency": latency,
        "episodes": episodes,
    }
    if any(ep.variant is not None for ep in log.plan.episodes):
        result["variants"] = _variants(log.plan.episodes, episodes)
    return result


def _variants(planned: list[PlannedEpisode], episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Instruction sweeps: task -> variant (plan order; the first is the reference) -> the task block of its
    recorded episodes, its ``instruction``, and ``paired``: counts over trials recorded for both it and the
    reference (same seed and initial state): ``pairs``, ``both``, ``reference_only``, ``variant_only``, ``neither``.
    Counts only; tests on them (McNemar) are :mod:`rollbench.analysis`'s."""
    out: dict[str, Any] = {}
    for p in planned:
        out.setdefault(p.task, {}).setdefault(p.variant, p.instruction)
    blocks: dict[str, Any] = {}
    for task, variants in out.items():
        names = list(variants)
        won = {
            v: {e["trial"]: e["success"] for e in episodes if e["task"] == task and e["variant"] == v} for v in names
        }
        ref = won[names[0]]
        blocks[task] = {}
        for v in names:
            trials = sorted(set(ref) & set(won[v]))
            pairs = [(ref[k], won[v][k]) for k in trials]
            blocks[task][v] = {
                "instruction": variants[v],
                **_task_block([e for e in episodes if e["task"] == task and e["variant"] == v]),
                "paired": {
                    "reference": names[0],
                    "pairs": len(pairs),
                    "both": sum(1 for a, b in pairs if a and b),
                    "reference_only": sum(1 for a, b in pairs if a and not b),
                    "variant_only": sum(1 for a, b in pairs if b and not a),
                    "neither": sum(1 for a, b in pairs if not a and not b),
                },
            }
    return blocks


def _overall(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pooled count over all episodes and the unweighted mean of per-task success rates, labelled as such."""
    n = sum(t["episodes"] for t in tasks.values())
    s = sum(t["successes"] for t in tasks.values())
    rates = [t["success_rate"] for t in tasks.values() if t["success_rate"] is not None]
    lo, hi = wilson_interval(s, n)
    faults: dict[str, int] = {}
    for t in tasks.values():
        for fault, k in t["errors_by_fault"].items():
            faults[fault] = faults.get(fault, 0) + k
    cov = merge(_block_coverage(t) for t in tasks.values())
    return {
        "tasks": len(tasks),
        "episodes": n,
        "successes": s,
        "errors": sum(t["errors"] for t in tasks.values()),
        "errors_by_fault": faults,
        "pooled_success_rate": s / n if n else None,
        "pooled_ci95_low": lo,
        "pooled_ci95_high": hi,
        "mean_task_success_rate": sum(rates) / len(rates) if rates else None,
        **coverage_fields(cov),
    }


def _block_coverage(t: dict[str, Any]) -> ArmCoverage:
    """A task block's coverage counts back as an :class:`ArmCoverage` (for pooling)."""
    return ArmCoverage(
        t["episodes"], t["scored"], t["successes"], dict(t["errors_by_fault"]), dict(t["excluded"]),
        t["policy_errors_as_failures"],
    )  # fmt: skip


def agent_usage(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """``agent_usage``: model calls, tokens and cost summed over the episodes that have a transcript, ``overall``
    and ``by_task``."""
    with_usage = [e for e in episodes if "agent_usage" in e]
    return {
        "overall": sum_totals([e["agent_usage"] for e in with_usage]),
        "by_task": {
            t: sum_totals([e["agent_usage"] for e in with_usage if e["task"] == t])
            for t in sorted({e["task"] for e in with_usage})
        },
    }
