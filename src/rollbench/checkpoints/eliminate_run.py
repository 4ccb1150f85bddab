"""``rollbench checkpoints --eliminate``: the early-elimination rule (:mod:`.eliminate`) run on real run
directories, and recomputed from them.

Every checkpoint's run directory ``OUT/<step>`` is an ordinary run of the shared spec with ``episodes = N_max``
(one task, one seeded shuffled plan shared by every checkpoint), advanced look by look: before look ``n`` each
surviving checkpoint runs until its first ``n`` planned episodes are recorded (an observer's ``should_stop``), then the look is computed *from disk*
(the graded episodes with index < n, scored by the coverage rule) and written to ``OUT/elimination.json``.
:func:`replay` recomputes every look from the run directories alone; the command checks that it agrees with what it
decided. Interrupted, the same command resumes: looks are a function of the recorded episodes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.api import evaluate, grade, record_stop
from rollbench.checkpoints.discover import Checkpoint
from rollbench.checkpoints.eliminate import Design, decide, look_counts
from rollbench.checkpoints.files_record import record_files
from rollbench.checkpoints.rank import outcomes
from rollbench.checkpoints.runner import CheckpointObserver, CheckpointState, Settings, undamaged, write_ranking
from rollbench.core.contracts import ConfigError
from rollbench.core.plan import make_plan
from rollbench.core.recorded_order import order_problem
from rollbench.core.runlog_model import EliminationRunRecord, RunLog
from rollbench.core.spec import EvalSpec
from rollbench.grading.coverage import CoverageRule, score
from rollbench.record.files import json_bytes, write_outputs
from rollbench.record.runlog import read_run_log
from rollbench.run.observer import EpisodeSummary, Observers, RunObserver
from rollbench.run.runners import Execution

ELIMINATION = "elimination.json"


def _scores(run_dir: Path, rule: CoverageRule) -> dict[int, int | None]:
    if not (run_dir / "run.json").exists():
        return {}
    graded = undamaged(grade(run_dir), run_dir, int(run_dir.name))  # a damaged step run: ConfigError, never scored
    return {e: score(o, rule) for e, o in outcomes(graded).items()}


class _UpTo(RunObserver):
    """Stops starting episodes once every planned episode with index < ``n`` is recorded (``finished``: those
    already recorded when the invocation starts, then each one that ends)."""

    def __init__(self, finished: set[int], n: int) -> None:
        self.finished, self.n = finished, n

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.finished.add(summary.episode_index)

    def should_stop(self) -> bool:
        return all(i in self.finished for i in range(self.n))


class _Scores:
    """Each checkpoint's scored episodes (:func:`_scores`), graded once and again only after :meth:`changed` (its
    run directory advanced): a look grades the directories that changed since the last, not every one."""

    def __init__(self, ckpts: Sequence[Checkpoint], out: Path, rule: CoverageRule) -> None:
        self.dirs, self.rule = [out / c.label for c in ckpts], rule
        self.known: dict[int, dict[int, int | None]] = {}

    def __getitem__(self, j: int) -> dict[int, int | None]:
        if j not in self.known:
            self.known[j] = _scores(self.dirs[j], self.rule)
        return self.known[j]

    def changed(self, j: int) -> None:
        self.known.pop(j, None)


def _advance(
    spec: EvalSpec, run_dir: Path, n: int, execution: Execution, observer: RunObserver | None, finished: set[int]
) -> bool:
    """Run ``spec`` into ``run_dir`` until its first ``n`` planned episodes are recorded (nothing when they are:
    ``finished``, the indices recorded before); whether it ran."""
    stop = _UpTo(finished, n)
    if stop.should_stop():
        return False
    evaluate(spec, out=run_dir, execution=execution, observer=Observers(stop, *([observer] if observer else [])))
    return True


def check_orders(ckpts: Sequence[Checkpoint], out: Path) -> None:
    """ConfigError unless every checkpoint's run under ``out`` planned the same seeded shuffled order, the one
    :func:`rollbench.core.plan.trial_order` draws from its recorded seed and population (else it was edited, or
    run in plan order by a rollbench before the shuffle)."""
    seeds: set[int] = set()
    for c in ckpts:
        run_dir = out / c.label
        log = read_run_log(run_dir) if (run_dir / "run.json").exists() else None
        if log is None:
            continue
        plan = log.plan
        if plan.trial_order is None:
            raise ConfigError(f"{run_dir}/run.json: its trials are in plan order; --eliminate needs the seeded order")
        task = plan.tasks[0].name
        if why := order_problem(plan.trial_order, task, task, [e.trial for e in plan.episodes]):
            raise ConfigError(f"{run_dir}/run.json: {why}")
        seeds.add(plan.trial_order.seed)
    if len(seeds) > 1:
        raise ConfigError(f"{out}: the checkpoints' runs were shuffled with different seeds {sorted(seeds)}")


def _looks(
    ckpts: Sequence[Checkpoint],
    d: Design,
    rule: CoverageRule,
    out: Path,
    before: Callable[[int, list[int], _Scores], None] | None = None,
) -> dict[str, Any]:
    """Every look of the rule, in order, from the run directories (``before(n, alive indices, scores)`` runs first
    and marks the directories it advanced as changed)."""
    graded = _Scores(ckpts, out, rule)
    alive = np.ones(len(ckpts), dtype=bool)
    looks: list[dict[str, Any]] = []
    chosen: int | None = None
    for i, n in enumerate(d.looks):
        if looks and looks[-1]["trials"] == n:
            continue  # a padded look (see Design): the same counts
        if before:
            before(n, [int(j) for j in np.flatnonzero(alive)], graded)
        scores = [graded[j] for j in range(len(ckpts))]
        was = alive
        alive, chosen, record = decide(look_counts(scores, n), alive, d, last=i == len(d.looks) - 1 or n == d.looks[-1])
        looks.append({
            "trials": n,
            "best": ckpts[record["best"]].step,
            "eliminated": [ckpts[j].step for j in np.flatnonzero(was & ~alive)],
            "bounds": [{"step": ckpts[o["index"]].step, "pairs": o["pairs"], "mean": o["mean"], "lower": o["lower"]}
                       for o in record["others"]],
        })  # fmt: skip
        if chosen is not None:
            break
    used = {c.step: min(len(graded[j]), d.looks[-1]) for j, c in enumerate(ckpts)}
    return {
        "design": d.to_dict(),
        "steps": [c.step for c in ckpts],
        "looks": looks,
        "chosen": None if chosen is None else ckpts[chosen].step,
        "episodes_used": sum(used.values()),
        "episodes_fixed_n": len(ckpts) * d.to_dict()["fixed_n"],
        "guarantee": f"P(step chosen is more than {d.delta:g} below the best) <= {d.alpha:g}",
        "stopped": stopped(looks, d),
    }


def stopped(looks: list[dict[str, Any]], d: Design) -> str:
    """Why the rule stopped at its last look, in words (:func:`rollbench.checkpoints.eliminate.decide`'s three
    stops, in its order): every other checkpoint eliminated; every kept one's lower bound on (highest rate minus
    it) at least ``-delta``; else the last look (the budget, N_max)."""
    last = looks[-1]
    at = f"stopped at look {len(looks)} ({last['trials']} episodes)"
    kept = [b["lower"] for b in last["bounds"] if b["lower"] <= 0]
    best = last["best"]
    if not kept:
        return f"{at}: every other checkpoint was eliminated; step {best} is the only one left"
    if all(lower >= -d.delta for lower in kept):
        return (
            f"{at}: no kept checkpoint's success rate can exceed step {best}'s by more than {d.delta:g} (every kept "
            f"one's upper bound on its gain over step {best} is <= {d.delta:g})"
        )
    return f"{at}: budget exhausted (the last look, {last['trials']} episodes per checkpoint)"


def _decisions(doc: dict[str, Any]) -> dict[int, EliminationRunRecord]:
    """Per step, the look at which the elimination ended for it: the look that eliminated it, else the last."""
    looks = doc["looks"]
    got: dict[int, EliminationRunRecord] = {}
    for i, look in enumerate(looks, start=1):
        for step in look["eliminated"]:
            got[step] = EliminationRunRecord(look=i, trials=look["trials"], decision="eliminated")
    for step in doc["steps"]:
        if step not in got:
            end = EliminationRunRecord(look=len(looks), trials=looks[-1]["trials"], decision="kept")
            got[step] = end.model_copy(update={"decision": "chosen"}) if step == doc["chosen"] else end
    return got


def _record_stops(ckpts: Sequence[Checkpoint], out: Path, doc: dict[str, Any]) -> None:
    """Set run.json's ``elimination`` block of every checkpoint's run, so that grade knows which of its planned
    episodes the rule needed (:mod:`rollbench.grading.stopped`), and with it the run's regraded ``results`` and
    status, under the run's lock (:func:`rollbench.api.record_stop`)."""
    decisions = _decisions(doc)
    for c in ckpts:
        run_dir, record = out / c.label, decisions[c.step]
        if not (run_dir / "run.json").exists():
            continue

        def change(log: RunLog, record: EliminationRunRecord = record) -> bool:
            changed, log.elimination = log.elimination != record, record
            return changed

        record_stop(run_dir, change)


