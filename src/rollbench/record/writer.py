"""DatasetWriter: commits staged episodes into the LeRobot v3 layout in episode order (see record.lerobot)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rollbench.record.files import atomic_write_bytes, atomic_write_json, atomic_write_parquet, encode_video
from rollbench.record.lerobot import (
    ARTIFACT_PATHS,
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    EPISODE_FIELDS,
    EPISODES_PATH,
    NUMERIC_FEATURES,
    STAGING,
    VIDEO_PATH,
    artifacts_of,
    chunk_file,
    episode_row,
    episode_table,
    stage_episode,
    tasks_table,
    video_key,
)
from rollbench.rollout import EpisodeRecord


class _Stats:
    """Running min/max/mean/std/count of one numeric feature (NaN rows ignored), in LeRobot's stats.json form."""

    def __init__(self) -> None:
        self.count = 0
        self.sum: np.ndarray | None = None
        self.sumsq: np.ndarray | None = None
        self.min: np.ndarray | None = None
        self.max: np.ndarray | None = None

    def add(self, x: np.ndarray) -> None:
        x = x.astype(np.float64).reshape(len(x), -1)
        x = x[~np.isnan(x).any(axis=1)]
        if not len(x):
            return
        s, ss, lo, hi = x.sum(0), (x * x).sum(0), x.min(0), x.max(0)
        if self.sum is None or self.sumsq is None or self.min is None or self.max is None:
            self.sum, self.sumsq, self.min, self.max = s, ss, lo, hi
        else:
            self.sum, self.sumsq = self.sum + s, self.sumsq + ss
            self.min, self.max = np.minimum(self.min, lo), np.maximum(self.max, hi)
        self.count += len(x)

    def to_json(self) -> dict[str, Any] | None:
        if self.sum is None or self.sumsq is None or self.min is None or self.max is None:
            return None
        mean = self.sum / self.count
        std = np.sqrt(np.maximum(self.sumsq / self.count - mean * mean, 0.0))
        return {
            "min": self.min.tolist(),
            "max": self.max.tolist(),
            "mean": mean.tolist(),
            "std": std.tolist(),
            "count": [self.count],
        }


def _place(src: Path, dst: Path) -> None:
    """Hard-link (else copy) a staged file to its final place; the staged copy stays until the commit point."""
    if src != dst:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)


