"""The runs a dashboard serves from its ``--root`` directories: discovery, graded summaries (cached), artifacts.

Every number comes from :func:`rollbench.grading.grade.grade` over the run directory (``check_videos=False``: decoding
every video of a thousand runs per listing would be too slow; ``rollbench grade`` checks frame counts). A summary is
cached under the run's *signature* (:func:`run_signature`): the path, size, mtime and inode of every regular file in
the run directory, so a change to any file grade reads re-grades the run, and an unchanged one costs one ``lstat`` per
entry (no file is read or hashed).

Artifact paths are read from what the run recorded, never guessed: a video is ``info.json``'s ``video_path``
template filled with the episode row's ``videos/KEY/chunk_index`` and ``file_index`` (the clip is the episode row's
``from_timestamp``..``to_timestamp`` of that file); a transcript is the episode row's optional
``rollbench/transcript`` column, a path relative to the run directory. A path that resolves (symlinks included)
outside the run directory is refused. Nothing here writes inside a run directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import math
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollbench.core.contracts import RollbenchError
from rollbench.core.grade_model import GradeDocument
from rollbench.core.identity import RunIdentity
from rollbench.core.jsonfile import read_json
from rollbench.core.runlog_model import RunLog
from rollbench.core.walk import Bounds, walk_tree
from rollbench.dashboard.review_episode import Artifacts, ReviewEpisode, VideoLink
from rollbench.grading.files import fill_template, read_info
from rollbench.grading.grade import grade, load_run_log
from rollbench.record.episode_row import EpisodeRow
from rollbench.record.files import atomic_write_json, read_parquet
from rollbench.record.runlog import find_run_dirs
from rollbench.record.safe_files import (
    MAX_LIVE_BYTES,
    UnsafeFile,
    check_no_link_below,
    is_regular,
    read_regular_json,
    run_files,
)

CACHE_VERSION = 4  # of the on-disk cache of graded records (bump when its JSON changes; 4: video sizes)


def inside(path: Path, base: Path) -> Path | None:
    """``path`` if it is a regular file under ``base`` reached without any symbolic link (the rules of
    :mod:`rollbench.record.safe_files`), else None."""
    try:
        check_no_link_below(base, path)
    except UnsafeFile:
        return None
    return path if is_regular(path) else None


Signature = tuple[tuple[str, int, int, int], ...]
# a run directory with more entries than this, or deeper, is signed by the files of its first directories only
SIGNATURE_BOUNDS = Bounds(max_entries=1_000_000, max_depth=64, on_excess="truncate")
NOT_GRADED = frozenset({"run.live.json"})  # rewritten every few seconds while a run runs; grade never reads it


def run_signature(run_dir: Path) -> Signature:
    """(path relative to ``run_dir``, size, mtime_ns, inode) of every regular file below ``run_dir`` but
    ``run.live.json``, sorted by path: one ``lstat`` per entry (:func:`rollbench.core.walk.walk_tree`, within
    :data:`SIGNATURE_BOUNDS`), links neither followed nor listed, nothing hashed.

    It covers every file grade reads (``run.json``, ``meta/`` with ``meta/episodes/``, ``data/``, transcripts,
    videos), so any rewrite, replacement, addition or removal re-grades the run; an edit that keeps a file's size,
    mtime and inode is not seen."""
    listing = walk_tree(run_dir, SIGNATURE_BOUNDS)
    return tuple(sorted((f.rel, f.size, f.mtime_ns, f.inode) for f in listing.files if f.rel not in NOT_GRADED))


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunRecord:
    """One local run: identity, directory, and what was graded and read from its files (cached)."""

    identity: RunIdentity
    run_dir: Path
    signature: Signature
    log: RunLog
    result: GradeDocument
    episodes: list[ReviewEpisode]  # grade's episodes + instruction + artifacts, by position
    cameras: list[str]
    fps: float | None
    error: str | None = None
    by_index: dict[int, ReviewEpisode] = field(default_factory=dict)


def _artifacts(run_dir: Path, info: dict[str, Any], row: EpisodeRow | None, cameras: list[str]) -> Artifacts:
    """The episode's video, transcript and step-file links (none for an episode without a readable row)."""
    if row is None:
        return Artifacts({}, None, None)
    videos: dict[str, VideoLink] = {}
    template = info.get("video_path")
    for cam in cameras:
        key = f"observation.images.{cam}"
        span = row.video(key)
        if not template or span.chunk_index is None or span.file_index is None:
            continue
        try:
            rel = fill_template(template, video_key=key, chunk_index=span.chunk_index, file_index=span.file_index)
        except ValueError:  # grade names the template
            continue
        found = inside(run_dir / rel, run_dir)
        size = None
        with contextlib.suppress(OSError):  # removed since: not ready
            size = os.lstat(found).st_size if found is not None else None
        videos[cam] = VideoLink(
            path=rel, ready=size is not None, from_s=span.from_timestamp, to_s=span.to_timestamp, size=size
        )
    data_rel = None
    if info.get("data_path") and row.data_chunk_index is not None and row.length:
        with contextlib.suppress(ValueError):  # a damaged data_path: no link to the step file
            data_rel = fill_template(
                info["data_path"], chunk_index=row.data_chunk_index, file_index=row.data_file_index
            )
    return Artifacts(videos, row.transcript, data_rel)


