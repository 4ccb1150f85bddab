"""The run directory as a LeRobot v3.0 dataset, written one whole episode at a time.

Layout (LeRobot ``codebase_version`` v3.0; see lerobot ``datasets/utils.py`` for the path templates)::

    meta/info.json                                   features, fps, totals, path templates
    meta/tasks.parquet                               one row per distinct instruction (index: task string)
    meta/episodes/chunk-CCC/file-FFF.parquet         one row per episode (the commit record)
    meta/stats.json                                  aggregate stats of numeric features
    data/chunk-CCC/file-FFF.parquet                  one file per episode, one row per step
    videos/observation.images.CAM/chunk-CCC/file-FFF.mp4
    transcripts/chunk-CCC/file-FFF.jsonl             an LLM agent's transcript (row column rollbench/transcript)
    wire/chunk-CCC/file-FFF.jsonl                    its raw provider requests/responses (rollbench/wire_capture)

Episode ``e`` lives in chunk ``e // 1000``, file ``e % 1000`` (``chunks_size`` = 1000 files per chunk).

Every episode has at least one frame, because LeRobot's reader needs frames for every episode listed in
``meta/episodes`` (lerobot 0.4.4 ``LeRobotDataset._check_cached_episodes_sufficient``; otherwise it goes to the hub)
and HF ``datasets`` cannot load a 0-row parquet file. An episode that ended before its first step (its env failed to
build or reset, its policy failed, stopped or gave up before the first action) is therefore recorded with one *padding frame*:
``observation.state`` and ``action`` all NaN (so it can never pass for a transition: rollbench rejects non-finite
actions, so no real row has one), ``next.reward`` 0, ``next.success`` false, ``next.done`` true,
``policy.latency_s`` NaN, and one black video frame per camera. Its meta row says ``length`` 1 (LeRobot's frame
count) and ``rollbench/steps`` 0 (steps executed, what ``grade`` reports as its length); stats leave it out.

Commit protocol, so that a crash at any instant leaves every committed episode readable:

1. ``stage_episode`` (runs wherever the episode ran) writes ``.staging/episode-EEEEEE`` as a temporary directory and
   renames it into place: a staged episode is whole or absent. A second copy of the same episode (a retried
   worker) loses the rename and is dropped, so an episode is recorded exactly once. Staging is not fsync'd: a
   staged episode is not recorded yet, and its files survive the crash of any process (they are in the page cache);
   after a power loss or a kernel crash a staged episode may be damaged, and the writer that opens the directory
   next removes it (see ``DatasetWriter``), so it runs again. Only committing (step 2) is durable. (Without the
   three fsyncs per staged episode, 2 workers went from 1.75x to 1.81x one worker in ``benchmarks/bench_parallel.py``;
   BENCHMARKS.md.)
2. ``DatasetWriter.promote_ready`` commits staged episodes strictly in episode order (LeRobot's global ``index``
   column needs every earlier episode's length): data file, then videos, then the episode's meta row, which is
   the commit point; then ``info.json`` and ``stats.json`` are rewritten. A policy's episode artifacts (an LLM
   agent's transcript and wire capture, :data:`ARTIFACT_PATHS`) are staged and placed like the videos. Data or video files without a meta row
   of the next episode to commit are leftovers of an interrupted commit and are removed (their staged copy is still
   there) when the writer opens; such files of a later episode were never a commit's, and refuse the resume
   (:func:`rollbench.record.on_disk.check_rowless`).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.core.contracts import TaskInfo
from rollbench.core.episode import EpisodeRecord
from rollbench.core.plan import ResolvedRun
from rollbench.record.episode_row import EpisodeRow
from rollbench.record.files import encode_video, resolve_inside

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
STAGING = ".staging"
# episode artifacts a policy hands over (EpisodeRecord.extra["artifacts"]): kind -> path template in the run dir;
# the episode row's ``rollbench/<kind>`` column holds the path relative to the run dir (null when absent)
ARTIFACT_PATHS: dict[str, str] = {
    "transcript": "transcripts/chunk-{chunk_index:03d}/file-{file_index:03d}.jsonl",
    "wire_capture": "wire/chunk-{chunk_index:03d}/file-{file_index:03d}.jsonl",
}
NUMERIC_FEATURES = ("observation.state", "action", "next.reward", "policy.latency_s")
# per-step columns of a run with --latency (rollbench.run.schedule), after task_index: the frame_index of the
# observation the action was computed from, its row in its chunk (both -1 for a hold action), and whether the step
# ran the task's hold action; a padding frame has -1, -1, false
DELAY_COLUMNS: dict[str, pa.DataType] = {
    "policy.obs_frame_index": pa.int64(),
    "policy.chunk_index": pa.int64(),
    "policy.hold": pa.bool_(),
}


def chunk_file(episode_index: int) -> tuple[int, int]:
    return episode_index // CHUNKS_SIZE, episode_index % CHUNKS_SIZE


def artifacts_of(rec: EpisodeRecord) -> dict[str, bytes]:
    """The episode's artifacts (kind -> bytes); unknown kinds raise ValueError (a policy bug, not data loss)."""
    arts = rec.extra.get("artifacts") or {}
    assert isinstance(arts, dict)
    bad = sorted(set(arts) - set(ARTIFACT_PATHS))
    if bad:
        raise ValueError(f"unknown episode artifact kind(s) {bad}; valid: {', '.join(ARTIFACT_PATHS)}")
    return {str(k): bytes(v) for k, v in arts.items()}


