"""Robustness studies: every perturbed episode against its matched control, per perturbation category and level.

Input: a run's run.json ``plan.episodes`` carry a
``perturbation`` (``category``, ``level``, ``control``, ``detail``; recorded per episode from the env family's
:class:`~rollbench.core.perturbation.Perturbation`, e.g. LIBERO-PRO's folder rule in :mod:`rollbench.envs.libero.pro`),
and its graded episodes (success, errors) from :func:`rollbench.grading.grade.grade`. Nothing is re-derived
from task names: a run recorded by any family that fills ``perturbation`` (LIBERO-Plus too) is read the same way.

Pairs: a perturbed episode of trial ``k`` is paired with the episode of trial ``k`` of its ``control`` task in the
same run (same planned seed and initial-state index: the plan gives trial ``k`` seed ``seed + k`` and initial state
``k``). Errors follow the coverage rule (:mod:`rollbench.grading.coverage`, docs/analysis.md "Errors and
coverage"): an environment- or infrastructure-fault error on either side means the trial is not a pair (counted in
``dropped_errors``, per side and fault in each block's ``pairs_dropped_by_reason``); a policy error is a failure.
Each block has both sides' ``coverage`` counts, ``error_notes`` and a ``verdict`` (``b_better``: the perturbed
episodes succeed more; ``a_better``: the control ones), judged on ``p_holm`` and withheld as
``insufficient_coverage`` below 95% coverage on either side. A perturbed episode whose control task is not in the
run, or names none, is counted in ``unpaired``. The unit of independence (each block's ``unit``) is the pair, or,
when a block's pairs repeat a scene (control task x initial state: more trials than stored initial states), the
scene: a sign-flip test over the scene-level differences replaces McNemar's ``p_value`` and the bootstrap resamples
whole scenes (:mod:`rollbench.grading.scenes`; ``scenes`` counts them, ``test`` names the test).

Per category (and per ``(category, level)`` for graded ones), over its pairs: ``control`` and ``perturbed``
successes and rates (95% Wilson intervals), the paired ``difference`` = perturbed rate - control rate with its 95%
paired bootstrap percentile interval stratified by control task (10,000 resamples, PCG64 seed 0: the same numbers
every time), the two-sided exact McNemar test (:func:`rollbench.grading.stats.mcnemar_exact`: ``control_only`` /
``perturbed_only`` are the discordant pairs), and Holm's adjusted p-value over the categories (per level: over the
levels of that category).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.plan import order_stream
from rollbench.core.recorded_order import order_problem
from rollbench.core.runlog_model import PerturbationRecord, PlannedEpisode, RunLog, TrialOrder
from rollbench.grading.coverage import (
    DEFAULT_RULE,
    CoverageRule,
    EpisodeFacts,
    coverage_gate,
    outcome_of,
    pair,
    score,
    tally,
    verdict,
)
from rollbench.grading.protocol import protocol_problem
from rollbench.grading.scenes import cluster_bootstrap_difference, repeats_scenes, scene_differences, sign_flip_test
from rollbench.grading.stats import bootstrap_difference, holm, mcnemar_exact, wilson_interval

N_RESAMPLES = 10_000
SEED = 0


def perturbations_of(planned: Sequence[PlannedEpisode]) -> dict[int, PerturbationRecord]:
    """episode_index -> the planned episode's ``perturbation`` record (run.json ``plan.episodes``), perturbed only."""
    return {p.episode_index: p.perturbation for p in planned if p.perturbation is not None}