class DatasetWriter:
    """Owns a run directory's dataset files. Only one process may hold one (the run lock ensures it).

    Opening repairs what an interrupted commit left behind (files without a meta row, staged copies of committed
    episodes) and rewrites info.json/stats.json from the committed episodes.
    """

    def __init__(
        self,
        run_dir: Path,
        features: dict[str, Any],
        fps: int,
        instructions: Sequence[str],
        robot_type: str,
    ) -> None:
        self.run_dir = run_dir
        self.features = features
        self.fps = fps
        self.robot_type = robot_type
        self.video_keys = [k for k, v in features.items() if v["dtype"] == "video"]
        (run_dir / STAGING).mkdir(parents=True, exist_ok=True)
        tasks_path = run_dir / "meta" / "tasks.parquet"
        if not tasks_path.exists():
            atomic_write_parquet(tasks_path, tasks_table(instructions))
        self.instructions = list(instructions)
        self.lengths: list[int] = self._scan_committed()
        self._remove_leftovers()
        self.stats = {k: _Stats() for k in NUMERIC_FEATURES}
        for e, n in enumerate(self.lengths):
            if n:  # an episode with no step has no data file (see _commit)
                self._add_stats(pq.read_table(self._path(DATA_PATH, e)))
        self._write_info()
        self.write_stats()

    # ---- reading what is committed -------------------------------------------------------------------------
    def _path(self, template: str, episode_index: int, **kw: str) -> Path:
        c, f = chunk_file(episode_index)
        return self.run_dir / template.format(chunk_index=c, file_index=f, **kw)

    def _scan_committed(self) -> list[int]:
        files = sorted((self.run_dir / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
        found: dict[int, int] = {}
        for f in files:
            t = pq.read_table(f, columns=["episode_index", "length"])
            for e, n in zip(t["episode_index"].to_pylist(), t["length"].to_pylist(), strict=True):
                found[e] = n
        # commits happen strictly in episode order, so the committed set is 0..k-1; anything else was edited
        lengths = []
        for e in range(len(found)):
            if e not in found:
                raise RuntimeError(
                    f"{self.run_dir}: committed episodes are not contiguous (episode {e} is missing but "
                    f"{max(found)} is committed); the directory was modified outside rollbench"
                )
            lengths.append(found[e])
        return lengths

    def _remove_leftovers(self) -> None:
        k = len(self.lengths)
        patterns = ["data/chunk-*/file-*.parquet", "videos/*/chunk-*/file-*.mp4"]
        patterns += [t.split("/chunk-")[0] + "/chunk-*/file-*.jsonl" for t in ARTIFACT_PATHS.values()]
        for pattern in patterns:
            for f in self.run_dir.glob(pattern):
                c = int(f.parent.name.split("-")[1])
                i = int(f.stem.split("-")[1])
                if c * CHUNKS_SIZE + i >= k:
                    f.unlink()
        for d in (self.run_dir / STAGING).iterdir():
            if d.name.startswith(".tmp-") or (d.name.startswith("episode-") and int(d.name[8:]) < k):
                shutil.rmtree(d, ignore_errors=True)

    @property
    def committed(self) -> int:
        """Number of committed episodes (they are exactly 0..committed-1)."""
        return len(self.lengths)

    def remove_empty_staging(self) -> None:
        """Remove ``.staging/`` when nothing is left in it (a finished run)."""
        with contextlib.suppress(OSError):
            (self.run_dir / STAGING).rmdir()

    def staged(self) -> list[int]:
        return sorted(int(d.name[8:]) for d in (self.run_dir / STAGING).glob("episode-*"))

    # ---- committing ----------------------------------------------------------------------------------------
    def promote_ready(self) -> list[int]:
        """Commit every staged episode that is next in order. Returns the episode indices committed."""
        done = []
        while (self.run_dir / STAGING / f"episode-{self.committed:06d}").is_dir():
            e = self.committed
            staged = self.run_dir / STAGING / f"episode-{e:06d}"
            row = json.loads((staged / "episode.json").read_text())
            videos = {k: staged / f"{k}.mp4" for k in self.video_keys if (staged / f"{k}.mp4").exists()}
            videos.update({k: staged / f"{k}.jsonl" for k in ARTIFACT_PATHS if (staged / f"{k}.jsonl").exists()})
            self._commit(e, pq.read_table(staged / "data.parquet"), row, videos)
            shutil.rmtree(staged, ignore_errors=True)
            done.append(e)
        if done:
            self._write_info()
        return done

    def commit_record(self, rec: EpisodeRecord, render_fault: str | None) -> bool:
        """Commit an episode that ran in this process: directly when it is next in order, else via staging.

        The direct path writes the final files once (no staged copy to re-read); the result on disk is the same.
        Returns False if the episode was already committed.
        """
        e = rec.planned.episode_index
        if e < self.committed:
            return False
        if e != self.committed or (self.run_dir / STAGING / f"episode-{e:06d}").exists():
            staged = stage_episode(self.run_dir, rec, self.fps, render_fault)
            self.promote_ready()
            return staged
        videos = {}
        for cam, frames in rec.frames.items():
            if frames:
                videos[video_key(cam)] = path = self._path(VIDEO_PATH, e, video_key=video_key(cam))
                encode_video(path, frames, self.fps)
        for kind, data in artifacts_of(rec).items():
            videos[kind] = path = self._path(ARTIFACT_PATHS[kind], e)
            atomic_write_bytes(path, data)
        self._commit(e, episode_table(rec, self.fps), episode_row(rec, render_fault), videos)
        self._write_info()
        return True

    def _commit(self, e: int, table: pa.Table, row: dict[str, Any], videos: dict[str, Path]) -> None:
        """Write episode ``e``'s data file, place its videos and artifacts (``videos`` holds both: video key or
        artifact kind -> file), then its meta row (the commit point)."""
        n = table.num_rows
        start = sum(self.lengths)
        table = table.append_column("index", pa.array(np.arange(start, start + n, dtype=np.int64)))
        if n:  # a 0-row parquet file breaks LeRobot's reader (HF `datasets`); an episode with no step gets none
            atomic_write_parquet(self._path(DATA_PATH, e), table)
        for kind in ARTIFACT_PATHS:
            src = videos.get(kind)
            if src is not None:
                _place(src, self._path(ARTIFACT_PATHS[kind], e))
        c, f = chunk_file(e)
        meta: dict[str, Any] = {
            "episode_index": e,
            "tasks": [self.instructions[row["task_index"]]],
            "length": n,
            "data/chunk_index": c,
            "data/file_index": f,
            "dataset_from_index": start,
            "dataset_to_index": start + n,
        }
        for key in self.video_keys:
            src = videos.get(key)
            if src is not None:
                _place(src, self._path(VIDEO_PATH, e, video_key=key))
            has = src is not None
            meta[f"videos/{key}/chunk_index"] = c if has else None
            meta[f"videos/{key}/file_index"] = f if has else None
            meta[f"videos/{key}/from_timestamp"] = 0.0 if has else None
            meta[f"videos/{key}/to_timestamp"] = n / self.fps if has else None
        meta["meta/episodes/chunk_index"] = c
        meta["meta/episodes/file_index"] = f
        meta.update({k: row[k] for k in EPISODE_FIELDS})
        atomic_write_parquet(self._path(EPISODES_PATH, e), pa.Table.from_pylist([meta], schema=self._meta_schema()))
        # ---- commit point passed ----
        self.lengths.append(n)
        self._add_stats(table)

    def _meta_schema(self) -> pa.Schema:
        fields: list[tuple[str, pa.DataType]] = [
            ("episode_index", pa.int64()),
            ("tasks", pa.list_(pa.string())),
            ("length", pa.int64()),
            ("data/chunk_index", pa.int64()),
            ("data/file_index", pa.int64()),
            ("dataset_from_index", pa.int64()),
            ("dataset_to_index", pa.int64()),
        ]
        for key in self.video_keys:
            fields += [
                (f"videos/{key}/chunk_index", pa.int64()),
                (f"videos/{key}/file_index", pa.int64()),
                (f"videos/{key}/from_timestamp", pa.float64()),
                (f"videos/{key}/to_timestamp", pa.float64()),
            ]
        fields += [("meta/episodes/chunk_index", pa.int64()), ("meta/episodes/file_index", pa.int64())]
        fields += list(EPISODE_FIELDS.items())
        return pa.schema(fields)

    def _add_stats(self, table: pa.Table) -> None:
        if table.num_rows == 0:  # an episode that errored before its first step
            return
        for k, st in self.stats.items():
            col = table[k]
            if pa.types.is_fixed_size_list(col.type):
                arr = pc.list_flatten(col).to_numpy(zero_copy_only=False).reshape(table.num_rows, -1)
            else:
                arr = col.to_numpy(zero_copy_only=False).reshape(-1, 1)
            st.add(arr)

    def _write_info(self) -> None:
        n = self.committed
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": n,
            "total_frames": sum(self.lengths),
            "total_tasks": len(self.instructions),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 500,
            "fps": self.fps,
            "splits": {"train": f"0:{n}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if self.video_keys else None,
            "features": self.features,
        }
        # derived from meta/episodes and the data files, and rebuilt whenever a writer opens the directory
        atomic_write_json(self.run_dir / "meta" / "info.json", info, durable=False)

    def write_stats(self) -> None:
        """Rewrite ``meta/stats.json`` (LeRobot's normalisation stats) from the committed episodes.

        Called when the writer opens and when a run ends, not per episode: stats are only read for training, and a
        crashed run's stats are rebuilt the next time the directory is opened (resume).
        """
        stats = {k: s for k, st in self.stats.items() if (s := st.to_json()) is not None}
        atomic_write_json(self.run_dir / "meta" / "stats.json", stats, durable=False)
