"""An episode's row of ``meta/episodes`` (LeRobot v3.0 plus rollbench's ``rollbench/*`` columns) as one typed record.

:class:`EpisodeRow` is built from a row as read (a ``meta/episodes`` parquet row through pyarrow or DuckDB, or a
staged ``episode.json``) by :meth:`EpisodeRow.from_row`, and written back by :meth:`EpisodeRow.to_row` (the committed
parquet row, in :func:`rollbench.record.derived.meta_schema`'s column order) or :meth:`EpisodeRow.to_staged` (a staged
``episode.json``). Readers take its attributes; the on-disk columns are named only here and in
:data:`EPISODE_FIELDS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

# rollbench's own per-episode columns in meta/episodes (prefixed so LeRobot readers ignore them)
EPISODE_FIELDS: dict[str, pa.DataType] = {
    "rollbench/task": pa.string(),
    "rollbench/trial": pa.int64(),
    "rollbench/seed": pa.int64(),
    "rollbench/initial_state": pa.int64(),
    "rollbench/instruction": pa.string(),
    "rollbench/variant": pa.string(),
    "rollbench/max_steps": pa.int64(),
    "rollbench/success_rule": pa.string(),
    "rollbench/success": pa.bool_(),
    "rollbench/success_at_reset": pa.bool_(),
    "rollbench/termination_reason": pa.string(),
    "rollbench/error": pa.string(),
    "rollbench/error_fault": pa.string(),
    "rollbench/steps": pa.int64(),
    "rollbench/return": pa.float64(),
    "rollbench/wall_time_s": pa.float64(),
    "rollbench/render_failure": pa.string(),
    "rollbench/transcript": pa.string(),
    "rollbench/wire_capture": pa.string(),
}

# episode-row columns renamed since they were first recorded: old name -> current name. A row recorded before (or
# resumed across) the rename reads under the current name; the writer writes only the current name.
# rollbench/render_fault: issue 29, "fault" names only the category of an error.
RENAMED_FIELDS: dict[str, str] = {"rollbench/render_fault": "rollbench/render_failure"}

# the rollbench/* columns every row rollbench ever wrote holds (the others are null in a row written before they existed)
_REQUIRED = ("rollbench/task", "rollbench/max_steps", "rollbench/success_rule", "rollbench/success",
             "rollbench/termination_reason")  # fmt: skip
_VIDEO_FIELDS = (("chunk_index", pa.int64()), ("file_index", pa.int64()),
                 ("from_timestamp", pa.float64()), ("to_timestamp", pa.float64()))  # fmt: skip
_LOCATION = ("data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index",
             "meta/episodes/chunk_index", "meta/episodes/file_index")  # fmt: skip


class EpisodeRowError(ValueError):
    """A row that is not an episode row rollbench writes; the message names the column and what is wrong, e.g.
    ``rollbench/return is a str, not a double``."""


@dataclass(frozen=True)
class VideoSpan:
    """Where one camera's video of an episode is (``videos/KEY/...`` columns): chunk and file index of the file
    (None when the episode has no video for it) and the episode's span in it, in seconds."""

    chunk_index: int | None = None
    file_index: int | None = None
    from_timestamp: float | None = None
    to_timestamp: float | None = None


