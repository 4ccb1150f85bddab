"""``rollbench compare``: compare runs (policies) on paired episodes.

Two runs are compared only under the same benchmark protocol (horizon, success rule, success hold, settle steps,
image size, fast render, latency: :mod:`rollbench.grading.protocol`); runs that differ there are refused, paired or
unpaired. Two runs are *paired* when they ran the same episodes: the same tasks, and per task the same (seed,
initial state, instruction) set. rollbench plans episode k of a task with seed ``seed + k`` and initial
state k, so two runs of the same ``--env --episodes --seed --max-steps`` are paired by construction. Episode i of A is
paired with the episode of B with the same (task, seed, initial state, instruction).

Errors follow the coverage rule (:mod:`rollbench.grading.coverage`, docs/analysis.md "Errors and coverage"): a
policy-fault error is a failure (unless ``exclude_policy_errors``), an environment- or infrastructure-fault error is
left out, and a pair with such an error on either side is not a pair: the tests see only the pairs whose both
episodes are scored. Each block counts each arm's attempted, scored and errored episodes by fault, and its
``verdict`` is ``insufficient_coverage`` when either arm scored less than ``min_coverage`` of its attempts.

Per task and pooled over tasks: both success rates, the difference ``rate(B) - rate(A)`` with a paired bootstrap 95%
percentile interval (pooled: resampled within each task), and the exact McNemar test on the discordant pairs
(:mod:`rollbench.grading.stats`); per-task p-values are Holm-corrected across the tasks of the pair. With more than
two runs every pair is compared, the pooled p-values are Holm-corrected across the pairs, and the runs are ranked by
pooled success rate. ``paired=False`` (``--unpaired``) uses Fisher's exact test and an unpaired bootstrap instead, and
the document says so (``"statistics": "unpaired"``). ``report`` uses :func:`compare_where_paired` instead, which
decides pairing per pair of runs and skips pairs with no task in common.

Unit of independence (``unit`` in each paired block): the McNemar test and the paired bootstrap treat each *pair* of
episodes (A's and B's episode of one task, seed, initial state and instruction) as one independent draw. When a
task's episodes repeat an initial state, the unit is the *scene* (task x initial state) instead: a sign-flip test over
the scene-level differences and a bootstrap resampling whole scenes (:mod:`rollbench.grading.scenes`; ``scenes``
counts them; pooled, a task without repeats contributes each pair as its own scene). Fisher's test and the unpaired
bootstrap treat each episode as one independent draw.
"""

from __future__ import annotations

import itertools
from typing import Any

from rollbench.analysis.compare_blocks import (
    cat,
    concat,
    decide,
    paired_block,
    rate,
    scored,
    unpaired_block,
    with_coverage,
)
from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.analysis.sources import RunData
from rollbench.core.contracts import ConfigError
from rollbench.grading.coverage import (
    DEFAULT_RULE,
    CoverageRule,
    Pairs,
    merge,
    outcome_of,
    pair,
    tally,
)
from rollbench.grading.protocol import protocol_problem
from rollbench.grading.scenes import (
    repeats_scenes,
)
from rollbench.grading.stats import (
    holm,
)

EpisodeKey = tuple[Any, Any, Any]  # (seed, initial_state, instruction) within a task


def _compact(values: list[Any]) -> str:
    """[0, 1, 2, 3, 7] -> '0-3, 7' (None shown as 'none'); at most 8 parts."""
    ints = sorted(v for v in values if isinstance(v, int))
    parts: list[str] = []
    i = 0
    while i < len(ints):
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        parts.append(str(ints[i]) if i == j else f"{ints[i]}-{ints[j]}")
        i = j + 1
    if any(v is None for v in values):
        parts.append("none")
    return ", ".join(parts[:8]) + (" ..." if len(parts) > 8 else "")


def _by_task(run: RunData) -> dict[str, dict[EpisodeKey, AnalysisEpisode]]:
    out: dict[str, dict[EpisodeKey, AnalysisEpisode]] = {}
    for ep in run.episodes:
        key = (ep.seed, ep.initial_state, ep.instruction)
        task = out.setdefault(ep.task, {})
        if key in task:
            raise ConfigError(
                f"run {run.source} has two episodes of task {ep.task} with seed {key[0]}, initial state "
                f"{key[1]} and instruction {key[2]!r} (episodes {task[key].episode_index} and "
                f"{ep.episode_index}); pairing needs one"
            )
        task[key] = ep
    return out


