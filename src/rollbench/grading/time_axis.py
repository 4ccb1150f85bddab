"""The time axis of a recorded run: ``meta/info.json``'s ``fps`` and every step row's ``timestamp``.

rollbench writes ``timestamp = frame_index / fps`` (float32, :func:`rollbench.record.lerobot.episode_table`) with
the fps of the episode's task as the plan records it (``plan.tasks[].fps``), and ``meta/info.json``'s ``fps`` from
the plan's first task (``rollbench.api._open_writer``). LeRobot's own readers hold timestamps to the dataset's fps:
``LeRobotDataset(tolerance_s=1e-4)`` requires each timestamp to be 1/fps +/- tolerance_s from the next (its
``tolerance_s`` docstring), so a dataset whose fps or timestamps were edited does not load as what it says it is.

The rule checked here: ``|timestamp - frame_index / fps| <= TOLERANCE_S + (frame_index / fps) * 2**-23``, that is
LeRobot's default tolerance plus one float32 unit in the last place of the expected time (the rounding of storing
the exact quotient as float32: at most half a unit), so a sound run of any length passes and an edit of a
tenth of a frame at 10 fps does not. One DuckDB query over the loaded step table; no per-row Python.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pyarrow as pa

from rollbench.core.runlog_model import RunLog

TOLERANCE_S = 1e-4  # LeRobotDataset's default tolerance_s
_FLOAT32_ULP = 2.0**-23  # one float32 unit in the last place, relative

_OK = (
    f"abs(s.timestamp::DOUBLE - s.frame_index::DOUBLE / f.fps) <= {TOLERANCE_S!r} + s.frame_index::DOUBLE / f.fps * "
    f"{_FLOAT32_ULP!r}"
)  # NOT (...) is true for a NaN or null timestamp too
_OFF = f"""SELECT s.episode_index AS e, f.fps AS fps, count(*) AS frames,
       count(*) FILTER (WHERE NOT coalesce({_OK}, false)) AS off,
       min(s.frame_index) FILTER (WHERE NOT coalesce({_OK}, false)) AS first_frame
FROM steps s JOIN _rollbench_fps f USING (episode_index)
GROUP BY s.episode_index, f.fps HAVING off > 0 ORDER BY s.episode_index"""


def info_fps_problem(log: RunLog, info: dict[str, Any]) -> list[str]:
    """A violation when ``info``'s ``fps`` (a valid positive number: other values are named by
    :func:`rollbench.grading.files.info_field_problems`) is not the fps of the plan's first task, which the writer
    records there; empty otherwise."""
    fps = info.get("fps")
    if not log.plan.tasks or isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps):
        return []
    want = log.plan.tasks[0].fps
    if fps <= 0 or fps == want:
        return []
    return [
        f"meta/info.json: fps is {fps:g}, but the plan records {want} frames per second for its first task "
        f"({log.plan.tasks[0].name}); LeRobot readers would time every frame wrongly"
    ]


def timestamp_problems(con: duckdb.DuckDBPyConnection, log: RunLog) -> list[str]:
    """One violation per episode whose step rows (the loaded ``steps`` table) hold a timestamp that is not
    ``frame_index / fps`` within the tolerance of the module docstring (``fps``: its planned task's), naming how
    many frames are off and the first; empty for a sound run. Episodes of a task the plan does not list, or of a
    non-positive planned fps, are left to :func:`rollbench.record.runlog_shape.plan_problems`."""
    task_fps = {t.name: t.fps for t in log.plan.tasks if t.fps > 0}
    planned = [(e.episode_index, task_fps[e.task]) for e in log.plan.episodes if e.task in task_fps]
    if not planned:
        return []
    table = pa.table({"episode_index": [e for e, _ in planned], "fps": [f for _, f in planned]})
    con.register("_rollbench_fps", table)
    try:
        rows = con.sql(_OFF).fetchall()
    finally:
        con.unregister("_rollbench_fps")
    return [
        f"episode {e}: {off} of its {frames} frames have a timestamp that is not frame_index / fps ({fps} fps, "
        f"LeRobot's tolerance {TOLERANCE_S:g} s); the first is frame {first}"
        for e, fps, frames, off, first in rows
    ]
