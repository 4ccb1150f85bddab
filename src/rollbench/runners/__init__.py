"""Runners execute planned episodes through :class:`rollbench.execute.EpisodeWorker` and report each one.

A runner never computes metrics and never decides what an episode is: the plan fixes that before it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rollbench.execute import EpisodeSummary, EpisodeWorker
from rollbench.plan import Plan, PlannedEpisode
from rollbench.spec import EvalSpec
from rollbench.types import ConfigError

if TYPE_CHECKING:
    from rollbench.api import Execution

OnResult = Callable[[EpisodeSummary], None]
ShouldStop = Callable[[], bool]


def run_in_process(
    spec: EvalSpec,
    plan: Plan,
    run_dir: Path,
    todo: Sequence[PlannedEpisode],
    replan_every: int,
    needs_images: bool,
    on_result: OnResult,
    should_stop: ShouldStop,
) -> None:
    """Run ``todo`` one after another in this process; stop starting episodes once ``should_stop()``."""
    worker = EpisodeWorker(spec, run_dir, {t.name: t for t in plan.tasks}, replan_every, needs_images)
    try:
        for planned in todo:
            if should_stop():
                return
            on_result(worker.run(planned))
    finally:
        worker.close()


def run_episodes(
    spec: EvalSpec,
    plan: Plan,
    run_dir: Path,
    todo: Sequence[PlannedEpisode],
    replan_every: int,
    needs_images: bool,
    execution: Execution,
    on_result: OnResult,
    should_stop: ShouldStop,
) -> None:
    """Dispatch to the runner named by ``execution`` (``local`` with 1 worker runs in this process)."""
    if execution.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {execution.workers}")
    if execution.executor == "local" and execution.workers == 1:
        run_in_process(spec, plan, run_dir, todo, replan_every, needs_images, on_result, should_stop)
        return
    raise ConfigError(
        f"executor {execution.executor!r} with {execution.workers} workers is not available yet"
    )
