"""DatasetWriter: commits staged episodes into the LeRobot v3 layout in episode order (see record.lerobot)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.core.episode import EpisodeRecord
from rollbench.core.plan import PlannedEpisode
from rollbench.record.committed import Committed, committed_lengths
from rollbench.record.derived import add_stats, info_document, meta_schema, write_videos_index
from rollbench.record.episode_row import EpisodeRow, VideoSpan
from rollbench.record.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_parquet,
    check_no_escaping_links,
    encode_video,
    fsync_dir,
    read_parquet,
    remove_temp_files,
    resolve_inside,
)
from rollbench.record.lerobot import (
    ARTIFACT_PATHS,
    DATA_PATH,
    EPISODES_PATH,
    NUMERIC_FEATURES,
    STAGING,
    VIDEO_PATH,
    artifacts_of,
    chunk_file,
    episode_row,
    episode_table,
    padding_frame,
    stage_episode,
    tasks_table,
    video_key,
    with_delay_columns,
)
from rollbench.record.on_disk import (
    LEFTOVER_PATTERNS,
    STAGED_TMP,
    FeatureStats,
    check_rowless,
    check_state_files,
    file_episode,
    is_real_dir,
    recorded_artifact_kinds,
    remove_staged_dir,
)
from rollbench.record.safe_files import is_regular, read_regular_json, run_files
from rollbench.record.staged_check import StagedShape, staged_damage, staged_index


def _place(src: Path, dst: Path) -> None:
    """Hard-link (else copy) a staged file to its final place; the staged copy stays until the commit point."""
    if src != dst:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)


def _unlink_regular(path: Path) -> None:
    """Delete ``path`` only if it is a regular file (the writer's own); a link, FIFO or device stays."""
    if is_regular(path):
        path.unlink(missing_ok=True)


class DatasetWriter:
    """Owns a run directory's dataset files. Only one process may hold one (the run lock ensures it).

    Opening repairs what an interrupted commit left behind (the next episode's files without a meta row, staged
    copies of committed episodes, half-written ``.staging/.tmp-*`` directories, temporary ``.NAME.XXXX.tmp`` files
    and partial videos) and rewrites info.json/stats.json from the committed episodes. It refuses (a ConfigError,
    OutsideRunDirError among them) a directory holding a link that leads outside it, or a rowless file of a later
    episode of the plan, before touching anything. ``plan``: run.json's planned episodes (in index order): a staged
    episode that contradicts its entry is removed and runs again, and a file of an episode past them is never this
    run's. ``committed``: the committed episodes' lengths and data-file statistics as read (and checked,
    :func:`rollbench.run.prepare.check_committed`) under the run lock the caller still holds, else read here
    (:func:`~rollbench.record.committed.committed_lengths`, and every data file for the statistics).
    """

    def __init__(
        self,
        run_dir: Path,
        features: dict[str, Any],
        fps: int,
        instructions: Sequence[str],
        robot_type: str,
        artifact_kinds: Sequence[str] = (),
        plan: Sequence[PlannedEpisode] = (),
        committed: Committed | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.plan = {p.episode_index: p for p in plan}
        # episodes the plan holds (no bound without one): a file at a higher index was never this writer's
        self.planned = len(plan) if plan else None
        self.features = features
        self.fps = fps
        self.robot_type = robot_type
        self.video_keys = [k for k, v in features.items() if v["dtype"] == "video"]
        check_no_escaping_links(run_dir)
        check_state_files(run_dir)  # no link, FIFO, socket or device where the writer reads, writes or deletes
        self.lengths: list[int] = list(committed.lengths) if committed is not None else self._scan_committed()
        check_rowless(run_dir, self.committed, self.planned)  # recorded episodes whose rows are gone: refused
        (run_dir / STAGING).mkdir(parents=True, exist_ok=True)
        tasks_path = run_dir / "meta" / "tasks.parquet"
        if not tasks_path.exists():  # (before the first commit; a resume checked it: record.committed.tasks_damage)
            atomic_write_parquet(tasks_path, tasks_table(instructions))
        self.instructions = list(instructions)
        # the artifacts this run writes (its policy's, or named by a committed row): only those are ever deleted
        self.artifact_kinds = sorted(set(artifact_kinds) | recorded_artifact_kinds(run_dir))
        self._remove_leftovers()
        self._remove_damaged_staged()
        if committed is None:
            self._rebuild_stats()
        else:  # computed by the resume's check from the same files (record.committed.committed_episodes)
            self.stats = committed.stats
        self._write_info()
        self.write_stats()
        self.write_videos_index()

    def _rebuild_stats(self) -> None:
        self.stats = {k: FeatureStats() for k in NUMERIC_FEATURES}
        for e, n in enumerate(self.lengths):
            if n:  # runs recorded before padding frames existed have no data file for an episode without steps
                self._add_stats(read_parquet(self._path(DATA_PATH, e)))

    # ---- reading what is committed -------------------------------------------------------------------------
    def _path(self, template: str, episode_index: int, **kw: str) -> Path:
        c, f = chunk_file(episode_index)
        return self.run_dir / template.format(chunk_index=c, file_index=f, **kw)

    def _scan_committed(self) -> list[int]:
        return committed_lengths(self.run_dir)

    def _remove_leftovers(self) -> None:
        """Delete what an interrupted commit left (files of episode ``committed``, the next to commit, without a
        row; the writer's exact temporaries): only files this run writes (its cameras' videos, its policy's
        artifacts), only within its plan. Any other rowless file is named on stderr and left as it is;
        :func:`~rollbench.record.on_disk.check_rowless` refused those of a later episode of the plan."""
        k = len(self.lengths)
        artifact_dirs = [ARTIFACT_PATHS[a].split("/")[0] for a in self.artifact_kinds]
        own_dirs = {
            ("data",),
            *(("videos", key) for key in self.video_keys),
            *((d,) for d in artifact_dirs),
        }
        for pattern in LEFTOVER_PATTERNS:  # regular files only, never through a link (rollbench.record.safe_files)
            for f in run_files(self.run_dir, pattern):
                index, tree = file_episode(f), f.relative_to(self.run_dir).parts[:-2]
                if index < k:
                    continue
                if tree not in own_dirs:
                    why = "not a kind of file it writes"
                elif self.planned is not None and index >= self.planned:
                    why = f"its plan has {self.planned} episodes"
                elif index > k:
                    why = f"only episode {k}, the next to commit, can hold an interrupted commit's files"
                else:
                    _unlink_regular(resolve_inside(self.run_dir, f))
                    continue
                print(f"warning: {f} is not this run's ({why}); left as it is", file=sys.stderr)
        for entry in sorted(os.scandir(self.run_dir / STAGING), key=lambda x: x.name):
            d, e = Path(entry.path), staged_index(entry.name)
            if e is None and entry.name.startswith("episode-"):  # not stage_files's exact name: never committed
                print(
                    f"warning: {d} is not named like a staged episode (episode-EEEEEE); left as it is", file=sys.stderr
                )
                continue
            if not entry.is_dir(follow_symlinks=False):
                if e is not None or entry.name.startswith(".tmp-"):
                    print(f"warning: {d} is not a directory, not rollbench's; skipped", file=sys.stderr)
                continue  # a link, FIFO or file is never followed, opened nor deleted
            if STAGED_TMP.fullmatch(entry.name) or (e is not None and e < k):
                remove_staged_dir(resolve_inside(self.run_dir, d), self.video_keys)
        remove_temp_files(self.run_dir, self.video_keys, artifact_dirs)

    def _remove_damaged_staged(self) -> None:
        """Remove staged episodes that are not whole episodes of this run (staging is not fsync'd, and a
        ``.staging`` may be handed over): :func:`~rollbench.record.staged_check.staged_damage` names why; a damaged
        one is named on stderr and removed (only the files the writer stages, never through a link: it was never
        recorded) and runs again, at its planned seed and state."""
        shape = StagedShape.of(self.features, len(self.instructions))
        for e in self.staged():
            d = self.run_dir / STAGING / f"episode-{e:06d}"
            why = staged_damage(d, e, shape, self.plan.get(e))
            if why is not None:
                print(f"warning: staged episode {e} is damaged ({why}); it will run again", file=sys.stderr)
                self.discard_staged(e)

    @property
    def committed(self) -> int:
        """Number of committed episodes (they are exactly 0..committed-1)."""
        return len(self.lengths)

    def remove_empty_staging(self) -> None:
        """Remove ``.staging/`` when nothing is left in it (a finished run)."""
        with contextlib.suppress(OSError):
            (self.run_dir / STAGING).rmdir()

    def staged(self) -> list[int]:
        """Indices of the staged, not yet committed episodes: real directories (never a link, FIFO or file) named
        ``episode-EEEEEE``; a leftover copy of a committed episode (one holding a file not rollbench's) is not one."""
        return sorted(
            e
            for d in (self.run_dir / STAGING).glob("episode-*")
            if (e := staged_index(d.name)) is not None and e >= self.committed and is_real_dir(d)
        )

    # ---- replacing committed episodes (resume re-runs errored episodes) ------------------------------------
    def discard_staged(self, episode_index: int) -> None:
        """Drop the staged, not yet committed copy of ``episode_index`` (rename first: a staged episode is whole
        or absent, and ``.tmp-*`` leftovers are removed when a writer opens)."""
        staged = self.run_dir / STAGING / f"episode-{episode_index:06d}"
        if is_real_dir(staged):
            doomed = self.run_dir / STAGING / f".tmp-{episode_index:06d}-discarded"
            staged.rename(doomed)
            fsync_dir(staged.parent)
            remove_staged_dir(doomed, self.video_keys)

    def uncommit(self, drop: set[int]) -> None:
        """Remove the committed episodes of ``drop`` so that they can be recorded again, keeping the others.

        LeRobot's global ``index`` and ``dataset_from_index``/``dataset_to_index`` of every later episode depend on
        the earlier episodes' lengths, so the committed tail from ``min(drop)`` on is taken back, last episode first:
        each kept episode is first staged again (whole or absent, its videos hard-linked), then its meta row (the
        commit point) is removed, then its data and video files. At every instant the committed episodes are
        0..k-1 and every other kept episode is staged, which is exactly what a writer opening the directory
        repairs (staged copies of committed episodes and files without a meta row are removed); the staged ones
        are committed again, in order, with their new global indices, as soon as the dropped ones are re-run.
        """
        if not drop or min(drop) >= self.committed:
            return
        for e in range(self.committed - 1, min(drop) - 1, -1):
            if e not in drop:
                self._restage(e)
            meta = self._path(EPISODES_PATH, e)
            meta.unlink()
            fsync_dir(meta.parent)
            # ---- episode e is no longer committed ----
            _unlink_regular(self._path(DATA_PATH, e))
            for key in self.video_keys:
                _unlink_regular(self._path(VIDEO_PATH, e, video_key=key))
            for kind in self.artifact_kinds:  # (restaged above when kept): no rowless file of another episode
                _unlink_regular(self._path(ARTIFACT_PATHS[kind], e))
            self.lengths.pop()
            self._write_info()
        self._rebuild_stats()

    def _restage(self, e: int) -> None:
        """Stage committed episode ``e`` again from its files (as ``stage_episode`` would have staged it)."""
        row = EpisodeRow.from_row(read_parquet(self._path(EPISODES_PATH, e)).to_pylist()[0])
        task_index = self.instructions.index(row.tasks[0])
        row = dataclasses.replace(row, task_index=task_index)
        final = self.run_dir / STAGING / f"episode-{e:06d}"
        tmp = self.run_dir / STAGING / f".tmp-{e:06d}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            data = self._path(DATA_PATH, e)
            if data.exists():
                table = read_parquet(data)
                pq.write_table(table.drop_columns(["index"]), tmp / "data.parquet")
            else:  # recorded before padding frames existed: no data file for an episode without steps
                dims = (self.features["observation.state"]["shape"][0], self.features["action"]["shape"][0])
                pq.write_table(padding_frame(*dims, e, task_index), tmp / "data.parquet")
                row = dataclasses.replace(row, steps=0)
            for key in self.video_keys:
                video = self._path(VIDEO_PATH, e, video_key=key)
                if video.exists():
                    os.link(video, tmp / f"{key}.mp4")
            for kind in self.artifact_kinds:
                if getattr(row, kind) is not None and is_regular(art := self._path(ARTIFACT_PATHS[kind], e)):
                    os.link(art, tmp / f"{kind}.jsonl")
            (tmp / "episode.json").write_text(json.dumps(row.to_staged()))
            for f in tmp.iterdir():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(final.parent)

    # ---- committing ----------------------------------------------------------------------------------------
    def promote_ready(self) -> list[int]:
        """Commit every staged episode that is next in order. Returns the episode indices committed."""
        done = []
        while self.committed in self.staged():
            e = self.committed
            staged = self.run_dir / STAGING / f"episode-{e:06d}"
            row = EpisodeRow.from_row(read_regular_json(staged / "episode.json"))
            videos = {k: staged / f"{k}.mp4" for k in self.video_keys if is_regular(staged / f"{k}.mp4")}
            videos.update({k: staged / f"{k}.jsonl" for k in ARTIFACT_PATHS if is_regular(staged / f"{k}.jsonl")})
            self._commit(e, read_parquet(staged / "data.parquet"), row, videos)
            remove_staged_dir(staged, self.video_keys)
            done.append(e)
        if done:
            self._write_info()
        return done

    def commit_record(self, rec: EpisodeRecord, render_failure: str | None) -> bool:
        """Commit an episode that ran in this process: directly when it is next in order, else via staging.

        The direct path writes the final files once (no staged copy to re-read); the result on disk is the same.
        Returns False if the episode was already committed.
        """
        e = rec.planned.episode_index
        if e < self.committed:
            return False
        if e != self.committed or is_real_dir(self.run_dir / STAGING / f"episode-{e:06d}"):
            staged = stage_episode(self.run_dir, rec, self.fps, render_failure)
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
        self._commit(e, episode_table(rec, self.fps), episode_row(rec, render_failure), videos)
        self._write_info()
        return True

    def _commit(self, e: int, table: pa.Table, row: EpisodeRow, videos: dict[str, Path]) -> None:
        """Write episode ``e``'s data file, place its videos and artifacts (``videos`` holds both: video key or
        artifact kind -> file), then its meta row (the commit point)."""
        n = table.num_rows
        start = sum(self.lengths)
        if "policy.hold" in self.features and "policy.hold" not in table.column_names:
            table = with_delay_columns(table)  # an episode that could not start, in a run with --latency
        table = table.append_column("index", pa.array(np.arange(start, start + n, dtype=np.int64)))
        atomic_write_parquet(self._path(DATA_PATH, e), table)  # never 0 rows: see the padding frame (record.lerobot)
        for kind in ARTIFACT_PATHS:
            src = videos.get(kind)
            if src is not None:
                _place(src, self._path(ARTIFACT_PATHS[kind], e))
        spans: dict[str, VideoSpan] = {}
        for key in self.video_keys:
            src = videos.get(key)
            if src is None and row.steps == 0:  # the padding frame's video: one black frame
                src = self._path(VIDEO_PATH, e, video_key=key)
                encode_video(src, [np.zeros(self.features[key]["shape"], dtype=np.uint8)], self.fps)
            if src is not None:
                _place(src, self._path(VIDEO_PATH, e, video_key=key))
                spans[key] = VideoSpan(*chunk_file(e), 0.0, n / self.fps)
        assert row.task_index is not None  # a staged row: the writer staged it, the staged check read it
        meta = row.committed([self.instructions[row.task_index]], n, chunk_file(e), start, spans)
        # a run recorded before a column existed: null
        table_row = pa.Table.from_pylist([meta.to_row(self.video_keys)], schema=self._meta_schema())
        atomic_write_parquet(self._path(EPISODES_PATH, e), table_row)
        # ---- commit point passed ----
        self.lengths.append(n)
        self._add_stats(table)

    def _meta_schema(self) -> pa.Schema:
        return meta_schema(self.video_keys)

    def _add_stats(self, table: pa.Table) -> None:
        add_stats(self.stats, table)

    def _write_info(self) -> None:
        # derived from meta/episodes and the data files, and rebuilt whenever a writer opens the directory
        info = info_document(self.robot_type, self.lengths, len(self.instructions), self.fps, self.features)
        atomic_write_json(self.run_dir / "meta" / "info.json", info, durable=False)

    def write_videos_index(self) -> None:
        """Rewrite ``meta/videos_index.json`` (see :func:`rollbench.record.derived.write_videos_index`)."""
        write_videos_index(self.run_dir, self.fps, self.video_keys, self.committed)

    def write_stats(self) -> None:
        """Rewrite ``meta/stats.json`` (LeRobot's normalisation stats) from the committed episodes.

        Called when the writer opens and when a run ends, not per episode: stats are only read for training, and a
        crashed run's stats are rebuilt the next time the directory is opened (resume).
        """
        stats = {k: s for k, st in self.stats.items() if (s := st.to_json()) is not None}
        atomic_write_json(self.run_dir / "meta" / "stats.json", stats, durable=False)