def read_run(run_dir: Path) -> RunRecord:
    """Grade ``run_dir`` and read its episode rows' artifact paths. Raises RollbenchError if it is not a run."""
    signature = run_signature(run_dir)
    log = load_run_log(run_dir)
    identity = RunIdentity.from_run_log(log, run_dir)
    result = grade(run_dir, check_videos=False)
    info = read_info(run_dir, [])  # regular file inside the run, else {} (grade reported why)
    cameras = [
        k.removeprefix("observation.images.")
        for k, v in info.get("features", {}).items()
        if v.get("dtype") == "video" and k.startswith("observation.images.")
    ]
    rows: dict[int, EpisodeRow] = {}
    for f in run_files(run_dir, "meta/episodes/chunk-*/file-*.parquet"):
        try:
            for r in read_parquet(f).to_pylist():
                row = EpisodeRow.from_row(r)
                rows[row.episode_index] = row
        except Exception:  # grade reported the unreadable file or the damaged row as a violation
            continue
    episodes = []
    for e in result.episodes:
        found = rows.get(e.episode_index)
        instruction = found.instruction if found is not None else None
        episodes.append(ReviewEpisode(e, instruction, _artifacts(run_dir, info, found, cameras)))
    fps = info.get("fps")  # grade named a bad one; the pages then use their default
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps) or fps <= 0:
        fps = None
    rec = RunRecord(identity, run_dir, signature, log, result, episodes, cameras, fps)
    rec.by_index = {ep.episode_index: ep for ep in episodes}
    return rec