def pairing_problem(a: RunData, b: RunData, *, common_tasks_only: bool = False) -> str | None:
    """Why runs ``a`` and ``b`` are not paired, naming the field (tasks, seeds, initial states, instructions), or
    None when they are (their protocols are checked apart, :func:`comparable_problem`). ``common_tasks_only``: judge only the tasks both ran (``report``
    compares those; ``compare`` needs the same tasks)."""
    ta, tb = _by_task(a), _by_task(b)
    if common_tasks_only:
        common = set(ta) & set(tb)
        ta = {t: v for t, v in ta.items() if t in common}
        tb = {t: v for t, v in tb.items() if t in common}
    if set(ta) != set(tb):
        return (
            f"tasks differ ({a.key}: {', '.join(sorted(ta))}; {b.key}: {', '.join(sorted(tb))})"
            if len(ta) + len(tb) < 12
            else f"tasks differ (only in {a.key}: {sorted(set(ta) - set(tb))}; only in {b.key}: {sorted(set(tb) - set(ta))})"
        )
    for task in sorted(ta):
        sa, sb = {k[0] for k in ta[task]}, {k[0] for k in tb[task]}
        if sa != sb and (sa < sb or sb < sa):  # the same seeds, one run has more: not a seed mismatch (issue 42)
            return (
                f"episode counts differ (task {task}: {a.key} has {len(sa)} episodes, {b.key} {len(sb)}; the first "
                f"{min(len(sa), len(sb))} share their seeds): evaluate both with the same --episodes"
            )
        if sa != sb:
            return f"seeds differ (task {task}: {a.key} has {_compact(list(sa))}, {b.key} has {_compact(list(sb))})"
        if {k[:2] for k in ta[task]} != {k[:2] for k in tb[task]}:
            ia = [k[1] for k in sorted(ta[task], key=str)]
            ib = [k[1] for k in sorted(tb[task], key=str)]
            return f"initial states differ (task {task}: {a.key} has {_compact(ia)}, {b.key} has {_compact(ib)})"
        if set(ta[task]) != set(tb[task]):
            only_a = sorted({str(k[2]) for k in set(ta[task]) - set(tb[task])})
            only_b = sorted({str(k[2]) for k in set(tb[task]) - set(ta[task])})
            return (
                f"instructions differ (task {task}: only {a.key} has {'; '.join(map(repr, only_a[:3]))}, only "
                f"{b.key} has {'; '.join(map(repr, only_b[:3]))})"
            )
    return None


def comparable_problem(a: RunData, b: RunData) -> str | None:
    """Why runs ``a`` and ``b`` measure different things on a task both ran: the first protocol field that differs
    (:func:`rollbench.grading.protocol.protocol_problem`: horizon, success rule, success hold, ...), or None. Neither
    paired nor unpaired statistics compare such runs."""
    common = sorted({e.task for e in a.episodes} & {e.task for e in b.episodes})
    return protocol_problem(a.key, a.log, b.key, b.log, common)


def not_comparable(a: RunData, b: RunData, problem: str) -> ConfigError:
    """The refusal of two runs whose protocols differ (``problem`` names the field and both values)."""
    return ConfigError(
        f"runs {a.source} and {b.source} ran different protocols: {problem}; they measure different things, so "
        "rollbench compares them neither paired nor unpaired (evaluate both with the same settings)"
    )


