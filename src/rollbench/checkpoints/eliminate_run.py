"""``rollbench checkpoints --eliminate``: the early-elimination rule (:mod:`.eliminate`) run on real run
directories, and recomputed from them.

Every checkpoint's run directory ``OUT/<step>`` is an ordinary run of the shared spec with ``episodes = N_max``
(one task), advanced look by look: before look ``n`` each surviving checkpoint runs until its first ``n`` planned
episodes are recorded (``should_stop`` of :func:`rollbench.api.evaluate`), then the look is computed *from disk*
(the graded episodes with index < n, scored by the coverage rule) and written to ``OUT/elimination.json``.
:func:`replay` recomputes every look from the run directories alone; the command checks that it agrees with what it
decided. Interrupted, the same command resumes: looks are a function of the recorded episodes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.api import evaluate, grade
from rollbench.checkpoints.discover import Checkpoint
from rollbench.checkpoints.eliminate import Design, decide, look_counts
from rollbench.checkpoints.rank import outcomes
from rollbench.checkpoints.runner import Progress, Settings, write_ranking
from rollbench.core.contracts import ConfigError
from rollbench.core.plan import make_plan
from rollbench.core.spec import EvalSpec
from rollbench.grading.coverage import CoverageRule, score
from rollbench.record.files import atomic_write_json
from rollbench.run.runners import Execution

ELIMINATION = "elimination.json"


def _scores(run_dir: Path, rule: CoverageRule) -> dict[int, int | None]:
    if not (run_dir / "run.json").exists():
        return {}
    return {e: score(o, rule) for e, o in outcomes(grade(run_dir)).items()}


def _advance(spec: EvalSpec, run_dir: Path, n: int, execution: Execution, progress: Progress | None) -> None:
    """Run ``spec`` into ``run_dir`` until at least ``n`` episodes are recorded (nothing when they already are)."""
    if (run_dir / "run.json").exists() and len(grade(run_dir)["episodes"]) >= n:
        return
    done = [0]

    def count(event: dict[str, Any]) -> None:
        if event["event"] == "start":
            done[0] = sum(event["done"].values())
        elif event["event"] == "episode":
            done[0] += 1
        if progress:
            progress(event)

    evaluate(spec, out=run_dir, execution=execution, progress=count, should_stop=lambda: done[0] >= n)


def _looks(
    ckpts: Sequence[Checkpoint],
    d: Design,
    rule: CoverageRule,
    out: Path,
    before: Callable[[int, list[int]], None] | None = None,
) -> dict[str, Any]:
    """Every look of the rule, in order, from the run directories (``before(n, alive indices)`` runs first)."""
    alive = np.ones(len(ckpts), dtype=bool)
    looks: list[dict[str, Any]] = []
    chosen: int | None = None
    for i, n in enumerate(d.looks):
        if looks and looks[-1]["trials"] == n:
            continue  # a padded look (see Design): the same counts
        if before:
            before(n, [int(j) for j in np.flatnonzero(alive)])
        scores = [_scores(out / c.label, rule) for c in ckpts]
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
    used = {c.step: min(len(_scores(out / c.label, rule)), d.looks[-1]) for c in ckpts}
    return {
        "design": d.to_dict(),
        "steps": [c.step for c in ckpts],
        "looks": looks,
        "chosen": None if chosen is None else ckpts[chosen].step,
        "episodes_used": sum(used.values()),
        "episodes_fixed_n": len(ckpts) * d.to_dict()["fixed_n"],
        "guarantee": f"P(step chosen is more than {d.delta:g} below the best) <= {d.alpha:g}",
    }


def run_elimination(
    ckpts: Sequence[Checkpoint], out: Path, settings: Settings, execution: Execution, d: Design,
    progress: Progress | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run the rule on ``ckpts`` into ``out``; return the ranking document with an ``elimination`` block (the looks,
    the chosen step, episodes used against the fixed-N design). ConfigError for a spec of several tasks."""
    specs = [settings.spec(c, episodes=d.looks[-1]) for c in ckpts]
    if len(make_plan(specs[0]).tasks) != 1:
        raise ConfigError("--eliminate runs one task (a suite's episodes are not one exchangeable sequence); give one")

    def before(n: int, alive: list[int]) -> None:
        for j in alive:
            if progress:
                progress(
                    {
                        "event": "checkpoint",
                        "step": ckpts[j].step,
                        "run_dir": str(out / ckpts[j].label),
                        "state": f"up to {n} episodes",
                    }
                )
            _advance(specs[j], out / ckpts[j].label, n, execution, progress)

    doc = _looks(ckpts, d, settings.rule, out, before)
    again = _looks(ckpts, d, settings.rule, out)
    if again != doc:
        raise ConfigError(f"{out}: the looks recomputed from the run directories differ from those just made")
    atomic_write_json(out / ELIMINATION, doc)
    results = [(c, outcomes(grade(out / c.label))) for c in ckpts if (out / c.label / "run.json").exists()]
    return write_ranking(out, results, settings, {"elimination": doc})


def replay(ckpts: Sequence[Checkpoint], out: Path, d: Design, rule: CoverageRule) -> dict[str, Any]:
    """The looks recomputed from the run directories under ``out`` alone (runs nothing)."""
    return _looks(ckpts, d, rule, out)
