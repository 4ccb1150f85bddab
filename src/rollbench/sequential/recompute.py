"""``rollbench compare --sequential``: a sequential paired comparison recomputed from its arms' run directories alone.

Each arm of ``rollbench sequential`` is an ordinary run directory whose run.json has a ``sequential`` block
(:class:`rollbench.core.runlog_model.SequentialRecord`: the rule, its parameters, the partner arm, the family of tasks
and, once decided, the decision and the look that made it). From the two arms of a task this module rebuilds the
pairs in plan order (:mod:`rollbench.sequential.pairs`: the plans checked, a shuffled plan's permutation verified,
pairs with an environment or infrastructure error left out, policy errors counted as failures, the coverage gate) and
replays every look of the rule (:func:`rollbench.grading.sequential.run_looks`) on the counted pairs.

The coverage rule of the decisions is the caller's (the user's ``--min-coverage`` / ``--exclude-policy-errors``, else
the defaults), never the arms': the rule an arm records (``sequential.coverage_rule``, the one its study ran under)
only checks its recorded decision and the decision log, and a document whose arms record another rule says so in
``coverage_rule_note`` (hostile round 15, F5).

Refused (ConfigError, one line naming the file and the reason): a run without the block; a block that is malformed or
whose derived values (thresholds, exact errors) are not what its parameters give (edited); arms that do not name each
other, disagree on the design or the family, or whose plans differ; a recorded decision or stopping look that the
episodes do not give (edited or damaged episodes); a damaged run (grade violations, via
:func:`rollbench.analysis.sources.load_runs`); a decision log next to the arms that disagrees with the recomputation.

Suites: per-task decisions and a pooled decision, each at ``alpha_family / (m + 1)``
(:func:`rollbench.grading.sequential.family_alphas`; Bonferroni over the m + 1 tests: the probability of any false
"better" among them is at most ``alpha_family``, whatever their dependence). The pooled test is the same rule with a
budget of ``m x budget`` on the pairs of every task in family order, each task's up to the look that decided it,
computed once every task has decided (None before); it tests the global null (no task has a difference; then every
discordant pair is a fair coin, whichever tasks stopped when). Comparisons recorded before issue 40 (tasks at
``alpha_family / m``, pooled at ``alpha_family``) are recomputed as recorded, and the document says
``"correction": "bonferroni-tasks-only"``: their family-wise error was not bounded by ``alpha_family``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.grade_model import GradedEpisode
from rollbench.core.runlog_model import RunLog, SequentialDesignRecord, SequentialRecord, max_pairs
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule
from rollbench.grading.grade import grade, load_run_log
from rollbench.grading.protocol import protocol_problem
from rollbench.grading.sequential import (
    FINAL,
    Look,
    SequentialDesign,
    design,
    family_alphas,
    run_looks,
)
from rollbench.record.runlog import find_run_dirs, is_locked
from rollbench.sequential.decision_log import LOG_NAME, check_log
from rollbench.sequential.pairs import paired_outcomes

__all__ = ["ARM_FIELDS", "LOG_NAME", "compare_sequential", "design_record", "rule_for"]
ARM_FIELDS = ("policy", "policy_options", "action_noise")  # what may differ between A and B; the rest pairs them
DERIVED = ("theta1", "efficacy_llr", "futility_llr", "type1_error", "futility_error", "power", "fixed_n")


@dataclass(frozen=True)
class RunData:
    """One arm as recorded: its path (``source``), run.json (``log``), grade's episodes and its policy's name."""

    source: str
    log: RunLog
    episodes: list[GradedEpisode]

    @property
    def model(self) -> str:
        """The policy's name, with its action noise when it has one (arms often differ only by it)."""
        name = self.log.plan.policy.name
        noise = self.log.spec.action_noise
        return f"{name} (action noise {noise:g})" if noise else name