@dataclass(frozen=True)
class EpisodeRow:
    """One episode's facts as recorded. ``length`` is LeRobot's frame count in a committed row (1 for an episode
    without steps: its padding frame) and the steps executed in a staged row; ``steps`` the steps executed
    (``rollbench/steps``; None in runs recorded before it existed). ``return_`` and ``wall_time_s`` in reward units
    and seconds. The LeRobot bookkeeping (``tasks``, ``data/*``, ``dataset_*_index``, ``videos``, ``meta/episodes/*``)
    is set in a committed row; a staged row has ``task_index`` and ``traceback`` instead. ``missing``: the
    ``rollbench/*`` columns the row lacks (a row of a rollbench before the column existed), read as None."""

    episode_index: int
    length: int
    task: str
    max_steps: int
    success_rule: str
    success: bool
    termination_reason: str
    trial: int | None = None
    seed: int | None = None
    initial_state: int | None = None
    instruction: str | None = None
    variant: str | None = None
    success_at_reset: bool | None = None
    error: str | None = None
    error_fault: str | None = None
    steps: int | None = None
    return_: float | None = None
    wall_time_s: float | None = None
    render_failure: str | None = None
    transcript: str | None = None
    wire_capture: str | None = None
    tasks: tuple[str, ...] = ()
    locations: tuple[int | None, ...] = (None,) * len(_LOCATION)  # the _LOCATION columns, in that order
    videos: tuple[tuple[str, VideoSpan], ...] = ()
    task_index: int | None = None
    traceback: str | None = None
    missing: frozenset[str] = frozenset()

    # ---- reading -------------------------------------------------------------------------------------------
    @classmethod
    def from_row(cls, row: Mapping[str, Any], finite: bool = False) -> EpisodeRow:
        """The row of a ``meta/episodes`` file or a staged ``episode.json`` (any rollbench version: a
        :data:`RENAMED_FIELDS` column under its old name is read under its current one); columns not rollbench's
        or LeRobot's are ignored. Raises :class:`EpisodeRowError` naming the first damaged column: ``length`` not
        an integer >= 0, ``episode_index`` not an integer, a :data:`EPISODE_FIELDS` column that does not hold its
        type (with ``finite``: or a float that is NaN or infinite), a column every row holds missing or null, a
        location, task list or video column of another type."""
        row = _current(row)
        raw = row.get("length")
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
            raise EpisodeRowError(f"length {repr(raw)[:40]} is not an integer >= 0")
        if not _is_int(row.get("episode_index")):
            raise EpisodeRowError(f"episode_index {repr(row.get('episode_index'))[:40]} is not an integer")
        facts: dict[str, Any] = {}
        for name, dtype in EPISODE_FIELDS.items():
            value = row.get(name)
            if isinstance(value, dict | list) or (value is not None and not _converts(value, dtype)):
                raise EpisodeRowError(f"{name} is a {type(value).__name__}, not a {dtype}")
            if finite and isinstance(value, float) and not math.isfinite(value):
                raise EpisodeRowError(f"{name} is {value}, not a finite number")
            facts[_attribute(name)] = float(value) if pa.types.is_floating(dtype) and value is not None else value
        for name in _REQUIRED:
            if row.get(name) is None:
                raise EpisodeRowError(f"{name} is {'null' if name in row else 'missing'}")
        return cls(
            episode_index=row["episode_index"],
            length=raw,
            **facts,
            tasks=_tasks(row.get("tasks")),
            locations=tuple(_optional_int(row, c) for c in _LOCATION),
            videos=_videos(row),
            task_index=_optional_int(row, "task_index"),
            traceback=_optional_str(row, "traceback"),
            missing=frozenset(c for c in EPISODE_FIELDS if c not in row),
        )

    # ---- LeRobot's bookkeeping -----------------------------------------------------------------------------
    @property
    def data_chunk_index(self) -> int | None:
        return self.locations[0]

    @property
    def data_file_index(self) -> int | None:
        return self.locations[1]

    @property
    def dataset_from_index(self) -> int | None:
        return self.locations[2]

    @property
    def dataset_to_index(self) -> int | None:
        return self.locations[3]

    def video(self, key: str) -> VideoSpan:
        """Video ``key``'s span (all None when the row names no video for it)."""
        return dict(self.videos).get(key, VideoSpan())

    def committed(
        self,
        tasks: Sequence[str],
        length: int,
        chunk_file: tuple[int, int],
        start: int,
        videos: Mapping[str, VideoSpan],
    ) -> EpisodeRow:
        """This (staged) row as committed: its LeRobot bookkeeping set (``length`` frames from global index
        ``start``, in chunk and file ``chunk_file``), staged-only facts dropped."""
        c, f = chunk_file
        return dataclasses.replace(
            self,
            tasks=tuple(tasks),
            length=length,
            locations=(c, f, start, start + length, c, f),
            videos=tuple(videos.items()),
            task_index=None,
            traceback=None,
        )

    # ---- writing -------------------------------------------------------------------------------------------
    def facts(self) -> dict[str, Any]:
        """The :data:`EPISODE_FIELDS` columns, in order (null for a column the row lacks)."""
        return {name: getattr(self, _attribute(name)) for name in EPISODE_FIELDS}

    def to_row(self, video_keys: Sequence[str]) -> dict[str, Any]:
        """The committed ``meta/episodes`` row (:func:`rollbench.record.derived.meta_schema` of ``video_keys``)."""
        c, f, start, end, mc, mf = self.locations
        out: dict[str, Any] = {"episode_index": self.episode_index, "tasks": list(self.tasks), "length": self.length,
                               "data/chunk_index": c, "data/file_index": f,
                               "dataset_from_index": start, "dataset_to_index": end}  # fmt: skip
        for key in video_keys:
            span = self.video(key)
            out.update({f"videos/{key}/{name}": getattr(span, name) for name, _ in _VIDEO_FIELDS})
        out["meta/episodes/chunk_index"], out["meta/episodes/file_index"] = mc, mf
        return {**out, **self.facts()}

    def to_staged(self) -> dict[str, Any]:
        """A staged ``episode.json``: the :data:`EPISODE_FIELDS` columns, then length, indices and traceback."""
        return {**self.facts(), "length": self.length, "episode_index": self.episode_index,
                "task_index": self.task_index, "traceback": self.traceback}  # fmt: skip


