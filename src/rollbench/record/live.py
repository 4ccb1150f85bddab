"""``run.live.json``: the live snapshot of a run in progress (progress only; results come from ``rollbench grade``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rollbench.record.files import atomic_write_json, utc_now

LIVE_MIN_INTERVAL_S = 1.0


class LiveSnapshot:
    """Rewrites ``run.live.json`` atomically, at most once per second (and always when forced).

    ``running`` (worker id -> its episodes in progress, ``[{"episode_index", "task", "step", "max_steps"}]``) is
    written as one list, so a long episode visibly moves; an episode leaves it when it is done."""

    def __init__(self, run_dir: Path, totals: dict[str, int]) -> None:
        self.path = run_dir / "run.live.json"
        self.totals = totals
        self.done = dict.fromkeys(totals, 0)
        self.successes = dict.fromkeys(totals, 0)
        self.workers: dict[str, str] = {}
        self.running: dict[str, list[dict[str, Any]]] = {}
        self.started = time.monotonic()
        self.done_at_start = 0
        self._last = 0.0

    def episode_done(self, task: str, success: bool, episode_index: int | None = None) -> None:
        self.done[task] += 1
        self.successes[task] += int(success)
        for worker, eps in self.running.items():
            self.running[worker] = [e for e in eps if e.get("episode_index") != episode_index]

    def steps(self, worker: str, running: list[dict[str, Any]]) -> None:
        """``worker``'s episodes in progress now (see the class docstring); rewrites the file if a second passed."""
        self.running[worker] = running
        self.write()

    def write(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < LIVE_MIN_INTERVAL_S:
            return
        self._last = now
        total, done = sum(self.totals.values()), sum(self.done.values())
        ran = done - self.done_at_start
        rate = ran / (now - self.started) if ran else None
        atomic_write_json(
            self.path,
            {
                "updated": utc_now(),
                "episodes_done": done,
                "episodes_total": total,
                "tasks": {
                    t: {"done": self.done[t], "total": self.totals[t], "successes_so_far": self.successes[t]}
                    for t in self.totals
                },
                "workers": self.workers,
                "running": sorted(
                    (e for eps in self.running.values() for e in eps), key=lambda e: int(e["episode_index"])
                ),
                "eta_s": (total - done) / rate if rate else None,
                "note": "live progress only; results come from `rollbench grade`",
            },
        )

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
