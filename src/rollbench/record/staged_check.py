"""Whether a staged episode (``.staging/episode-EEEEEE``, or a Ray actor's shipped copy) is whole and is the episode
this run would have staged: nothing in ``.staging`` is committed on trust.

A staging directory may be damaged by a power loss (staging is not fsync'd, see :mod:`rollbench.record.lerobot`) or
handed over with a hostile file in it. Before a staged episode is committed, :func:`staged_damage` checks:

* ``episode.json`` is a JSON object whose ``length`` is an integer >= 0, whose ``episode_index`` is the episode's
  own and ``task_index`` an integer index of the run's instructions, and whose every episode-row column
  (:data:`~rollbench.record.episode_row.EPISODE_FIELDS`, read by
  :meth:`~rollbench.record.episode_row.EpisodeRow.from_row`) converts to its column type (no object, list or string where
  a number belongs) and, when a float, is a finite number (no NaN or inf return or wall time);
* given the episode's entry of run.json's plan, every plan field the row carries (:data:`PLAN_FIELDS`: task, trial,
  seed, initial state, instruction, variant, horizon, success rule, task index) is the plan's: a staged episode
  that contradicts the plan was not run at its planned seed and state, so it is never committed;
* ``data.parquet`` reads, holds ``max(length, 1)`` rows, has exactly the columns and types the writer writes for
  this run (:class:`StagedShape`) and names this episode and its task on every row, its ``frame_index`` 0..n-1,
  its ``next.reward`` finite on every row and summing to the row's return (to the float32 rounding grade allows);
* every staged video or artifact file is non-empty.

A staged episode that fails is named and removed by the writer (it runs again); a shipped one is refused
(:mod:`rollbench.record.shipping`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rollbench.core.jsonfile import JsonRefused
from rollbench.core.plan import PlannedEpisode
from rollbench.record.episode_row import EpisodeRow, EpisodeRowError
from rollbench.record.files import open_parquet
from rollbench.record.lerobot import DELAY_COLUMNS, padding_frame
from rollbench.record.safe_files import read_regular_json

STAGED_NAME = re.compile(r"episode-([0-9]{6})")  # stage_files's exact name: episode-EEEEEE
# the staged row's columns that restate its plan entry (rollbench.core.plan.PlannedEpisode): column -> plan field
PLAN_FIELDS: dict[str, str] = {
    **{f"rollbench/{k}": k for k in ("task", "trial", "seed", "initial_state", "instruction", "variant")},
    **{f"rollbench/{k}": k for k in ("max_steps", "success_rule")},
    "task_index": "task_index",
}


def staged_index(name: str) -> int | None:
    """The episode index of a staged episode directory named exactly ``episode-EEEEEE`` (six ASCII digits), else
    None (not rollbench's: ``episode-4``, ``episode-0000004``, non-ASCII digits)."""
    m = STAGED_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class StagedShape:
    """What a staged episode of this run must look like: its per-step vector sizes, whether the run has
    ``--latency`` delay columns, and how many instructions (task indices) it has."""

    state_dim: int
    action_dim: int
    delay_columns: bool
    n_tasks: int

    @classmethod
    def of(cls, features: dict[str, Any], n_tasks: int) -> StagedShape:
        """From a run's LeRobot ``features`` (:func:`~rollbench.record.lerobot.dataset_features`)."""
        state, action = features["observation.state"]["shape"][0], features["action"]["shape"][0]
        return cls(int(state), int(action), "policy.hold" in features, n_tasks)

    def schemas(self) -> list[pa.Schema]:
        """The data.parquet schemas the writer stages (an episode that could not start lacks the delay columns)."""
        base = padding_frame(self.state_dim, self.action_dim, 0, 0).schema.remove_metadata()
        if not self.delay_columns:
            return [base]
        return [base, pa.schema([*base, *(pa.field(n, t) for n, t in DELAY_COLUMNS.items())])]


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _row_damage(row: object, episode_index: int | None, shape: StagedShape | None) -> tuple[str | EpisodeRow, int]:
    """(why ``episode.json``'s object is not a staged row of this episode, else the row; its length)."""
    if not isinstance(row, dict):
        return f"episode.json holds a {type(row).__name__}, not an object", 0
    raw = row.get("length")
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        return f"episode.json: length {repr(raw)[:40]} is not an integer >= 0", 0
    length: int = raw
    if episode_index is not None and (not _int(row.get("episode_index")) or row["episode_index"] != episode_index):
        return f"episode.json: episode_index {repr(row.get('episode_index'))[:40]} is not {episode_index}", length
    task = row.get("task_index")
    if shape is not None and not (isinstance(task, int) and not isinstance(task, bool) and 0 <= task < shape.n_tasks):
        return f"episode.json: task_index {repr(task)[:40]} is not one of the run's 0..{shape.n_tasks - 1}", length
    try:
        return EpisodeRow.from_row(row, finite=True), length
    except EpisodeRowError as exc:
        return f"episode.json: {exc}", length


def plan_difference(row: EpisodeRow, planned: Any, columns: Iterable[str] = PLAN_FIELDS) -> str | None:
    """The first of ``columns`` (:data:`PLAN_FIELDS`) whose value in ``row`` is not the one of ``planned`` (the
    episode's plan entry: :class:`~rollbench.core.plan.PlannedEpisode` or run.json's record of it), as
    ``rollbench/seed 8 is not the plan's 7``; None when they agree (a bool never equals an integer)."""
    for column in columns:
        value, want = getattr(row, PLAN_FIELDS[column]), getattr(planned, PLAN_FIELDS[column])
        if value != want or isinstance(value, bool) != isinstance(want, bool):
            return f"{column} {repr(value)[:60]} is not the plan's {repr(want)[:60]}"
    return None


def _plan_damage(row: EpisodeRow, planned: PlannedEpisode) -> str | None:
    """Why the staged row contradicts its plan entry (the first :data:`PLAN_FIELDS` column that differs), or None."""
    why = plan_difference(row, planned)
    return None if why is None else f"episode.json: {why}"


def _data_damage(table: pa.Table, row: EpisodeRow, e: int | None, shape: StagedShape) -> str | None:
    schema = table.schema.remove_metadata()
    if not any(schema.equals(s) for s in shape.schemas()):
        return f"data.parquet has columns {', '.join(schema.names)[:200]}, not this run's"
    n = table.num_rows
    want = {"task_index": row.task_index, **({"episode_index": e} if e is not None else {})}
    for col, value in want.items():
        if not np.array_equal(table[col].to_numpy(), np.full(n, value)):
            return f"data.parquet: its {col} column is not {value} on every row"
    if not np.array_equal(table["frame_index"].to_numpy(), np.arange(n)):
        return "data.parquet: its frame_index column is not 0..n-1"
    rewards = table["next.reward"].to_numpy().astype(np.float64)
    if not np.isfinite(rewards).all():
        return "data.parquet: its next.reward column holds NaN or inf"
    ret = row.return_
    if ret is not None and not abs(float(rewards.sum()) - ret) <= 1e-6 * float(np.abs(rewards).sum()) + 1e-9:
        return f"data.parquet: its next.reward rows sum to {rewards.sum():g}, episode.json says return {ret:g}"
    return None


def staged_damage(
    staged: Path,
    episode_index: int | None = None,
    shape: StagedShape | None = None,
    planned: PlannedEpisode | None = None,
) -> str | None:
    """Why the staged episode directory ``staged`` is not a whole staged episode ``episode_index`` of a run of
    ``shape`` run as ``planned`` (its entry of run.json's plan; see the module docstring), or None. Without
    ``shape``, ``planned`` (or an index) only what can be checked without them is."""
    try:
        row = read_regular_json(staged / "episode.json")
    except JsonRefused as exc:  # its message says why in plain words
        return f"episode.json is not readable JSON: {exc}"
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        return f"episode.json: {type(exc).__name__}: {exc}"
    parsed, length = _row_damage(row, episode_index, shape)
    if isinstance(parsed, str):
        return parsed
    if planned is not None and (why := _plan_damage(parsed, planned)) is not None:
        return why
    try:
        with open_parquet(staged / "data.parquet") as f:
            rows = f.metadata.num_rows
            table = f.read() if shape is not None and rows == max(length, 1) else None
    except Exception as exc:  # pyarrow raises several types for a cut, empty or foreign file
        return f"data.parquet: {type(exc).__name__}: {exc}"
    if rows != max(length, 1):
        return f"data.parquet holds {rows} rows, its episode.json says length {length}"
    if table is not None and shape is not None:
        why = _data_damage(table, parsed, episode_index, shape)
        if why is not None:
            return why
    empty = sorted(f.name for f in staged.iterdir() if f.suffix in (".mp4", ".jsonl") and f.lstat().st_size == 0)
    return f"empty files: {', '.join(empty)}" if empty else None