def load_arm(run_dir: Path) -> RunData:
    """An arm's run log and graded episodes; ConfigError when it is still being recorded, unfinished or damaged."""
    log = load_run_log(run_dir)
    if log.status == "RUNNING":
        why = "being recorded" if is_locked(run_dir) else "not finished (its writer stopped)"
        raise ConfigError(f"{run_dir} is {why}: resume it with the same rollbench sequential command")
    result = grade(run_dir, check_videos=False)
    if result.violations:
        n = len(result.violations)
        raise ConfigError(
            f"{run_dir} is damaged ({n} violation(s) by rollbench grade: {result.violations[0]}); it is not "
            "analysed. Run `rollbench grade` on it for every problem"
        )
    return RunData(str(run_dir), log, result.episodes)


def load_arms(paths: list[Path]) -> list[RunData]:
    """The run directories at or below ``paths`` (as ``rollbench runs`` finds them), each read once."""
    seen: set[Path] = set()
    arms = []
    for path in paths:
        if not Path(path).is_dir():
            raise ConfigError(f"{path} is not a directory; give run directories or the directory holding them")
        dirs = find_run_dirs([Path(path)])
        if not dirs:
            raise ConfigError(f"{path} holds no rollbench run (no run.json)")
        for d in dirs:
            if d.resolve() not in seen:
                seen.add(d.resolve())
                arms.append(load_arm(d))
    return arms


@lru_cache(maxsize=16)
def rule_for(
    delta: float,
    p_a: float,
    alpha: float,
    beta: float,
    budget: int | None,
    discordant: float | None,
    look_every: int = 1,
    futility: bool = True,
) -> SequentialDesign:
    """:func:`rollbench.grading.sequential.design`, cached (it is pure and costs up to seconds)."""
    return design(
        delta, p_a=p_a, alpha=alpha, beta=beta, budget=budget, discordant=discordant, look_every=look_every,
        futility=futility,
    )  # fmt: skip


def rule_of(d: SequentialDesignRecord) -> SequentialDesign:
    """The rule a recorded design (SequentialDesignRecord) gives; one recorded before issue 40 (``futility`` absent)
    had its power computed with looks after every pair."""
    if d.futility is None:
        return rule_for(d.delta, d.p_a, d.alpha, d.beta, d.budget, d.discordant)
    return rule_for(d.delta, d.p_a, d.alpha, d.beta, d.budget, d.discordant, d.look_every, d.futility)


def design_record(rule: SequentialDesign, look_every: int) -> dict[str, Any]:
    """The ``design`` block of run.json's ``sequential`` (a SequentialDesignRecord's JSON) for ``rule``, looking
    every ``look_every`` pairs (a pooled test recomputed for a design recorded before issue 40 keeps its schedule)."""
    return {**rule.model_dump(mode="json"), "look_every": look_every}


def record_of(run: RunData) -> SequentialRecord:
    """The run's ``sequential`` block, validated; ConfigError when absent, malformed or edited."""
    rec = run.log.sequential  # validated when run.json was read (record.runlog.read_run_log)
    if rec is None:
        raise ConfigError(f"{run.source} is not an arm of rollbench sequential (its run.json has no sequential block)")
    d = rec.design
    try:
        rule = rule_of(d)  # the record's bounds (SequentialDesignRecord) are those design() accepts: seconds of work
    except ValueError as exc:
        raise ConfigError(f"{run.source}/run.json: sequential.design cannot be recomputed: {exc}") from None
    for name in (*DERIVED, "power_target") if d.power_target is not None else DERIVED:
        if getattr(rule, name) != getattr(d, name):
            raise ConfigError(
                f"{run.source}/run.json: sequential.design.{name} is {getattr(d, name)!r} but its parameters give "
                f"{getattr(rule, name)!r} (edited)"
            )
    return rec


