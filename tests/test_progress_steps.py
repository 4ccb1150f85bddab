"""One observer hears a run: a user's :class:`rollbench.RunObserver` receives the run start, each episode's start,
steps and end and the run end, in order; the running episodes' steps reach it, run.live.json and the display, so a
long episode (a 45-second LIBERO episode) visibly moves instead of looking hung; the deprecated ``progress=``
callback still gets its dict events, with a DeprecationWarning."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import rollbench
from rollbench.cli.display import ProgressDisplay
from rollbench.record.runlog import LiveSnapshot
from rollbench.run import worker
from rollbench.run.observer import EpisodeProgress, EpisodeStart, EpisodeSummary, RunEnd, RunStart

TASK = "scripted/reach"


class Heard(rollbench.RunObserver):
    """A user's observer: writes down every event it hears, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_run_start(self, start: RunStart) -> None:
        self.events.append(("run start", start))

    def on_episode_start(self, start: EpisodeStart) -> None:
        self.events.append(("episode start", start))

    def on_steps(self, worker: str, running: tuple[EpisodeProgress, ...]) -> None:
        self.events.append(("steps", worker, running))

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.events.append(("episode end", summary))

    def on_run_end(self, end: RunEnd) -> None:
        self.events.append(("run end", end))

    def on_worker(self, worker: str, state: str) -> None:
        self.events.append(("worker", worker, state))


def test_a_users_observer_hears_a_three_episode_run_event_by_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STEPS_EVERY_S", 0.0)  # report after every step (default: at most once a second)
    heard, out = Heard(), tmp_path / "run"
    result = rollbench.evaluate(env=TASK, policy="zero", episodes=3, max_steps=3, out=out, observer=heard)
    assert result.status == "OK"

    def episode(i: int) -> list[tuple[Any, ...]]:
        # the zero policy never reaches the goal: 3 steps, ended by the horizon; after each of steps 1 and 2 the
        # episode is still running, after the 3rd it is recorded and worker 0 runs nothing
        return [
            ("worker", "0", f"episode {i} ({TASK})"),
            ("episode start", EpisodeStart("0", i, TASK)),
            ("steps", "0", (EpisodeProgress(i, TASK, 1, 3),)),
            ("steps", "0", (EpisodeProgress(i, TASK, 2, 3),)),
            ("worker", "0", "idle"),
            ("episode end", EpisodeSummary(i, TASK, False, 3, "max_steps", staged=True)),
            ("steps", "0", ()),
        ]

    assert heard.events == [
        ("run start", RunStart(out, {TASK: 3}, {TASK: 0}, 0, ())),
        ("worker", "0", "starting"),
        *episode(0),
        *episode(1),
        *episode(2),
        ("run end", RunEnd(out, "OK", 3, 3)),
    ]


def test_a_resumed_run_tells_its_observer_what_was_already_recorded(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rollbench.evaluate(env=TASK, policy="zero", episodes=2, max_steps=2, out=out)
    heard = Heard()
    rollbench.evaluate(env=TASK, policy="zero", episodes=2, max_steps=2, out=out, observer=heard)
    assert heard.events == [
        ("run start", RunStart(out, {TASK: 2}, {TASK: 2}, 0, ())),
        ("run end", RunEnd(out, "OK", 2, 2)),
    ]


def test_an_observer_that_says_stop_ends_the_run_after_the_episode_in_flight(tmp_path: Path) -> None:
    class StopAfterOne(Heard):
        def should_stop(self) -> bool:
            return any(e[0] == "episode end" for e in self.events)

    heard, out = StopAfterOne(), tmp_path / "run"
    result = rollbench.evaluate(env=TASK, policy="zero", episodes=3, max_steps=2, out=out, observer=heard)
    assert result.episodes_recorded == 1 and result.status == "PARTIAL"
    assert [e[1].episode_index for e in heard.events if e[0] == "episode start"] == [0]
    assert heard.events[-1] == ("run end", RunEnd(out, "PARTIAL", 1, 3))


def test_the_deprecated_progress_callback_still_gets_its_dict_events_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "STEPS_EVERY_S", 0.0)
    events: list[dict[str, Any]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = rollbench.evaluate(
            env=TASK, policy="zero", episodes=2, max_steps=6, out=tmp_path / "run", progress=events.append
        )
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        "rollbench.evaluate(progress=) is deprecated: pass observer=, a rollbench.RunObserver"
    ]
    assert result.status == "OK"
    assert events[0] == {
        "event": "start",
        "run_dir": str(tmp_path / "run"),
        "totals": {TASK: 2},
        "done": {TASK: 0},
        "retried": 0,
        "warnings": [],
    }
    steps = [(e["episode_index"], e["step"]) for ev in events if ev["event"] == "steps" for e in ev["running"]]
    # after each of steps 1..5 the episode is still running (the 6th ends it, and the episode event follows)
    assert steps == [(0, s) for s in range(1, 6)] + [(1, s) for s in range(1, 6)]
    first = next(ev for ev in events if ev["event"] == "steps")
    assert first == {
        "event": "steps",
        "worker": "0",
        "running": [{"episode_index": 0, "task": TASK, "step": 1, "max_steps": 6}],
    }
    assert next(ev for ev in events if ev["event"] == "episode") == {
        "event": "episode",
        "episode_index": 0,
        "task": TASK,
        "success": False,
        "length": 6,
        "termination_reason": "max_steps",
        "staged": True,
        "policy_hung": False,
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
        display.on_run_start(RunStart(Path("runs/x"), {task: 2}, {task: 0}))
        bar = display.progress.tasks[0]
        assert bar.completed == 0
        display.on_steps("0", (EpisodeProgress(0, task, 55, 220),))
        assert bar.completed == 0.25 and bar.fields["ok"] == "ep 0: step 55/220"
        display.on_episode_end(EpisodeSummary(0, task, True, 80, "success", True))
        assert bar.completed == 1 and bar.fields["ok"] == ""