def run_elimination(
    ckpts: Sequence[Checkpoint], out: Path, settings: Settings, execution: Execution, d: Design,
    observer: CheckpointObserver | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run the rule on ``ckpts`` into ``out``; return the ranking document of the elimination's decision
    (:func:`rollbench.checkpoints.decision.rank_eliminated`: the chosen step and its guarantee, no fixed-N test) with
    an ``elimination`` block (the looks, the chosen step, episodes used against the fixed-N design). ConfigError for a spec of several tasks.

    Every checkpoint runs one shuffled plan (``trial_order_seed`` = the spec's seed, as ``rollbench sequential``
    does: :func:`rollbench.core.plan.trial_order`), so the first ``n`` episodes of every look are the same random
    sample of the task's trials for every checkpoint, whenever the rule stops."""
    specs = [settings.spec(c, episodes=d.looks[-1], trial_order_seed=settings.fields.get("seed", 0)) for c in ckpts]
    if len(make_plan(specs[0]).tasks) != 1:
        raise ConfigError("--eliminate runs one task (a suite's episodes are not one exchangeable sequence); give one")

    def before(n: int, alive: list[int], graded: _Scores) -> None:
        for j in alive:
            if observer:
                observer.on_checkpoint(CheckpointState(ckpts[j].step, out / ckpts[j].label, f"up to {n} episodes"))
            record_files(ckpts[j], out)  # what its episodes are made with (FilesChanged when they changed)
            if _advance(specs[j], out / ckpts[j].label, n, execution, observer, set(graded[j])):
                graded.changed(j)

    doc = _looks(ckpts, d, settings.rule, out, before)
    again = replay(ckpts, out, d, settings.rule)
    if again != doc:
        raise ConfigError(f"{out}: the looks recomputed from the run directories differ from those just made")
    write_outputs([(out / ELIMINATION, json_bytes(doc), "--out")], own="checkpoints")
    _record_stops(ckpts, out, doc)
    results = [(c, outcomes(grade(out / c.label))) for c in ckpts if (out / c.label / "run.json").exists()]
    return write_ranking(out, results, settings, doc)


def replay(ckpts: Sequence[Checkpoint], out: Path, d: Design, rule: CoverageRule) -> dict[str, Any]:
    """The looks recomputed from the run directories under ``out`` alone (runs nothing), after checking that they
    share one seeded order (:func:`check_orders`)."""
    check_orders(ckpts, out)
    return _looks(ckpts, d, rule, out)