def _final_look(looks: list[Look], pairs: Any, rule: SequentialDesign, planned: int) -> list[Look]:
    """The looks, ended at the end of the plan when every planned pair was attempted without a decision (pairs left
    out for errors keep the counted pairs below the budget), and with ``insufficient_coverage`` in place of a final
    decision when either arm's coverage up to it is below the gate."""
    last = looks[-1].decision if looks else "continue"
    n = len(pairs.xa)
    if last not in FINAL and pairs.attempted >= planned:
        d = sum(x != y for x, y in zip(pairs.xa, pairs.xb, strict=True))
        k = sum(1 for x, y in zip(pairs.xa, pairs.xb, strict=True) if y > x)
        llr_b, llr_a = rule.llr(d, k)
        looks = [lk for lk in looks if lk.pairs != n] + [Look(n, d, k, d - k, llr_b, llr_a, "budget_exhausted")]
    if looks and looks[-1].decision in FINAL:
        lk = looks[-1]
        if pairs.gate(pairs.attempted_at[lk.pairs - 1] if lk.pairs else pairs.attempted) is not None:
            looks[-1] = Look(lk.pairs, lk.discordant, lk.b_only, lk.a_only, lk.llr_b, lk.llr_a, "insufficient_coverage")
    return looks


def recorded_rule(rec: SequentialRecord) -> CoverageRule:
    """The coverage rule an arm's ``sequential.coverage_rule`` records (absent: the defaults): the rule its study ran
    under, against which its recorded decision is checked; never the gate of a verdict (issue 42, round 15 F5)."""
    cov = rec.coverage_rule
    return CoverageRule(cov.min_coverage, cov.exclude_policy_errors) if cov is not None else DEFAULT_RULE


def task_document(a: RunData, b: RunData, rec: SequentialRecord, coverage: CoverageRule) -> dict[str, Any]:
    """Every look of the task's test and its decision, recomputed from the two arms under ``coverage``."""
    d = rec.design
    rule = rule_of(d)
    pairs = paired_outcomes(a, b, rec.task, coverage)
    planned = sum(1 for e in a.log.plan.episodes if e.task == rec.task)
    looks = _final_look(run_looks(rule, pairs.xa, pairs.xb, d.look_every), pairs, rule, planned)
    last = looks[-1].decision if looks else "continue"
    decided = last in FINAL
    counted = looks[-1].pairs if decided else len(pairs.xa)
    attempted = pairs.attempted_at[counted - 1] if decided and counted else pairs.attempted
    return {
        "task": rec.task,
        "a": a.source,
        "b": b.source,
        "policy_a": a.model,
        "policy_b": b.model,
        "design": d.model_dump(exclude_unset=True),  # a design recorded before issue 40 keeps its keys
        "trial_order": pairs.order,
        "looks": [lk.to_dict() for lk in looks],
        "decision": last if decided else None,
        "stopped_at": counted if decided else None,
        "pairs_counted": counted,
        "pairs_attempted": pairs.attempted,
        "errors": {
            "by_fault": pairs.faults,
            "pairs_left_out": pairs.excluded,
            "coverage": pairs.coverage(attempted),
            "coverage_min": coverage.min_coverage,
            "exclude_policy_errors": coverage.exclude_policy_errors,
            "gate": pairs.gate(attempted),
            "pairs_to_decision": attempted,  # the attempted pairs the coverage counts (all when undecided)
        },
        "episodes_recorded": {"a": len(a.episodes), "b": len(b.episodes)},
        "outcomes": {"a": pairs.xa[:counted], "b": pairs.xb[:counted]},
        "recorded": {"decision": rec.decision, "stopped_at": rec.stopped_at},
    }


def _pooled(tasks: list[dict[str, Any]], d: SequentialDesignRecord, alpha_family: float) -> dict[str, Any]:
    budget = min(len(tasks) * d.budget, max_pairs(d.look_every))
    if d.futility is None:  # recorded before issue 40: the pooled test at the full family level, as it ran
        rule = rule_for(d.delta, d.p_a, alpha_family, d.beta, budget, d.discordant)
    else:
        pooled_alpha = family_alphas(alpha_family, len(tasks))[1] or alpha_family
        rule = rule_for(d.delta, d.p_a, pooled_alpha, d.beta, budget, d.discordant, d.look_every, d.futility)
    xa = [x for t in tasks for x in t["outcomes"]["a"]]
    xb = [x for t in tasks for x in t["outcomes"]["b"]]
    looks = [lk.to_dict() for lk in run_looks(rule, xa, xb, d.look_every)]
    last = looks[-1]["decision"] if looks else "continue"
    if last in FINAL and any(t["decision"] == "insufficient_coverage" for t in tasks):
        looks[-1]["decision"] = last = "insufficient_coverage"
    return {
        "design": design_record(rule, d.look_every),
        "looks": looks,
        "decision": last if last in FINAL else None,
        "stopped_at": looks[-1]["pairs"] if last in FINAL else None,
        "complete": all(t["decision"] for t in tasks),
    }


