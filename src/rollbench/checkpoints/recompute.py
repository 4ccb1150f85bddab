"""A ``rollbench checkpoints`` OUT folder recomputed from its run directories, and checked against what the command
recorded (what ``rollbench report`` and the dashboard show).

The checkpoints are the run directories ``OUT/<step>`` (6 or more digits, as the command names them; links and other
entries are skipped). Each is graded from its files (:func:`rollbench.api.grade`) and ranked by
:func:`rollbench.checkpoints.rank.rank` at the reader's ``alpha`` and coverage rule (the defaults unless given): the
same code the command's resume and the MCP tool ``rank_checkpoints`` use. The ``alpha`` and rule recorded in
``OUT/checkpoints.json`` (a regular file, never read through a link) only check the recorded numbers; where they
differ from the reader's, :func:`level_note` says so (a handed-over file never sets the level of a verdict). With ``--eliminate``, every look is replayed from the run directories
(:func:`rollbench.checkpoints.eliminate_run.replay`, on the design recomputed from the recorded delta, alpha and
first look) and the ranking is the elimination's decision on the replayed looks
(:func:`rollbench.checkpoints.decision.rank_eliminated`: chosen, kept and eliminated steps, descriptive rates, no
fixed-N test); when the looks cannot be replayed nothing is ranked. Every number of ``checkpoints.json`` (and ``elimination.json``) that differs from the recomputation is
a **violation**, said in plain words; a run directory that cannot be graded, grades with violations, or is not the
run of its step (its run name, its spec's checkpoint or checkpoints.json's ``checkpoint_paths`` name another:
:mod:`rollbench.checkpoints.step_records`) is named and nothing is ranked; so are two run directories recorded under different protocols (horizon, success rule, success
hold...: :mod:`rollbench.grading.protocol`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollbench.checkpoints.decision import UNDECIDED, rank_eliminated
from rollbench.checkpoints.discover import Checkpoint
from rollbench.checkpoints.rank import outcomes, rank
from rollbench.checkpoints.recorded import RecordedElimination, RecordedRanking, check_recorded, described
from rollbench.checkpoints.runner import RANKING
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule, Outcome

STEP_DIR = re.compile(r"\d{6,}", re.ASCII)
DEFAULT_ALPHA = 0.05  # rollbench checkpoints --alpha's default: the level of a verdict no option sets
SHOWN_DIFFERENCES = 10  # differing numbers named one by one; the rest are counted
_ROW_KEYS = ("success_rate", "ci95", "coverage", "paired", "decision", "eliminated_at")


@dataclass
class Recomputed:
    """An OUT folder recomputed: ``ranking`` (the :func:`~rollbench.checkpoints.rank.rank` document, None when a
    run could not be graded), ``elimination`` (the replayed looks, None without ``--eliminate`` or when they
    could not be replayed), ``statuses`` (step -> the run's status: OK, PARTIAL, RUNNING...), ``violations``
    (plain sentences; empty when every recorded number agrees with the recomputation)."""

    out: Path
    ranking: dict[str, Any] | None = None
    elimination: dict[str, Any] | None = None
    statuses: dict[int, str] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    level_note: str | None = None  # one line when the recorded alpha / rule differ from those applied (round 15 F5)


def is_checkpoints_out(folder: Path) -> bool:
    """Whether ``folder`` (not a link) holds a regular ``checkpoints.json``: a folder ``rollbench checkpoints``
    wrote."""
    from rollbench.record.safe_files import is_regular

    return not folder.is_symlink() and folder.is_dir() and is_regular(folder / RANKING)


def recorded(out: Path) -> tuple[dict[str, Any], float, CoverageRule]:
    """``OUT/checkpoints.json`` as read, its ``alpha`` and coverage rule. ConfigError naming the file when it is
    missing, a link, not JSON or lacks them."""
    from rollbench.record.safe_files import read_regular_json

    try:
        doc = read_regular_json(out / RANKING, out)
        typed: RecordedRanking = check_recorded(doc)  # bounded finite numbers, by name (issue 42, hostile round 9)
        rule = CoverageRule(typed.rule.min_coverage, typed.rule.exclude_policy_errors)
    except FileNotFoundError:
        raise ConfigError(f"{out} holds no {RANKING}: not a folder written by rollbench checkpoints") from None
    except (OSError, ValueError, ConfigError) as exc:
        raise ConfigError(f"{out / RANKING} is damaged: {exc}") from None
    return doc, typed.alpha, rule


def step_runs(out: Path) -> list[Path]:
    """The run directories ``OUT/<step>`` in step order (regular ``run.json``, not links)."""
    from rollbench.record.safe_files import iter_run_dirs

    return sorted((d for d in iter_run_dirs(out) if STEP_DIR.fullmatch(d.name)), key=lambda d: int(d.name))


def level_note(recorded_alpha: float, recorded_rule: CoverageRule, alpha: float, rule: CoverageRule) -> str | None:
    """One line when the level checkpoints.json records (``alpha``, coverage ``rule``) differs from the one applied
    to the verdict (None when they agree): the recorded one only checks the recorded numbers."""
    if (recorded_alpha, recorded_rule) == (alpha, rule):
        return None

    def words(a: float, r: CoverageRule) -> str:
        return f"alpha {a:g}, {r.in_words()}"

    return (
        f"checkpoints.json records the level its ranking was made at ({words(recorded_alpha, recorded_rule)}); the "
        f"verdict here is stated at {words(alpha, rule)} (the reader's options, else rollbench's defaults: a "
        "handed-over file never sets the level of a verdict); the recorded numbers are checked at the recorded level"
    )


def recompute(out: Path, alpha: float = DEFAULT_ALPHA, rule: CoverageRule = DEFAULT_RULE) -> Recomputed:
    """Recompute ``out`` (see the module doc). Never raises for a damaged folder: its problems are violations.
    The recorded numbers are checked against a recomputation at the recorded alpha and rule; the ranking returned
    (its verdict) is at ``alpha`` and ``rule`` (the reader's: the defaults unless given), with
    :attr:`Recomputed.level_note` where the recorded ones differ (hostile round 15, neighbour of F5)."""
    from rollbench.api import grade

    got = Recomputed(out)
    try:
        doc, rec_alpha, rec_rule = recorded(out)
    except ConfigError as exc:
        got.violations.append(str(exc))
        return got
    runs: list[tuple[int, str, dict[int, Outcome]]] = []
    for d in step_runs(out):
        try:
            result = grade(d)
        except RollbenchError as exc:
            got.violations.append(f"step {int(d.name)}: {d} cannot be graded: {exc}")
            continue
        if result.violations:
            shown = "; ".join(result.violations[:3])
            got.violations.append(f"step {int(d.name)}: {d} is damaged: {shown}")
            continue
        if wrong := _records_disagree(d, doc):
            got.violations.append(wrong)
            continue
        got.statuses[int(d.name)] = result.status
        runs.append((int(d.name), str(d), outcomes(result)))
    if not got.violations and (different := protocol_violation([Path(r[1]) for r in runs])):
        got.violations.append(different)
    if got.violations:
        return got
    if not runs:
        got.violations.append(f"{out} holds no run directory OUT/<step> to rank")
        return got
    got.level_note = level_note(rec_alpha, rec_rule, alpha, rule)
    if doc.get("elimination") is None:
        as_recorded = json.loads(json.dumps(rank(runs, alpha=rec_alpha, rule=rec_rule)))
        got.ranking = json.loads(json.dumps(rank(runs, alpha=alpha, rule=rule))) if got.level_note else as_recorded
    else:
        _replay_elimination(got, doc["elimination"], rec_rule, sorted(step for step, _, _ in runs))
        if got.elimination is None:
            return got  # not replayed: no decision to show, and no fixed-N test on adaptive data
        as_recorded = json.loads(json.dumps(rank_eliminated(runs, got.elimination, alpha=rec_alpha, rule=rec_rule)))
        got.level_note = level_note(float(got.elimination["design"]["alpha"]), rec_rule, alpha, rule)
        if got.level_note is None:
            got.ranking = as_recorded
        else:
            got.ranking = _eliminated_at(runs, got.elimination, rec_rule, alpha, rule)
    got.violations[:0] = ranking_differences(doc, as_recorded, out / RANKING)
    got.ranking.update(level_note=got.level_note, recorded_alpha=rec_alpha, recorded_rule=rec_rule.to_dict())
    return got


def _eliminated_at(
    runs: list[tuple[int, str, dict[int, Outcome]]],
    elimination: dict[str, Any],
    scored_under: CoverageRule,
    alpha: float,
    rule: CoverageRule,
) -> dict[str, Any]:
    """The elimination's decision stated at ``alpha`` and ``rule`` (the reader's), its looks as recorded: a choice
    made at a design alpha at most ``alpha`` under the same treatment of policy errors holds at ``alpha`` too (its
    guarantee is the stronger recorded one; the gate is ``rule``'s); otherwise the recorded looks do not decide at
    ``alpha`` and nothing is chosen nor eliminated (the same command with ``--alpha`` runs the rule at that level).
    ``scored_under``: the rule the looks scored episodes by (the recorded one)."""
    design = elimination["design"]
    if float(design["alpha"]) <= alpha and rule.exclude_policy_errors == scored_under.exclude_policy_errors:
        return json.loads(json.dumps(rank_eliminated(runs, elimination, alpha=alpha, rule=rule)))
    undecided = {**elimination, "chosen": None, "looks": []}  # its eliminations were decided at another level
    doc = json.loads(json.dumps(rank_eliminated(runs, undecided, alpha=alpha, rule=rule)))
    if doc["verdict"] == UNDECIDED:
        doc["says"] = (
            f"no decision at alpha {alpha:g}: the elimination ran at alpha {float(design['alpha']):g} and its "
            f"recorded looks do not decide at alpha {alpha:g} (run it with --alpha {alpha:g} to decide at that level)"
        )
    return doc


def _records_disagree(run_dir: Path, doc: dict[str, Any]) -> str | None:
    """Why ``run_dir`` is not the run of the step its name gives, by what it and checkpoints.json record
    (:func:`rollbench.checkpoints.step_records.step_record_violations`); None when they agree."""
    from rollbench.checkpoints.step_records import step_record_violations
    from rollbench.record.runlog import read_run_log

    log = read_run_log(run_dir)  # grade read it already: a regular run.json of the model
    step = int(run_dir.name)
    found = step_record_violations(step, run_dir.name, log, doc.get("checkpoint_paths")) if log else []
    if not found:
        return None
    return f"step {step}: {run_dir} is not the run of step {step} (renamed, swapped or copied?): " + "; ".join(found)


def protocol_violation(run_dirs: list[Path]) -> str | None:
    """Why the checkpoints' run directories ``run_dirs`` cannot be ranked together: the first two whose tasks ran
    under different protocols (:func:`rollbench.grading.protocol.first_conflict`), naming them and the field; None
    when they share one (as the command runs them)."""
    from rollbench.grading.protocol import first_conflict
    from rollbench.record.runlog import read_run_log

    logs = [(str(d), read_run_log(d)) for d in run_dirs]
    clash = first_conflict((name, log, t.name) for name, log in logs if log is not None for t in log.plan.tasks)
    if clash is None:
        return None
    return f"checkpoint runs {clash[0]} and {clash[1]} ran different protocols: {clash[2]}; they are not ranked"


def ranking_differences(recorded_doc: dict[str, Any], ranking: dict[str, Any], where: Path) -> list[str]:
    """Sentences naming each number of the recorded ranking that differs from ``ranking`` (recomputed): the
    checkpoints ranked, the best and verdict, and per checkpoint its rate, interval, coverage and paired
    comparison. At most :data:`SHOWN_DIFFERENCES` are named; the rest are counted. ``recorded_doc``: checkpoints.json
    as :func:`recorded` read and typed it (``checkpoints`` a list of objects with integer steps)."""
    found: list[str] = []
    rows = {r["step"]: r for r in recorded_doc["checkpoints"]}
    steps = [r["step"] for r in ranking["checkpoints"]]
    if sorted(rows, key=str) != sorted(steps, key=str):
        found.append(
            f"{where} ranks {len(rows)} steps but the run directories are of steps {sorted(steps)} "
            "(stale: an interrupted command? run it again to finish)"
        )
    for key in ("best", "chosen", "verdict"):
        if recorded_doc.get(key) != ranking.get(key):
            found.append(
                f"{where} says {key} {described(recorded_doc.get(key))}; recomputed from the runs: {ranking.get(key)!r}"
            )
    for new in ranking["checkpoints"]:
        old = rows.get(new["step"])
        if old is None:
            continue
        for key in _ROW_KEYS:
            if old.get(key) != new.get(key):
                found.append(
                    f"{where}: step {new['step']} {key} {described(old.get(key))} differs from its run directory's "
                    f"{new.get(key)!r}"
                )
    if len(found) > SHOWN_DIFFERENCES:
        found = [*found[:SHOWN_DIFFERENCES], f"and {len(found) - SHOWN_DIFFERENCES} more differences"]
    return found


def _replay_elimination(got: Recomputed, recorded_block: Any, rule: CoverageRule, steps: list[int]) -> None:
    """Replay the looks of ``--eliminate`` into ``got.elimination``; a violation when they cannot be replayed or
    differ from the recorded block (or from ``elimination.json``)."""
    from rollbench.checkpoints.eliminate import design
    from rollbench.checkpoints.eliminate_run import ELIMINATION, replay
    from rollbench.record.safe_files import read_regular_json

    where = got.out / RANKING
    try:
        typed = check_recorded(recorded_block, RecordedElimination)  # recorded() checked it: no arithmetic before
        d0 = typed.design
        d = design(len(steps), d0.delta, d0.alpha, d0.looks[0])
        if typed.steps != steps:
            raise ConfigError(f"its elimination ran {len(typed.steps)} steps, not those of the run directories {steps}")
        if d0.looks != list(d.looks):
            raise ConfigError(f"its {len(d0.looks)} looks are not the design's {list(d.looks)}")
        ckpts = [Checkpoint(s, f"{s:06d}", got.out / f"{s:06d}") for s in steps]
        got.elimination = json.loads(json.dumps(replay(ckpts, got.out, d, rule)))
    except (ConfigError, KeyError, TypeError, ValueError, IndexError) as exc:
        got.violations.append(f"{where}: the elimination cannot be replayed from the run directories: {exc}")
        return
    if recorded_block != _as_old(got.elimination, recorded_block):
        got.violations.append(f"{where}: the recorded elimination differs from its replay from the run directories")
    try:
        separate = read_regular_json(got.out / ELIMINATION, got.out)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        got.violations.append(f"{got.out / ELIMINATION} is damaged: {exc}")
        return
    if separate != _as_old(got.elimination, separate):
        got.violations.append(f"{got.out / ELIMINATION} differs from the replay of the run directories")


def _as_old(replayed: dict[str, Any], recorded: Any) -> dict[str, Any]:
    """The replayed block without its ``stopped`` reason when ``recorded`` predates it (recorded before the
    elimination stated why it stopped): an old run still recomputes without a violation."""
    if isinstance(recorded, dict) and "stopped" not in recorded:
        return {k: v for k, v in replayed.items() if k != "stopped"}
    return replayed
