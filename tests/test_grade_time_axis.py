"""grade checks the recorded time axis (hostile round 13, F1): ``meta/info.json``'s fps must be the plan's, and each
step's ``timestamp`` must be ``frame_index / fps`` within LeRobot's tolerance (1e-4 s) plus float32 rounding.
Oracles: the hand-edited files (which frames were moved, by how much) and the writer's own float32 arithmetic."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.runlog_model import RunLog
from rollbench.grading.time_axis import timestamp_problems


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("time") / "R"
    evaluate(out=out, env="scripted/reach", policy="scripted-expert", episodes=3)  # 10 fps
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    shutil.copytree(recorded, tmp_path / "R")
    return tmp_path / "R"


def _graded(run: Path) -> dict[str, object]:
    r = invoke("grade", run, "--json")
    doc: dict[str, object] = json.loads(r.stdout)
    return doc


def _step_file(run: Path, episode: int) -> Path:
    return run / "data" / "chunk-000" / f"file-{episode:03d}.parquet"


def _timestamps(run: Path, episode: int) -> list[float]:
    return [float(x) for x in pq.read_table(_step_file(run, episode)).column("timestamp").to_pylist()]


def _set_timestamps(run: Path, episode: int, values: list[float]) -> None:
    f = _step_file(run, episode)
    t = pq.read_table(f)
    assert t.column("episode_index").to_pylist() == [episode] * len(values)
    i = t.schema.get_field_index("timestamp")
    pq.write_table(t.set_column(i, t.schema.field("timestamp"), pa.array(values, pa.float32())), f)


def test_a_sound_run_passes_the_time_axis_checks(run: Path) -> None:
    doc = _graded(run)
    assert (doc["status"], doc["violations"]) == ("OK", [])


def test_an_info_fps_other_than_the_plans_is_a_named_violation(run: Path) -> None:
    info = json.loads((run / "meta" / "info.json").read_text())
    assert info["fps"] == 10
    (run / "meta" / "info.json").write_text(json.dumps({**info, "fps": 99}))
    doc = _graded(run)
    assert doc["status"] == "PARTIAL"
    assert doc["violations"] == [
        "meta/info.json: fps is 99, but the plan records 10 frames per second for its first task (scripted/reach); "
        "LeRobot readers would time every frame wrongly"
    ]


def test_reversed_timestamps_name_the_episode_and_count_the_frames_that_are_off(run: Path) -> None:
    assert len(_timestamps(run, 1)) == 3
    _set_timestamps(run, 1, [0.2, 0.1, 0.0])  # frames 0 and 2 are off, frame 1 (0.1 s) is where it belongs
    doc = _graded(run)
    assert doc["violations"] == [
        "episode 1: 2 of its 3 frames have a timestamp that is not frame_index / fps (10 fps, LeRobot's tolerance "
        "0.0001 s); the first is frame 0"
    ]


@pytest.mark.parametrize(("shift_s", "off"), [(0.5e-4, False), (-0.5e-4, False), (3e-4, True), (-3e-4, True)])
def test_a_timestamp_is_held_to_lerobots_tolerance(run: Path, shift_s: float, off: bool) -> None:
    ts = _timestamps(run, 2)
    assert ts == [float(np.float32(i) / np.float32(10)) for i in range(len(ts))]  # as the writer stores them
    _set_timestamps(run, 2, [*ts[:-1], ts[-1] + shift_s])
    violations = _graded(run)["violations"]
    expected = (
        f"episode 2: 1 of its {len(ts)} frames have a timestamp that is not frame_index / fps (10 fps, LeRobot's "
        f"tolerance 0.0001 s); the first is frame {len(ts) - 1}"
    )
    assert violations == ([expected] if off else [])


def _plan(fps: int) -> RunLog:
    task = SimpleNamespace(name="t", fps=fps)
    episode = SimpleNamespace(episode_index=0, task="t")
    return cast(RunLog, SimpleNamespace(plan=SimpleNamespace(tasks=[task], episodes=[episode])))


def test_a_long_episode_stored_as_float32_passes_and_one_frame_late_does_not() -> None:
    n, fps = 2**20, 7  # 41 hours: float32 rounding alone (up to ~0.004 s here) exceeds 1e-4 s
    ts = np.arange(n, dtype=np.float32) / np.float32(fps)  # what record.lerobot.episode_table writes
    con = duckdb.connect()
    steps = pa.table({"episode_index": np.zeros(n, np.int64), "frame_index": np.arange(n), "timestamp": ts})
    con.register("steps", steps)
    assert timestamp_problems(con, _plan(fps)) == []
    ts[-1] = ts[-2]  # the last frame stamped with its predecessor's time: 1/7 s early
    con.register("steps", pa.table({**{k: steps.column(k) for k in ("episode_index", "frame_index")}, "timestamp": ts}))
    assert timestamp_problems(con, _plan(fps)) == [
        f"episode 0: 1 of its {n} frames have a timestamp that is not frame_index / fps (7 fps, LeRobot's "
        f"tolerance 0.0001 s); the first is frame {n - 1}"
    ]