def _pair_up(runs: list[RunData]) -> list[tuple[RunData, RunData, SequentialRecord]]:
    """(A, B, A's record) per task, checking that each arm names the other and that they agree."""
    by_id = {r.log.run_id: (r, record_of(r)) for r in runs}
    pairs = []
    for run, rec in by_id.values():
        if rec.arm != "a":
            continue
        if rec.partner not in by_id:
            raise ConfigError(f"{run.source}: its B arm {rec.partner!r} was not given (give both arms)")
        other, orec = by_id[rec.partner]
        if orec.arm != "b" or orec.partner != run.log.run_id:
            raise ConfigError(f"{run.source} and {other.source} are not the two arms of one comparison")
        for f in ("rule", "task", "family", "alpha_family", "design", "coverage_rule"):
            if getattr(rec, f) != getattr(orec, f):
                raise ConfigError(f"arms {run.source} and {other.source} record different sequential.{f}")
        tasks = [t.name for t in run.log.plan.tasks]
        if different := protocol_problem(run.source, run.log, other.source, other.log, tasks):
            raise ConfigError(f"arms {run.source} and {other.source} ran different protocols: {different}")
        sa, sb = (r.log.spec.model_dump(mode="json") for r in (run, other))
        if diff := [k for k in sorted({*sa, *sb}) if k not in ARM_FIELDS and sa.get(k) != sb.get(k)]:
            raise ConfigError(
                f"arms {run.source} and {other.source} are not paired: their run.json spec.{diff[0]} differ"
            )
        pairs.append((run, other, rec))
    paired_ids = {id(x) for a, b, _ in pairs for x in (a, b)}
    lone = [r.source for r in runs if id(r) not in paired_ids]
    if lone:
        raise ConfigError(f"{lone[0]}: its A arm was not given (give both arms)")
    return pairs


def _correction(rec: SequentialRecord, m: int) -> str:
    if m <= 1:
        return "none"
    return "bonferroni-tasks-only" if rec.design.futility is None else "bonferroni-tasks-and-pooled"


def rule_note(recorded: list[CoverageRule], applied: CoverageRule) -> str | None:
    """One line when a recorded coverage rule differs from the one ``applied`` (None when none does)."""
    other = next((r for r in recorded if r != applied), None)
    if other is None:
        return None
    return (
        f"the arms' run.json record the coverage rule ({other.in_words()}) their study ran under; this comparison "
        f"applies {applied.in_words()} (the --min-coverage / --exclude-policy-errors given, else the defaults: a "
        "handed-over file never sets the gate), so its decisions may differ from the recorded ones"
    )