def artifact_path(kind: str, episode_index: int) -> str:
    """``kind``'s file of episode ``episode_index``, relative to the run directory."""
    c, f = chunk_file(episode_index)
    return ARTIFACT_PATHS[kind].format(chunk_index=c, file_index=f)


ACTION_DTYPE = np.float64
"""dtype of the ``action`` column: the values the env was stepped with, exactly. A policy's actions reach
``env.step`` unrounded (see :mod:`rollbench.run.episode`); float64 holds every float16/32/64 value exactly, so a
float64 action (openpi servers answer float64) is recorded as executed and a float32 one widens without change.
``observation.state`` stays float32 (the env's float64 state rounded; the policy itself got the env's own)."""


def video_key(camera: str) -> str:
    return f"observation.images.{camera}"


def dataset_features(
    task: TaskInfo, cameras: Sequence[str], image_size: tuple[int, int], delay_columns: bool = False
) -> dict[str, Any]:
    """LeRobot ``features`` of a run: dtype and shape of every per-step column (with :data:`DELAY_COLUMNS` for a
    run with a latency), video features per camera."""

    def scalar(dtype: str) -> dict[str, Any]:
        return {"dtype": dtype, "shape": [1], "names": None}

    feats: dict[str, Any] = {
        "observation.state": {"dtype": "float32", "shape": [task.state_dim], "names": None},
        "action": {"dtype": "float64", "shape": [task.action_dim], "names": None},  # as executed, see ACTION_DTYPE
        "next.reward": scalar("float32"),
        "next.success": scalar("bool"),
        "next.done": scalar("bool"),
        "policy.latency_s": scalar("float32"),
        "timestamp": scalar("float32"),
        "frame_index": scalar("int64"),
        "episode_index": scalar("int64"),
        "index": scalar("int64"),
        "task_index": scalar("int64"),
    }
    if delay_columns:
        feats.update({k: scalar("bool" if t == pa.bool_() else "int64") for k, t in DELAY_COLUMNS.items()})
    h, w = image_size
    for cam in cameras:
        feats[video_key(cam)] = {
            "dtype": "video",
            "shape": [h, w, 3],
            "names": ["height", "width", "channels"],
            "info": {
                "video.height": h,
                "video.width": w,
                "video.codec": "h264",
                "video.pix_fmt": "yuv420p",
                "video.is_depth_map": False,
                "video.fps": task.fps,
                "video.channels": 3,
                "has_audio": False,
            },
        }
    return feats


