"""``rollbench checkpoints --watch``: evaluate each checkpoint a training run writes, once it is complete and stable.

A checkpoint is taken when its ``config.json`` and weights are regular files and every file's size and mtime
(:func:`~rollbench.checkpoints.discover.fingerprint`) are unchanged over two consecutive polls, so a folder still
being written is never evaluated. The loop ends after ``max_checkpoints`` evaluated checkpoints, after
``until_idle_s`` seconds without a new one, or on Ctrl-C (KeyboardInterrupt propagates: the run directories are
resumable and the same command goes on, re-grading the checkpoints already evaluated).

A checkpoint whose evaluation raises ConfigError (its policy cannot be built, e.g. a crashed save whose config.json
is not JSON; the run refuses it) is skipped (:meth:`~rollbench.checkpoints.runner.CheckpointObserver.on_skipped`),
listed under ``skipped`` in the ranking, and the watch goes on; it is tried again once its files change and are
stable again. When the watch ends with every checkpoint it tried skipped, that is a ConfigError (nothing ranked).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollbench.checkpoints.discover import Checkpoint, find_checkpoints, fingerprint, is_complete
from rollbench.checkpoints.rank import outcomes
from rollbench.checkpoints.runner import (
    CheckpointObserver,
    Settings,
    Skipped,
    evaluate_checkpoint,
    nothing_evaluated,
    skip,
    write_ranking,
)
from rollbench.core.contracts import ConfigError
from rollbench.grading.coverage import Outcome
from rollbench.run.runners import Execution

MAX_POLL_S = 86_400.0  # --poll-s: at most a day between polls
MAX_UNTIL_IDLE_S = 30 * 86_400.0  # --until-idle: at most 30 days


@dataclass(frozen=True)
class Polling:
    """When the watch looks and when it ends: every ``poll_s`` seconds (``--poll-s``); after ``until_idle_s`` seconds
    without a new checkpoint (``--until-idle``, None: never) or ``max_checkpoints`` evaluated (``--max-checkpoints``,
    None: no limit)."""

    poll_s: float = 10.0
    until_idle_s: float | None = None
    max_checkpoints: int | None = None

    def __post_init__(self) -> None:
        """ConfigError, one line with the bound, for ``poll_s`` outside 0 .. MAX_POLL_S or ``until_idle_s`` outside
        0 .. MAX_UNTIL_IDLE_S (NaN and infinity included: a sleep of them overflows)."""
        if not 0.0 <= self.poll_s <= MAX_POLL_S:  # False for NaN too
            raise ConfigError(f"--poll-s must be between 0 and {MAX_POLL_S:g} seconds, got {self.poll_s:g}")
        if self.until_idle_s is not None and not 0.0 <= self.until_idle_s <= MAX_UNTIL_IDLE_S:
            raise ConfigError(
                f"--until-idle must be between 0 and {MAX_UNTIL_IDLE_S:g} seconds, got {self.until_idle_s:g}"
            )


def watch(
    run: Path,
    out: Path,
    settings: Settings,
    execution: Execution,
    polling: Polling | None = None,
    *,
    observer: CheckpointObserver | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Poll ``run`` as ``polling`` says (default :class:`Polling`) and evaluate each new stable checkpoint (step
    order within a poll); return the ranking of those evaluated when a limit is reached (see the module doc)."""
    polling = polling or Polling()
    max_checkpoints, until_idle_s = polling.max_checkpoints, polling.until_idle_s
    seen: dict[int, tuple[tuple[str, int, int], ...]] = {}
    results: list[tuple[Checkpoint, dict[int, Outcome]]] = []
    skipped: dict[int, tuple[Skipped, tuple[tuple[str, int, int], ...]]] = {}  # step -> (why, its files then)
    done: set[int] = set()
    last_new = clock()

    def ranking() -> dict[str, Any]:
        if not results and skipped:
            raise nothing_evaluated([s for s, _ in skipped.values()])
        dropped = [s for s, _ in skipped.values()]
        return write_ranking(out, sorted(results, key=lambda r: r[0].step), settings, skipped=dropped)

    while True:
        for ckpt in find_checkpoints(run):
            if ckpt.step in done:
                continue
            if not is_complete(ckpt):
                seen.pop(ckpt.step, None)
                continue
            now = fingerprint(ckpt)
            if ckpt.step in skipped and skipped[ckpt.step][1] == now:
                continue  # skipped, and not rewritten since
            if seen.get(ckpt.step) != now:  # new or still changing: look again at the next poll
                seen[ckpt.step] = now
                continue
            last_new = clock()
            try:
                result = evaluate_checkpoint(ckpt, settings.spec(ckpt), out, execution, observer)
            except ConfigError as exc:
                skipped[ckpt.step] = (skip(ckpt, exc, observer), now)
                if results:
                    ranking()  # checkpoints.json names it at once
                continue
            skipped.pop(ckpt.step, None)
            results.append((ckpt, outcomes(result)))
            done.add(ckpt.step)
            last_new = clock()
            doc = ranking()
            if max_checkpoints is not None and len(done) >= max_checkpoints:
                return doc
        if until_idle_s is not None and clock() - last_new >= until_idle_s:
            return ranking()
        if observer:
            observer.on_waiting(len(done))
        sleep(polling.poll_s)