def _documents(
    pairs: list[tuple[RunData, RunData, SequentialRecord]], family: list[str], rule: CoverageRule | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Per task of ``family`` its document, and the pooled test (None: one task, or a task not decided), under
    ``rule`` (None: each task's recorded rule)."""
    by_task = {rec.task: (a, b, rec) for a, b, rec in pairs}
    tasks = [task_document(*by_task[t], rule or recorded_rule(by_task[t][2])) for t in family if t in by_task]
    # the pooled test is defined once every task has stopped (its pairs are each task's counted ones, in family
    # order: while tasks advance in turns, an earlier task's new pairs would shift a later task's)
    complete = len(tasks) == len(family) and all(t["decision"] for t in tasks)
    rec0 = pairs[0][2]
    return tasks, _pooled(tasks, rec0.design, rec0.alpha_family) if len(family) > 1 and complete else None


def _one_arm_behind(rec_a: SequentialRecord, rec_b: SequentialRecord, t: dict[str, Any]) -> bool:
    """Whether two arms' differing recorded decisions are one of them not yet written: one records none and the
    other the decision and look ``t`` (the task's recomputation) gives (a runner stopped between the two writes)."""
    recorded = [(r.decision, r.stopped_at) for r in (rec_a, rec_b)]
    return (None, None) in recorded and (t["decision"], t["stopped_at"]) in recorded


def compare_sequential(
    paths: list[Path], rule: CoverageRule = DEFAULT_RULE, *, resuming: bool = False
) -> dict[str, Any]:
    """The sequential comparison held by the run directories under ``paths`` (the two arms of a task, or every arm of
    a suite, or the directory holding them), recomputed from the arms alone; see the module docstring. ``rule``: the
    coverage rule of the decisions (the user's options, else the defaults). The recorded decisions and the decision
    log are checked against a recomputation under the rule each arm records (the one its study ran under); where
    that differs from ``rule``, the decisions are recomputed under ``rule`` and ``coverage_rule_note`` says so.

    Returns ``{"statistics": "sequential", "rule", "alpha_family", "correction", "coverage_rule" (applied),
    "recorded_coverage_rule", "coverage_rule_note" (str or None), "tasks": [task documents, family order],
    "pooled": {...} or None (one task), "log": {"path", "agrees"} or None}``. Raises ConfigError (see the module
    docstring). ``resuming`` (the runner's own recomputation, :mod:`rollbench.sequential.runner`): arms of which one
    records no decision yet and the other the one recomputed are accepted (a runner stopped between writing the two);
    a recorded decision the episodes do not give is still refused."""
    pairs = _pair_up(load_arms(paths))
    if not pairs:
        raise ConfigError("no arm of a rollbench sequential comparison was given")
    family = pairs[0][2].family
    if any(rec.family != family for *_, rec in pairs) or len({rec.task for *_, rec in pairs}) != len(pairs):
        raise ConfigError("the runs given belong to more than one sequential comparison; give one at a time")
    missing = [t for t in family if t not in {rec.task for *_, rec in pairs}]
    tasks, pooled = _documents(pairs, family, None)  # under the recorded rules: what the study decided
    for t in tasks:
        rec = t["recorded"]
        if rec["decision"] is not None and (rec["decision"], rec["stopped_at"]) != (t["decision"], t["stopped_at"]):
            raise ConfigError(
                f"{t['a']}/run.json records {rec['decision']} at pair {rec['stopped_at']} but the episodes give "
                f"{t['decision'] or 'no decision'} at pair {t['stopped_at'] or t['pairs_counted']} (edited or damaged)"
            )
    for a, b, rec in pairs:  # after the check above: an edited decision is named as such first (issue 42, item 14)
        if (theirs := record_of(b)).decision != rec.decision or theirs.stopped_at != rec.stopped_at:
            if resuming and _one_arm_behind(rec, theirs, next(t for t in tasks if t["task"] == rec.task)):
                continue
            raise ConfigError(
                f"arms {a.source} and {b.source} record different decisions ({rec.decision} at {rec.stopped_at}, "
                f"{theirs.decision} at {theirs.stopped_at}): one was edited or removed"
            )
    rec0 = pairs[0][2]
    recorded = [recorded_rule(rec) for *_, rec in pairs]
    doc: dict[str, Any] = {
        "statistics": "sequential",
        "rule": rec0.rule,
        "alpha_family": rec0.alpha_family,
        "correction": _correction(rec0, len(family)),
        "family": family,
        "tasks_missing": missing,
        "tasks": tasks,
        "pooled": pooled,
        "log": None,
    }
    specs = {rec.task: (a.log.spec.model_dump(mode="json"), b.log.spec.model_dump(mode="json")) for a, b, rec in pairs}
    doc["log"] = check_log(doc, {Path(t["a"]).parent for t in tasks}, specs)  # the log: the study's own decisions
    if any(r != rule for r in recorded):
        doc["tasks"], doc["pooled"] = _documents(pairs, family, rule)
    doc["coverage_rule"] = rule.to_dict()
    doc["recorded_coverage_rule"] = recorded_rule(rec0).to_dict()
    doc["coverage_rule_note"] = rule_note(recorded, rule)
    return doc