def compare_pair(
    a: RunData,
    b: RunData,
    *,
    paired: bool = True,
    seed: int = 0,
    n_resamples: int = 10_000,
    common_tasks_only: bool = False,
    rule: CoverageRule = DEFAULT_RULE,
) -> dict[str, Any]:
    """Compare run ``b`` with run ``a`` (differences are B minus A) on the tasks both ran; see the module docstring.

    Returns ``{"a", "b", "model_a", "model_b", "statistics", "tasks": [per task], "pooled", "tasks_not_compared"}``;
    each block has both rates with Wilson intervals (over the pairs compared; unpaired: over each arm's scored
    episodes), ``difference`` with ``diff_ci95_low/high``, ``p_value`` (and per task ``p_holm``), ``coverage``
    (each arm's :class:`rollbench.grading.coverage.ArmCoverage` counts), ``error_notes``, ``coverage_gate`` (None or
    why no verdict) and ``verdict`` (a code of :data:`rollbench.grading.coverage.VERDICT_LABELS`; per task on
    ``p_holm``); paired blocks also ``pairs_dropped`` and ``pairs_dropped_by_reason``. Raises ConfigError when
    ``paired`` and the runs are not paired (naming the field; with ``common_tasks_only`` judged on their common
    tasks only).
    """
    if different := comparable_problem(a, b):
        raise not_comparable(a, b, different)
    if paired:
        problem = pairing_problem(a, b, common_tasks_only=common_tasks_only)
        if problem:
            raise ConfigError(
                f"runs {a.source} and {b.source} are not paired: {problem}; pass --unpaired for unpaired statistics"
            )
    ta, tb = _by_task(a), _by_task(b)
    common = sorted(set(ta) & set(tb))
    rows: list[dict[str, Any]] = []
    all_pairs: list[Pairs] = []
    all_a, all_b, strata_a, strata_b, covs_a, covs_b = [], [], [], [], [], []
    scene_labels: list[Any] = []
    for task in common:
        keys = sorted(ta[task], key=str)
        oa = [outcome_of(ta[task][k]) for k in keys]
        ob = [outcome_of(tb[task][k]) for k in (keys if paired else sorted(tb[task], key=str))]
        ca, cb = tally(oa, rule), tally(ob, rule)
        if paired:
            pairs = pair(oa, ob, rule)
            by_scene = repeats_scenes([k[1] for k in keys])  # a repeated initial state: the scene is the unit
            scenes = [(task, keys[i][1]) if by_scene else (task, "pair", i) for i in pairs.positions]
            block = paired_block(pairs, None, seed, n_resamples, scenes if by_scene else None)
            all_pairs.append(pairs)
            scene_labels += scenes if by_scene else [None] * pairs.n
            xa, xb = pairs.a, pairs.b
        else:
            xa, xb = scored(oa, rule), scored(ob, rule)
            block = unpaired_block(xa, xb, None, None, seed, n_resamples)
        rows.append({"task": task, **with_coverage(block, ca, cb, rule)})
        all_a.append(xa)
        all_b.append(xb)
        covs_a.append(ca)
        covs_b.append(cb)
        strata_a += [task] * xa.size
        strata_b += [task] * xb.size
    for row, p in zip(rows, holm([r["p_value"] for r in rows]), strict=True):
        row["p_holm"] = p
        decide(row, "p_holm")
    any_scene = any(v is not None for v in scene_labels)
    pooled_scenes = [v if v is not None else ("pair", i) for i, v in enumerate(scene_labels)] if any_scene else None
    pooled_block = (
        paired_block(concat(all_pairs), strata_a, seed, n_resamples, pooled_scenes)
        if paired
        else unpaired_block(cat(all_a), cat(all_b), strata_a, strata_b, seed, n_resamples)
    )
    return {
        "a": a.key,
        "b": b.key,
        "model_a": a.model,
        "model_b": b.model,
        "statistics": "paired" if paired else "unpaired",
        "tasks": rows,
        "pooled": with_coverage(pooled_block, merge(covs_a), merge(covs_b), rule),
        "tasks_not_compared": sorted(set(ta) ^ set(tb)),
    }


def compare_runs(
    runs: list[RunData],
    *,
    paired: bool = True,
    seed: int = 0,
    n_resamples: int = 10_000,
    rule: CoverageRule = DEFAULT_RULE,
) -> dict[str, Any]:
    """Compare every pair of ``runs`` (2 or more) and rank them by pooled success rate.

    Returns ``{"statistics", "bootstrap": {seed, n_resamples, confidence}, "coverage_rule", "runs", "comparisons",
    "ranking"}``; with more than two runs each comparison's pooled block also has ``p_holm_pairs`` (Holm across
    pairs), on which its verdict is judged. ``rule``: the coverage rule (:mod:`rollbench.grading.coverage`).
    Raises ConfigError for fewer than two runs or, when ``paired``, any pair that is not paired (checked for all
    pairs before anything is computed).
    """
    if len(runs) < 2:
        raise ConfigError(f"compare needs at least two runs, got {len(runs)}")
    for a, b in itertools.combinations(runs, 2):  # no common task: no statistic, paired or not (issue 30, item 21)
        ta, tb = set(_by_task(a)), set(_by_task(b))
        if not ta & tb:
            raise ConfigError(
                f"runs {a.source} and {b.source} share no task ({a.source}: {', '.join(sorted(ta)) or 'none'}; "
                f"{b.source}: {', '.join(sorted(tb)) or 'none'}): there is nothing to compare, paired or unpaired"
            )
    for a, b in itertools.combinations(runs, 2):  # before any statistic: never a verdict across protocols
        if different := comparable_problem(a, b):
            raise not_comparable(a, b, different)
    if paired:
        for a, b in itertools.combinations(runs, 2):
            problem = pairing_problem(a, b)
            if problem:
                raise ConfigError(
                    f"runs {a.source} and {b.source} are not paired: {problem}; pass --unpaired for unpaired statistics"
                )
    comparisons = [
        compare_pair(a, b, paired=paired, seed=seed, n_resamples=n_resamples, rule=rule)
        for a, b in itertools.combinations(runs, 2)
    ]
    _holm_across_pairs(comparisons)
    return {
        "statistics": "paired" if paired else "unpaired",
        "bootstrap": {"seed": seed, "n_resamples": n_resamples, "confidence": 0.95},
        "coverage_rule": rule.to_dict(),
        "runs": [{"run": r.key, "path": r.source, "model": r.model, "policy": r.policy, **r.marks()} for r in runs],
        "comparisons": comparisons,
        "ranking": _ranking(runs, rule),
    }


