"""Progress inside episodes: the running episodes' steps reach the progress callback, run.live.json and the
display, so a long episode (a 45-second LIBERO episode) visibly moves instead of looking hung."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rollbench.api import evaluate
from rollbench.cli.display import ProgressDisplay
from rollbench.record.runlog import LiveSnapshot
from rollbench.run import worker


def test_every_step_of_a_running_episode_reaches_the_progress_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STEPS_EVERY_S", 0.0)  # report after every step (default: at most once a second)
    events: list[dict[str, Any]] = []
    result = evaluate(
        env="scripted/reach", policy="zero", episodes=2, max_steps=6, out=tmp_path / "run", progress=events.append
    )
    assert result["status"] == "OK"
    steps = [(e["episode_index"], e["step"]) for ev in events if ev["event"] == "steps" for e in ev["running"]]
    # after each of steps 1..5 the episode is still running (the 6th ends it, and the episode event follows)
    assert steps == [(0, s) for s in range(1, 6)] + [(1, s) for s in range(1, 6)]
    first = next(ev for ev in events if ev["event"] == "steps")
    assert first == {
        "event": "steps",
        "worker": "0",
        "running": [{"episode_index": 0, "task": "scripted/reach", "step": 1, "max_steps": 6}],
    }
    assert [ev["event"] for ev in events].count("episode") == 2


def test_run_live_json_lists_running_episodes_until_they_are_done(tmp_path: Path) -> None:
    live = LiveSnapshot(tmp_path, {"libero/libero_spatial/0": 3})
    live.running["0"] = [{"episode_index": 1, "task": "libero/libero_spatial/0", "step": 120, "max_steps": 220}]
    live.running["1"] = [{"episode_index": 0, "task": "libero/libero_spatial/0", "step": 7, "max_steps": 220}]
    live.write(force=True)
    written = json.loads((tmp_path / "run.live.json").read_text())
    assert [(e["episode_index"], e["step"]) for e in written["running"]] == [(0, 7), (1, 120)]
    live.episode_done("libero/libero_spatial/0", False, episode_index=1)
    live.write(force=True)
    written = json.loads((tmp_path / "run.live.json").read_text())
    assert [(e["episode_index"], e["step"]) for e in written["running"]] == [(0, 7)]
    assert written["tasks"]["libero/libero_spatial/0"]["done"] == 1


def test_the_display_bar_moves_with_the_steps_of_a_running_episode() -> None:
    display = ProgressDisplay(Console(file=open("/dev/null", "w")), enabled=True)  # noqa: SIM115
    task = "libero/libero_spatial/0"
    with display:
        display.update({"event": "start", "run_dir": "", "totals": {task: 2}, "done": {task: 0}})
        bar = display.progress.tasks[0]
        assert bar.completed == 0
        running = [{"episode_index": 0, "task": task, "step": 55, "max_steps": 220}]
        display.update({"event": "steps", "worker": "0", "running": running})
        assert bar.completed == 0.25 and bar.fields["ok"] == "ep 0: step 55/220"
        display.update({"event": "episode", "task": task, "episode_index": 0})
        assert bar.completed == 1 and bar.fields["ok"] == ""