def live_progress(run_dir: Path, stale_after_s: float, now: float | None = None) -> dict[str, Any] | None:
    """``run.live.json`` (progress of a running run) with ``stale``: not rewritten for ``stale_after_s`` seconds; a
    count or ``eta_s`` of another JSON type is None (unknown)."""
    path = os.path.join(os.fspath(run_dir), "run.live.json")
    try:
        mtime = os.stat(path).st_mtime
        live = read_regular_json(Path(path), run_dir, max_bytes=MAX_LIVE_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(live, dict):
        return None
    age = (now or time.time()) - mtime

    def counted(v: Any, kind: type | tuple[type, ...] = int) -> Any:  # a value of another type is unknown (None)
        return v if isinstance(v, kind) and not isinstance(v, bool) else None

    return {
        "episodes_done": counted(live.get("episodes_done")),
        "episodes_total": counted(live.get("episodes_total")),
        "eta_s": counted(live.get("eta_s"), (int, float)),
        "updated": _iso(mtime),
        "age_s": round(age, 1),
        "stale": age > stale_after_s,
    }


class Catalog:
    """The runs below ``roots``; thread-safe; re-grades a run only when its signature changes, and re-reads a run
    that could not be read only then too (it is named in ``errors`` on each listing from memory).

    A listing grades stale or new runs itself for up to ``sync_budget_s`` seconds, then hands the rest to one
    background thread and reports them as *pending* (so a first listing of a thousand runs answers at once and fills
    in as they are graded). With ``cache_dir``, graded records are also kept on disk (``cache_dir/graded/``, keyed
    by run directory, checked against the signature), so a restarted dashboard does not re-grade unchanged runs.
    """

    def __init__(
        self,
        roots: list[Path],
        stale_after_s: float = 120.0,
        cache_dir: Path | None = None,
        sync_budget_s: float = 2.0,
    ) -> None:
        self.roots = [r.resolve() for r in roots]
        self.stale_after_s = stale_after_s
        self.cache_dir = cache_dir / "graded" if cache_dir else None
        self.sync_budget_s = sync_budget_s
        self._cache: dict[Path, RunRecord] = {}
        self._unreadable: dict[Path, tuple[Signature, str]] = {}  # a run that cannot be read, until its files change
        self._index: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[Path] = queue.Queue()
        self._queued: set[Path] = set()
        self._worker: threading.Thread | None = None
        self.errors: list[str] = []
        self._version = importlib.metadata.version("rollbench")  # graded records of another version are not reused

    def _find(self) -> list[Path]:
        return find_run_dirs(self.roots)

    def records(self) -> tuple[list[RunRecord], list[RunIdentity]]:
        """Every graded run below the roots, and the identities of runs still being graded (pending).

        Duplicated identities: the first root wins; the others are reported in ``errors``."""
        out: dict[str, RunRecord] = {}
        pending: list[RunIdentity] = []
        errors: list[str] = []
        deadline = time.monotonic() + self.sync_budget_s
        for run_dir in self._find():
            with self._lock:
                queued = run_dir in self._queued
            rec = self._record(run_dir, errors, grade_now=not queued and time.monotonic() < deadline)
            if rec is None:
                with self._lock:
                    waiting = run_dir in self._queued
                if waiting:
                    with contextlib.suppress(RollbenchError, OSError, ValueError):
                        pending.append(RunIdentity.from_run_log(load_run_log(run_dir), run_dir))
                continue
            if rec.identity.key in out:
                errors.append(
                    f"{run_dir}: identity {rec.identity.key} is already served from {out[rec.identity.key].run_dir}"
                )
                continue
            out[rec.identity.key] = rec
        with self._lock:
            self.errors = errors
            self._index = {k: r.run_dir for k, r in out.items()}
        return list(out.values()), pending

    def _cache_file(self, run_dir: Path) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(f"{CACHE_VERSION}:{self._version}:{run_dir}".encode()).hexdigest()[:40]
        return self.cache_dir / f"{digest}.json"

    def _record(self, run_dir: Path, errors: list[str], grade_now: bool = True) -> RunRecord | None:
        sig = run_signature(run_dir)
        with self._lock:
            cached = self._cache.get(run_dir)
            known = self._unreadable.get(run_dir)
        if cached is not None and cached.signature == sig:
            return cached
        if known is not None and known[0] == sig:  # named again, never read again (hostile round 15, F7)
            errors.append(known[1])
            return None
        stored = self._load_stored(run_dir, sig)
        if stored is not None:
            with self._lock:
                self._cache[run_dir] = stored
            return stored
        if not grade_now:
            self._enqueue(run_dir)
            return None
        try:
            rec = read_run(run_dir)
        except (RollbenchError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # one run only
            why = f"{run_dir}: cannot read the run ({type(exc).__name__}: {exc})"
            errors.append(why)
            with self._lock:
                self._unreadable[run_dir] = (sig, why)
            return None
        with self._lock:
            self._cache[run_dir] = rec
            self._unreadable.pop(run_dir, None)
        self._store(rec)
        return rec

    def _load_stored(self, run_dir: Path, sig: Any) -> RunRecord | None:
        path = self._cache_file(run_dir)
        if path is None or not path.is_file():
            return None
        try:
            doc = read_json(path, "cache file")
            if doc["run_dir"] != str(run_dir) or tuple(map(tuple, doc["signature"])) != sig:
                return None
            rec = RunRecord(
                RunIdentity(**doc["identity"]),
                run_dir,
                sig,
                RunLog.model_validate(doc["log"]),
                GradeDocument.model_validate(doc["result"]),
                [ReviewEpisode.from_json(ep) for ep in doc["episodes"]],
                doc["cameras"],
                doc["fps"],
            )
        except (OSError, ValueError, KeyError, TypeError, RollbenchError):  # pydantic's ValidationError is a ValueError
            return None
        rec.by_index = {ep.episode_index: ep for ep in rec.episodes}
        return rec

    def _store(self, rec: RunRecord) -> None:
        path = self._cache_file(rec.run_dir)
        if path is None:
            return
        doc = {
            "run_dir": str(rec.run_dir),
            "signature": rec.signature,
            "identity": rec.identity.to_dict(),
            "log": rec.log.to_json(),  # the whole run.json: a cached run reads as the run read from its files
            "result": rec.result.to_json(),
            "episodes": [ep.to_json() for ep in rec.episodes],
            "cameras": rec.cameras,
            "fps": rec.fps,
        }
        with contextlib.suppress(OSError, TypeError, ValueError):
            atomic_write_json(path, doc, durable=False)

    def _enqueue(self, run_dir: Path) -> None:
        with self._lock:
            if run_dir in self._queued:
                return
            self._queued.add(run_dir)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._grade_queued, name="rollbench-grader", daemon=True)
                self._worker.start()
        self._queue.put(run_dir)

    def _grade_queued(self) -> None:
        while True:
            try:
                run_dir = self._queue.get(timeout=5)
            except queue.Empty:
                return
            errors: list[str] = []
            try:
                self._record(run_dir, errors)
            finally:
                with self._lock:
                    self._queued.discard(run_dir)

    def get(self, identity: RunIdentity) -> RunRecord | None:
        with self._lock:
            run_dir = self._index.get(identity.key)
        if run_dir is not None:
            rec = self._record(run_dir, [])
            if rec is not None and rec.identity == identity:
                return rec
        records, _ = self.records()
        return next((r for r in records if r.identity == identity), None)

    def steps(self, rec: RunRecord, episode_index: int) -> dict[str, list[Any]]:
        """The episode's per-step ``timestamp``, ``next.reward``, ``next.success`` and ``action`` (lists; action rows
        are lists of floats), read from the data file the episode row names; empty lists when it has no steps."""
        ep = rec.by_index.get(episode_index)
        rel = ep.artifacts.data if ep else None
        path = inside(rec.run_dir / rel, rec.run_dir) if rel else None
        if path is None:
            return {"timestamp": [], "reward": [], "success": [], "action": []}
        table = read_parquet(path, columns=["episode_index", "timestamp", "next.reward", "next.success", "action"])
        rows = [r for r in table.to_pylist() if r["episode_index"] == episode_index]
        return {
            "timestamp": [r["timestamp"] for r in rows],
            "reward": [r["next.reward"] for r in rows],
            "success": [bool(r["next.success"]) for r in rows],
            "action": [list(r["action"]) for r in rows],
        }