def _holm_across_pairs(comparisons: list[dict[str, Any]]) -> None:
    """With more than one comparison, set each one's ``pooled.p_holm_pairs``: Holm across the comparisons made, and
    judge its pooled verdict on it."""
    if len(comparisons) > 1:
        for c, p in zip(comparisons, holm([c["pooled"]["p_value"] for c in comparisons]), strict=True):
            c["pooled"]["p_holm_pairs"] = p
            decide(c["pooled"], "p_holm_pairs")


def _ranking(runs: list[RunData], rule: CoverageRule) -> list[dict[str, Any]]:
    """Runs by pooled success rate over their scored episodes (``episodes`` = scored), with ``attempted``."""
    totals = []
    for r in runs:
        cov = tally([outcome_of(e) for e in r.episodes], rule)
        totals.append({"run": r.key, "model": r.model, **rate(cov.successes, cov.scored), "attempted": cov.attempted})
    ranking = sorted(totals, key=lambda t: -(t["success_rate"] or 0.0))
    for i, t in enumerate(ranking):  # equal rates share a rank (1, 2, 2, 4)
        same = i and ranking[i - 1]["success_rate"] == t["success_rate"]
        t["rank"] = ranking[i - 1]["rank"] if same else i + 1
    return ranking


def compare_where_paired(
    runs: list[RunData], *, seed: int = 0, n_resamples: int = 10_000, rule: CoverageRule = DEFAULT_RULE
) -> dict[str, Any]:
    """``report``'s comparison: every pair of ``runs`` that shares a task, each decided on its own.

    A pair is compared on the tasks both ran. A pair whose protocols differ there (:func:`comparable_problem`) is
    not compared (``not_compared``, the reason naming the field). Where their episodes pair (same task, seed,
    initial state and instruction per episode) the pair gets paired statistics (exact McNemar, paired
    bootstrap); otherwise unpaired ones (Fisher's exact test, unpaired bootstrap) and ``unpaired_reason`` says why.
    So one odd run (e.g. a LIBERO run next to MetaWorld runs) changes only its own pairs. A pair with no task in
    common is not compared: it is listed in ``not_compared`` (``{"a", "b", "reason"}``). With more than one
    comparison, ``pooled.p_holm_pairs`` is Holm across the comparisons made. ``statistics`` is ``paired``,
    ``unpaired`` or ``mixed``; ``unpaired_pairs`` counts the unpaired comparisons. None with fewer than two runs.
    """
    comparisons: list[dict[str, Any]] = []
    not_compared: list[dict[str, str]] = []
    for a, b in itertools.combinations(runs, 2):
        if not {e.task for e in a.episodes} & {e.task for e in b.episodes}:
            not_compared.append({"a": a.key, "b": b.key, "reason": "no task in common"})
            continue
        if different := comparable_problem(a, b):  # different protocols: no statistic, paired or not
            not_compared.append({"a": a.key, "b": b.key, "reason": f"different protocols: {different}"})
            continue
        problem = pairing_problem(a, b, common_tasks_only=True)
        c = compare_pair(
            a, b, paired=problem is None, seed=seed, n_resamples=n_resamples, common_tasks_only=True, rule=rule
        )
        if problem:
            c["unpaired_reason"] = problem
        comparisons.append(c)
    _holm_across_pairs(comparisons)
    kinds = {c["statistics"] for c in comparisons}
    return {
        "statistics": kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "none"),
        "unpaired_pairs": sum(1 for c in comparisons if c["statistics"] == "unpaired"),
        "bootstrap": {"seed": seed, "n_resamples": n_resamples, "confidence": 0.95},
        "coverage_rule": rule.to_dict(),
        "runs": [{"run": r.key, "path": r.source, "model": r.model, "policy": r.policy, **r.marks()} for r in runs],
        "comparisons": comparisons,
        "not_compared": not_compared,
        "ranking": _ranking(runs, rule),
    }