def run_features(run: ResolvedRun) -> dict[str, Any]:
    """The LeRobot ``features`` of ``run`` (meta/info.json's): :func:`dataset_features` of its first task (every task
    records the same cameras, see :func:`rollbench.core.plan.resolve_run`), images at the size the run renders, and
    the delay columns of a run with a latency."""
    first = run.tasks[run.plan.tasks[0].name]
    return dataset_features(first.task, first.video_cameras, first.image_size, run.spec.latency != "none")


def _data_schema(state_dim: int, action_dim: int, with_index: bool) -> pa.Schema:
    fields = [
        ("observation.state", pa.list_(pa.float32(), state_dim)),
        ("action", pa.list_(pa.float64(), action_dim)),
        ("next.reward", pa.float32()),
        ("next.success", pa.bool_()),
        ("next.done", pa.bool_()),
        ("policy.latency_s", pa.float32()),
        ("timestamp", pa.float32()),
        ("frame_index", pa.int64()),
        ("episode_index", pa.int64()),
        ("task_index", pa.int64()),
    ]
    if with_index:
        fields.append(("index", pa.int64()))
    return pa.schema(fields)


def _fixed_list(arr: np.ndarray, dim: int, dtype: type = np.float32) -> pa.Array:
    flat = pa.array(np.ascontiguousarray(arr, dtype=dtype).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, dim)


def episode_table(rec: EpisodeRecord, fps: int) -> pa.Table:
    """The episode's per-step rows (every data column but the global ``index``, which needs earlier episodes); the
    one padding frame (see the module docstring) for an episode without steps."""
    p, n = rec.planned, rec.length
    state_dim, action_dim = rec.states.shape[1], rec.actions.shape[1]
    if n == 0:
        table = padding_frame(state_dim, action_dim, p.episode_index, p.task_index)
    else:
        steps = _Steps(rec.states, rec.actions, rec.rewards, rec.successes, rec.dones, rec.latencies)
        table = _table(steps, fps, p.episode_index, p.task_index)
    return with_delay_columns(table, rec.action_sources) if rec.action_sources is not None else table


def with_delay_columns(table: pa.Table, sources: np.ndarray | None = None) -> pa.Table:
    """``table`` with :data:`DELAY_COLUMNS` appended from ``sources`` (``int64 (rows, 3)``, see
    ``EpisodeRecord.action_sources``); None or no rows (a padding frame): -1, -1, false on every row."""
    n = table.num_rows
    if sources is None or len(sources) != n:
        sources = np.tile(np.array([-1, -1, 0], dtype=np.int64), (n, 1))
    cols = [sources[:, 0].astype(np.int64), sources[:, 1].astype(np.int64), sources[:, 2].astype(bool)]
    for (name, dtype), col in zip(DELAY_COLUMNS.items(), cols, strict=True):
        table = table.append_column(pa.field(name, dtype), pa.array(col, dtype))
    return table


def padding_frame(state_dim: int, action_dim: int, episode_index: int, task_index: int) -> pa.Table:
    """The one data row of an episode without steps (see the module docstring), without ``index``."""
    nan = np.full((1, max(state_dim, action_dim)), np.nan, np.float32)
    steps = _Steps(nan[:, :state_dim], nan[:, :action_dim], np.zeros(1, np.float32), np.zeros(1, bool),
                   np.ones(1, bool), nan[0, :1])  # fmt: skip
    return _table(steps, 1, episode_index, task_index)


@dataclass(frozen=True)
class _Steps:
    """An episode's per-step arrays, one row per step: ``states`` ``(T, state_dim)``, ``actions`` ``(T, action_dim)``,
    ``rewards``, ``successes``, ``dones`` (``next.*``) and policy-call ``latencies`` (seconds) ``(T,)``."""

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    successes: np.ndarray
    dones: np.ndarray
    latencies: np.ndarray


def _table(steps: _Steps, fps: int, episode_index: int, task_index: int) -> pa.Table:
    n, state_dim, action_dim = len(steps.actions), steps.states.shape[1], steps.actions.shape[1]
    return pa.Table.from_arrays(
        [
            _fixed_list(steps.states, state_dim),
            _fixed_list(steps.actions, action_dim, ACTION_DTYPE),
            pa.array(steps.rewards, pa.float32()),
            pa.array(steps.successes, pa.bool_()),
            pa.array(steps.dones, pa.bool_()),
            pa.array(steps.latencies, pa.float32()),
            pa.array(np.arange(n, dtype=np.float32) / np.float32(fps), pa.float32()),
            pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.full(n, episode_index, dtype=np.int64)),
            pa.array(np.full(n, task_index, dtype=np.int64)),
        ],
        schema=_data_schema(state_dim, action_dim, with_index=False),
    )