def _rate(successes: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(successes, n) if n else (None, None)
    return {"successes": successes, "rate": successes / n if n else None, "ci95_low": low, "ci95_high": high}


def _block(rows: list[tuple[Any, ...]], rule: CoverageRule = DEFAULT_RULE) -> dict[str, Any]:
    """Statistics of ``(control outcome, perturbed outcome, control task, initial state)`` trials under the coverage
    rule (:mod:`rollbench.grading.coverage`): a trial with an environment or infrastructure error on either side is
    not a pair; each side's coverage; the verdict (``b_better``: the perturbed arm better) gated on coverage. When the
    pairs repeat a scene (control task x initial state), the unit is the scene (``unit``; module docstring)."""
    control, perturbed = [r[0] for r in rows], [r[1] for r in rows]
    kept = pair(control, perturbed, rule)
    c, q = kept.a, kept.b
    n = kept.n
    strata = [rows[i][2] for i in kept.positions]
    scenes = [(rows[i][2], rows[i][3] if rows[i][3] is not None else ("pair", i)) for i in kept.positions]
    if repeats_scenes(scenes):
        boot = cluster_bootstrap_difference(c, q, scenes, strata=strata, n_resamples=N_RESAMPLES, seed=SEED)
        flip = sign_flip_test(scene_differences(c, q, scenes).diffs, seed=SEED)
        p, unit = (
            flip.p_value,
            {"unit": "scene", "scenes": flip.scenes, "test": f"sign-flip over scenes, {flip.method}"},
        )
    else:
        boot = bootstrap_difference(c, q, paired=True, strata=strata, n_resamples=N_RESAMPLES, seed=SEED)
        p, unit = None, {"unit": "pair", "scenes": None, "test": "exact McNemar (two-sided)"}
    test = mcnemar_exact(c, q)
    p = test.p_value if p is None else p
    cov_c, cov_q = tally(control, rule), tally(perturbed, rule)
    gate = coverage_gate(cov_c, cov_q, rule, names=("control", "perturbed"))
    return {
        "pairs": n,
        **unit,
        "control": _rate(int(c.sum()), n),
        "perturbed": _rate(int(q.sum()), n),
        "difference": boot.difference,
        "difference_ci95": [boot.low, boot.high],
        "control_only": test.a_only,
        "perturbed_only": test.b_only,
        "both": test.both,
        "neither": test.neither,
        "p_value": p,
        "pairs_dropped_by_reason": kept.dropped_by_reason(),
        "coverage": {"control": cov_c.to_dict(), "perturbed": cov_q.to_dict()},
        "error_notes": cov_c.notes("control") + cov_q.notes("perturbed"),
        "coverage_gate": gate,
        "verdict": verdict(p, boot.difference, gate=gate),
    }


def check_trial_order(planned: Sequence[PlannedEpisode], order: TrialOrder | None) -> str:
    """How the study's trials were ordered: ``"plan order"``, or for a shuffled plan (run.json ``plan.trial_order``)
    the seed, after checking that every task's planned trials are the ones its recorded permutation gives (a perturbed
    task draws its control's: :func:`rollbench.core.plan.order_stream`, one permutation per pair of tasks).
    Raises ConfigError naming the first planned trial that differs (an edited plan), a task without population or
    one smaller than its planned trials."""
    if order is None:
        return "plan order"
    by_task: dict[str, list[PlannedEpisode]] = defaultdict(list)
    for p in planned:
        by_task[p.task].append(p)
    for task, eps in by_task.items():
        control = eps[0].perturbation.control if eps[0].perturbation is not None else None
        if why := order_problem(order, task, order_stream(task, control), [p.trial for p in eps]):
            raise ConfigError(f"run.json: {why}")
    return f"shuffled (seed {order.seed}; each perturbed task shares its control's permutation)"


def robustness_study(
    planned: Sequence[PlannedEpisode], episodes: Sequence[EpisodeFacts], rule: CoverageRule = DEFAULT_RULE
) -> dict[str, Any] | None:
    """The robustness table of one run (module docstring) from its planned episodes (run.json ``plan.episodes``)
    and its recorded episodes (grade's, or the analyses' :class:`~rollbench.grading.coverage.EpisodeFacts`), errors under the coverage ``rule``, or None when no episode of it is perturbed.

    Returns ``{"categories": {category: block + "p_holm", "levels": [{level, ...block, p_holm}], "details":
    [...]}}, "unpaired": n, "dropped_errors": n (trials that are not pairs under the coverage rule), ... "episodes": {"perturbed": n, "control": n}, "method": str}``;
    categories in first-planned order, levels ascending.
    """
    perts = perturbations_of(planned)
    if not perts:
        return None
    by_key = {(e.task, e.trial): e for e in episodes if type(e.trial) is int}  # a record without one pairs with nothing
    pairs: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    unpaired = dropped = 0
    controls: set[tuple[str, int]] = set()
    for e in episodes:
        p = perts.get(int(e.episode_index))
        if p is None:
            continue
        key = (p.control, e.trial)
        if p.control is None or key not in by_key or type(key[1]) is not int:
            unpaired += 1
            continue
        controls.add((str(key[0]), key[1]))
        oc, op = outcome_of(by_key[key]), outcome_of(e)
        dropped += score(oc, rule) is None or score(op, rule) is None  # not a pair under the coverage rule
        init = by_key[key].initial_state
        pairs[p.category].append((oc, op, p.control, init, p.level, p.detail))
    categories: dict[str, Any] = {}
    for cat, rows in pairs.items():
        block = _block([r[:4] for r in rows], rule)
        levels = sorted({r[4] for r in rows if r[4] is not None})
        block["levels"] = [{"level": lv, **_block([r[:4] for r in rows if r[4] == lv], rule)} for lv in levels]
        for lv, adj in zip(block["levels"], holm([b["p_value"] for b in block["levels"]]), strict=True):
            lv["p_holm"] = adj
            lv["verdict"] = verdict(adj, lv["difference"], gate=lv["coverage_gate"])
        block["details"] = sorted({r[5] for r in rows})
        categories[cat] = block
    for cat, adj in zip(categories, holm([b["p_value"] for b in categories.values()]), strict=True):
        categories[cat]["p_holm"] = adj
        categories[cat]["verdict"] = verdict(adj, categories[cat]["difference"], gate=categories[cat]["coverage_gate"])
    return {
        "coverage_rule": rule.to_dict(),
        "categories": categories,
        "unpaired": unpaired,
        "dropped_errors": dropped,
        "episodes": {
            "perturbed": sum(int(e.episode_index) in perts for e in episodes),
            "control": len(controls),
        },
        "method": (
            "pairs = perturbed episode of trial k and its control task's episode of trial k (same seed and initial "
            f"state index); difference = perturbed - control, 95% paired bootstrap ({N_RESAMPLES} resamples, seed "
            f"{SEED}, stratified by control task); exact McNemar two-sided; when the pairs repeat a scene (control "
            "task x initial state): a bootstrap resampling scenes and a sign-flip test over scene differences "
            "(block unit: scene); Holm over categories (levels: within their category)"
        ),
    }


def check_control_protocols(log: RunLog) -> None:
    """ConfigError when a perturbed task of ``log``'s plan and its control task differ in their protocol (horizon,
    success rule, ...: :func:`rollbench.grading.protocol.protocol_problem`): the perturbation must be the only
    difference between a pair's two episodes."""
    pairs = sorted(
        {(p.perturbation.control, p.task) for p in log.plan.episodes if p.perturbation and p.perturbation.control}
    )
    if problem := protocol_problem("control", log, "perturbed", log, pairs):
        raise ConfigError(
            f"a perturbed task and its control ran different protocols: {problem}; the perturbation must be the only "
            "difference (evaluate both with the same settings)"
        )


def ordered_study(
    log: RunLog | None, episodes: Sequence[EpisodeFacts], rule: CoverageRule = DEFAULT_RULE
) -> dict[str, Any] | None:
    """:func:`robustness_study` of a run's recorded ``episodes`` under its run log's plan (run.json; None for an
    export), with the study's ``trial_order`` (:func:`check_trial_order`) when there is a plan; None without
    perturbed episodes. ConfigError: an edited shuffled plan, or a control recorded under another protocol than its
    perturbed task (:func:`check_control_protocols`)."""
    if log is None:
        return robustness_study([], episodes, rule)
    plan = log.plan
    check_control_protocols(log)
    order = check_trial_order(plan.episodes, plan.trial_order)  # ConfigError: an edited shuffled plan
    study = robustness_study(plan.episodes, episodes, rule)
    if study is not None:
        study["trial_order"] = order
    return study


def study_of_run(run_dir: Path, rule: CoverageRule = DEFAULT_RULE) -> dict[str, Any]:
    """:func:`robustness_study` of a run directory (errors under ``rule``): grade's episodes and run.json's planned episodes, both read from
    the files. Raises what :func:`rollbench.grading.grade.grade` raises for a run it cannot read, and ConfigError
    for a run without perturbed episodes."""
    from rollbench.grading.grade import grade
    from rollbench.record.runlog import read_run_log

    result = grade(run_dir)
    log = read_run_log(run_dir)
    study = ordered_study(log, result.episodes, rule)
    if study is None:
        from rollbench.core.contracts import ConfigError

        raise ConfigError(f"{run_dir.name} has no perturbed episodes (run perturbed tasks with `rollbench robustness`)")
    return study
