"""The derived files of a run directory, rebuilt from the committed episodes whenever a writer opens it:
``meta/info.json`` (LeRobot v3.0), ``meta/videos_index.json``, the per-feature statistics behind ``meta/stats.json``,
and the schema of a ``meta/episodes`` row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rollbench.record.episode_row import EPISODE_FIELDS
from rollbench.record.files import atomic_write_json, read_parquet
from rollbench.record.lerobot import (
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    EPISODES_PATH,
    VIDEO_PATH,
)
from rollbench.record.on_disk import FeatureStats


def meta_schema(video_keys: list[str]) -> pa.Schema:
    """The schema of a ``meta/episodes`` row: LeRobot v3.0's columns (per-camera video columns for ``video_keys``)
    then rollbench's own (:data:`rollbench.record.episode_row.EPISODE_FIELDS`)."""
    fields: list[tuple[str, pa.DataType]] = [
        ("episode_index", pa.int64()),
        ("tasks", pa.list_(pa.string())),
        ("length", pa.int64()),
        ("data/chunk_index", pa.int64()),
        ("data/file_index", pa.int64()),
        ("dataset_from_index", pa.int64()),
        ("dataset_to_index", pa.int64()),
    ]
    for key in video_keys:
        fields += [
            (f"videos/{key}/chunk_index", pa.int64()),
            (f"videos/{key}/file_index", pa.int64()),
            (f"videos/{key}/from_timestamp", pa.float64()),
            (f"videos/{key}/to_timestamp", pa.float64()),
        ]
    fields += [("meta/episodes/chunk_index", pa.int64()), ("meta/episodes/file_index", pa.int64())]
    fields += list(EPISODE_FIELDS.items())
    return pa.schema(fields)


def add_stats(stats: dict[str, FeatureStats], table: pa.Table) -> None:
    """Add a data file's rows (padding frames left out) to the per-feature running statistics ``stats``."""
    if table.num_rows == 0:
        return
    actions = pc.list_flatten(table["action"]).to_numpy(zero_copy_only=False).reshape(table.num_rows, -1)
    table = table.filter(pa.array(~np.isnan(actions).any(axis=1)))  # drop the padding frame (record.lerobot)
    if table.num_rows == 0:  # an episode that ended before its first step
        return
    for k, st in stats.items():
        col = table[k]
        if pa.types.is_fixed_size_list(col.type):
            arr = pc.list_flatten(col).to_numpy(zero_copy_only=False).reshape(table.num_rows, -1)
        else:
            arr = col.to_numpy(zero_copy_only=False).reshape(-1, 1)
        st.add(arr)


def info_document(
    robot_type: str, lengths: list[int], total_tasks: int, fps: int, features: dict[str, Any]
) -> dict[str, Any]:
    """``meta/info.json`` (LeRobot v3.0) for committed episodes of ``lengths`` frames each."""
    n = len(lengths)
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": n,
        "total_frames": sum(lengths),
        "total_tasks": total_tasks,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 500,
        "fps": fps,
        "splits": {"train": f"0:{n}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if any(f.get("dtype") == "video" for f in features.values()) else None,
        "features": features,
    }


def write_videos_index(run_dir: Path, fps: int, video_keys: list[str], committed: int) -> None:
    """Rewrite ``meta/videos_index.json``: episode -> task, trial, seed and, per camera, the video file (relative
    to the run directory) and the time range in it (seconds), read from the committed episode rows.

    A derived file like ``info.json`` (rebuilt on open and at the end of a run); absent when no video is
    recorded. Form: ``{"fps": int, "episodes": [{"episode_index", "task", "trial", "seed", "videos": {key:
    {"file", "from_s", "to_s"}}}]}`` (an episode without steps has an empty ``videos``).
    """
    if not video_keys:
        return
    parts = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
    cols = ["episode_index", "rollbench/task", "rollbench/trial", "rollbench/seed"]
    cols += [f"videos/{k}/{p}" for k in video_keys for p in parts]
    episodes = []
    for e in range(committed):
        m = read_parquet(
            run_dir / EPISODES_PATH.format(chunk_index=e // CHUNKS_SIZE, file_index=e % CHUNKS_SIZE), columns=cols
        ).to_pylist()[0]
        videos = {
            k: {
                "file": VIDEO_PATH.format(
                    video_key=k, chunk_index=m[f"videos/{k}/chunk_index"], file_index=m[f"videos/{k}/file_index"]
                ),
                "from_s": m[f"videos/{k}/from_timestamp"],
                "to_s": m[f"videos/{k}/to_timestamp"],
            }
            for k in video_keys
            if m[f"videos/{k}/file_index"] is not None
        }
        episodes.append(
            {
                "episode_index": e,
                "task": m["rollbench/task"],
                "trial": m["rollbench/trial"],
                "seed": m["rollbench/seed"],
                "videos": videos,
            }
        )
    index = {"fps": fps, "episodes": episodes}
    atomic_write_json(run_dir / "meta" / "videos_index.json", index, durable=False)