def episode_row(rec: EpisodeRecord, render_failure: str | None) -> EpisodeRow:
    """The episode's row as staged: rollbench's ``rollbench/*`` facts plus length (steps), indices and the error
    traceback (the writer adds LeRobot's bookkeeping when it commits it)."""
    p, arts = rec.planned, artifacts_of(rec)
    return EpisodeRow(
        episode_index=p.episode_index,
        length=rec.length,
        task=p.task,
        trial=p.trial,
        seed=p.seed,
        initial_state=p.initial_state,
        instruction=p.instruction,
        variant=p.variant,
        max_steps=p.max_steps,
        success_rule=p.success_rule,
        success=rec.success,
        success_at_reset=rec.success_at_reset,
        termination_reason=rec.termination_reason,
        error=rec.error,
        error_fault=rec.error_fault,
        steps=rec.length,
        return_=float(rec.rewards.astype(np.float64).sum()),
        wall_time_s=rec.wall_time_s,
        render_failure=render_failure,
        transcript=artifact_path("transcript", p.episode_index) if "transcript" in arts else None,
        wire_capture=artifact_path("wire_capture", p.episode_index) if "wire_capture" in arts else None,
        task_index=p.task_index,
        traceback=rec.error_traceback,
    )


def stage_episode(run_dir: Path, rec: EpisodeRecord, fps: int, render_failure: str | None = None) -> bool:
    """Write one finished episode to ``run_dir/.staging`` atomically, not durably (see the module docstring).
    Returns False if it was already staged."""
    return stage_files(run_dir, rec.planned.episode_index, lambda d: write_episode_files(d, rec, fps, render_failure))


def stage_files(run_dir: Path, episode_index: int, write: Callable[[Path], None]) -> bool:
    """Stage episode ``episode_index`` into ``run_dir/.staging/episode-NNNNNN`` atomically and first-wins:
    ``write(tmp)`` fills a new temporary directory beside it, which is then renamed into place (not fsync'd: see the
    module docstring, commit protocol, step 1). Returns False, keeping the staged one, if the episode is already
    staged or another attempt stages it first. Whatever ``write`` raises removes the temporary directory and
    propagates."""
    final = resolve_inside(run_dir, run_dir / STAGING / f"episode-{episode_index:06d}")
    if final.exists() or final.is_symlink():
        return False
    tmp = run_dir / STAGING / f".tmp-{episode_index:06d}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        write(tmp)
        try:
            tmp.rename(final)
        except OSError:  # another attempt of this episode staged first: keep that one
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        return True
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_episode_files(directory: Path, rec: EpisodeRecord, fps: int, render_failure: str | None = None) -> None:
    """Write a staged episode's files into the existing, empty ``directory``: ``data.parquet``, ``episode.json``,
    ``<video key>.mp4`` per recorded camera and ``<artifact kind>.jsonl`` per policy artifact (not fsync'd)."""
    pq.write_table(episode_table(rec, fps), directory / "data.parquet")
    for cam, frames in rec.frames.items():
        if frames:
            encode_video(directory / f"{video_key(cam)}.mp4", frames, fps, durable=False)
    for kind, data in artifacts_of(rec).items():
        (directory / f"{kind}.jsonl").write_bytes(data)
    (directory / "episode.json").write_text(json.dumps(episode_row(rec, render_failure).to_staged()))


def tasks_table(instructions: Sequence[str]) -> pa.Table:
    """``meta/tasks.parquet``: column ``task_index`` with the task string as the pandas index (as LeRobot writes it)."""
    table = pa.table({"task_index": pa.array(range(len(instructions)), pa.int64()), "task": list(instructions)})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "rollbench"},
        "pandas_version": "2.2.0",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