def current_columns(row: Mapping[str, Any]) -> list[str]:
    """The columns of ``row`` under their current names (:data:`RENAMED_FIELDS`)."""
    return list(_current(row))


def _attribute(column: str) -> str:
    name = column.removeprefix("rollbench/")
    return "return_" if name == "return" else name


def _current(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for old, new in RENAMED_FIELDS.items():
        if old in out:
            value = out.pop(old)
            if out.get(new) is None:
                out[new] = value
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _converts(value: object, dtype: pa.DataType) -> bool:
    if pa.types.is_string(dtype):
        return isinstance(value, str)
    if pa.types.is_boolean(dtype):
        return isinstance(value, bool)
    if pa.types.is_integer(dtype):
        return _is_int(value)
    return _is_int(value) or isinstance(value, float)


def _optional_int(row: Mapping[str, Any], column: str) -> int | None:
    value = row.get(column)
    if value is not None and not _is_int(value):
        raise EpisodeRowError(f"{column} is a {type(value).__name__}, not a int64")
    return value


def _optional_str(row: Mapping[str, Any], column: str) -> str | None:
    value = row.get(column)
    if value is not None and not isinstance(value, str):
        raise EpisodeRowError(f"{column} is a {type(value).__name__}, not a string")
    return value


def _tasks(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise EpisodeRowError(f"tasks is a {type(value).__name__}, not a list<string>")
    return tuple(value)


def _videos(row: Mapping[str, Any]) -> tuple[tuple[str, VideoSpan], ...]:
    keys = sorted({c.split("/")[1] for c in row if c.startswith("videos/") and c.count("/") == 2})
    spans = []
    for key in keys:
        values: dict[str, Any] = {}
        for name, dtype in _VIDEO_FIELDS:
            value = row.get(f"videos/{key}/{name}")
            if value is not None and not _converts(value, dtype):
                raise EpisodeRowError(f"videos/{key}/{name} is a {type(value).__name__}, not a {dtype}")
            values[name] = float(value) if pa.types.is_floating(dtype) and value is not None else value
        spans.append((key, VideoSpan(**values)))
    return tuple(spans)
