"""The runs a dashboard serves from its ``--root`` directories: discovery, graded summaries (cached), artifacts.

Every number comes from :func:`rollbench.grading.grade` over the run directory (``check_videos=False``: decoding
every video of a thousand runs per listing would be too slow; ``rollbench grade`` checks frame counts). A summary is
cached under the run's *signature*, the (mtime_ns, size) of ``run.json`` and ``meta/info.json``: the writer rewrites
``info.json`` after every committed episode and ``run.json`` when a run starts or ends, so a changed run is re-graded
and an unchanged one costs two ``stat`` calls.

Artifact paths are read from what the run recorded, never guessed: a video is ``info.json``'s ``video_path``
template filled with the episode row's ``videos/KEY/chunk_index`` and ``file_index`` (the clip is the episode row's
``from_timestamp``..``to_timestamp`` of that file); a transcript is the episode row's optional
``rollbench/transcript`` column, a path relative to the run directory. A path that resolves (symlinks included)
outside the run directory is refused. Nothing here writes inside a run directory.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from rollbench.grading import grade, load_run_log
from rollbench.identity import RunIdentity
from rollbench.types import RollbenchError

MAX_DEPTH = 3  # run directories are found at most this many levels below a root
TRANSCRIPT_COLUMN = "rollbench/transcript"


def inside(path: Path, base: Path) -> Path | None:
    """``path`` resolved (symlinks followed) if it stays within ``base`` (resolved), else None."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    base_real = base.resolve()
    return real if real == base_real or base_real in real.parents else None


def _stat_sig(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def run_signature(run_dir: Path) -> tuple[tuple[int, int], tuple[int, int]]:
    return _stat_sig(run_dir / "run.json"), _stat_sig(run_dir / "meta" / "info.json")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunRecord:
    """One local run: identity, directory, and what was graded and read from its files (cached)."""

    identity: RunIdentity
    run_dir: Path
    signature: tuple[tuple[int, int], tuple[int, int]]
    log: dict[str, Any]
    result: dict[str, Any]
    episodes: list[dict[str, Any]]  # grade's episode rows + instruction + artifacts, by position
    cameras: list[str]
    fps: float | None
    error: str | None = None
    by_index: dict[int, dict[str, Any]] = field(default_factory=dict)


def _artifacts(run_dir: Path, info: dict[str, Any], row: dict[str, Any], cameras: list[str]) -> dict[str, Any]:
    videos: dict[str, Any] = {}
    template = info.get("video_path")
    for cam in cameras:
        key = f"observation.images.{cam}"
        chunk, file = row.get(f"videos/{key}/chunk_index"), row.get(f"videos/{key}/file_index")
        if not template or chunk is None or file is None:
            continue
        rel = template.format(video_key=key, chunk_index=chunk, file_index=file)
        videos[cam] = {
            "path": rel,
            "ready": inside(run_dir / rel, run_dir) is not None,
            "from_s": row.get(f"videos/{key}/from_timestamp"),
            "to_s": row.get(f"videos/{key}/to_timestamp"),
        }
    transcript = row.get(TRANSCRIPT_COLUMN)
    data_rel = None
    if info.get("data_path") and row.get("data/chunk_index") is not None and row.get("length"):
        data_rel = info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    return {"videos": videos, "transcript": transcript if isinstance(transcript, str) else None, "data": data_rel}


def read_run(run_dir: Path) -> RunRecord:
    """Grade ``run_dir`` and read its episode rows' artifact paths. Raises RollbenchError if it is not a run."""
    signature = run_signature(run_dir)
    log = load_run_log(run_dir)
    identity = RunIdentity.from_run_log(log, run_dir)
    result = grade(run_dir, check_videos=False)
    info_path = run_dir / "meta" / "info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    cameras = [
        k.removeprefix("observation.images.")
        for k, v in info.get("features", {}).items()
        if v.get("dtype") == "video" and k.startswith("observation.images.")
    ]
    rows: dict[int, dict[str, Any]] = {}
    for f in sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet")):
        try:
            for r in pq.read_table(f).to_pylist():
                rows[int(r["episode_index"])] = r
        except Exception:  # grade reported the unreadable file as a violation
            continue
    episodes = []
    for e in result["episodes"]:
        row = rows.get(e["episode_index"], {})
        ep = dict(e)
        ep["instruction"] = row.get("rollbench/instruction")
        ep["artifacts"] = _artifacts(run_dir, info, row, cameras)
        episodes.append(ep)
    rec = RunRecord(identity, run_dir, signature, log, result, episodes, cameras, info.get("fps"))
    rec.by_index = {ep["episode_index"]: ep for ep in episodes}
    return rec


def live_progress(run_dir: Path, stale_after_s: float, now: float | None = None) -> dict[str, Any] | None:
    """``run.live.json`` (progress of a running run) with ``stale``: not rewritten for ``stale_after_s`` seconds."""
    path = run_dir / "run.live.json"
    try:
        mtime = path.stat().st_mtime
        live = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(live, dict):
        return None
    age = (now or time.time()) - mtime
    return {
        "episodes_done": live.get("episodes_done"),
        "episodes_total": live.get("episodes_total"),
        "eta_s": live.get("eta_s"),
        "updated": _iso(mtime),
        "age_s": round(age, 1),
        "stale": age > stale_after_s,
    }


class Catalog:
    """The runs below ``roots``; thread-safe; re-grades a run only when its signature changes."""

    def __init__(self, roots: list[Path], stale_after_s: float = 120.0) -> None:
        self.roots = [r.resolve() for r in roots]
        self.stale_after_s = stale_after_s
        self._cache: dict[Path, RunRecord] = {}
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def _find(self) -> list[Path]:
        found: list[Path] = []

        def walk(d: Path, depth: int) -> None:
            try:
                entries = sorted(os.scandir(d), key=lambda x: x.name)
            except OSError:
                return
            if any(x.name == "run.json" and x.is_file() for x in entries):
                found.append(d)
                return
            if depth >= MAX_DEPTH:
                return
            for x in entries:
                if x.is_dir(follow_symlinks=False) and not x.name.startswith("."):
                    walk(Path(x.path), depth + 1)

        for root in self.roots:
            walk(root, 0)
        return found

    def records(self) -> list[RunRecord]:
        """Every run below the roots (duplicated identities: the first root wins, the others are in ``errors``)."""
        out: dict[str, RunRecord] = {}
        errors: list[str] = []
        for run_dir in self._find():
            rec = self._record(run_dir, errors)
            if rec is None:
                continue
            if rec.identity.key in out:
                errors.append(
                    f"{run_dir}: identity {rec.identity.key} is already served from {out[rec.identity.key].run_dir}"
                )
                continue
            out[rec.identity.key] = rec
        with self._lock:
            self.errors = errors
        return list(out.values())

    def _record(self, run_dir: Path, errors: list[str]) -> RunRecord | None:
        sig = run_signature(run_dir)
        with self._lock:
            cached = self._cache.get(run_dir)
        if cached is not None and cached.signature == sig:
            return cached
        try:
            rec = read_run(run_dir)
        except (RollbenchError, OSError, ValueError, KeyError, TypeError) as exc:
            errors.append(f"{run_dir}: cannot read the run ({type(exc).__name__}: {exc})")
            return None
        with self._lock:
            self._cache[run_dir] = rec
        return rec

    def get(self, identity: RunIdentity) -> RunRecord | None:
        for rec in self.records():
            if rec.identity == identity:
                return rec
        return None

    def steps(self, rec: RunRecord, episode_index: int) -> dict[str, list[Any]]:
        """The episode's per-step ``timestamp``, ``next.reward``, ``next.success`` and ``action`` (lists; action rows
        are lists of floats), read from the data file the episode row names; empty lists when it has no steps."""
        ep = rec.by_index.get(episode_index)
        rel = ep["artifacts"]["data"] if ep else None
        path = inside(rec.run_dir / rel, rec.run_dir) if rel else None
        if path is None:
            return {"timestamp": [], "reward": [], "success": [], "action": []}
        table = pq.read_table(path, columns=["episode_index", "timestamp", "next.reward", "next.success", "action"])
        rows = [r for r in table.to_pylist() if r["episode_index"] == episode_index]
        return {
            "timestamp": [r["timestamp"] for r in rows],
            "reward": [r["next.reward"] for r in rows],
            "success": [bool(r["next.success"]) for r in rows],
            "action": [list(r["action"]) for r in rows],
        }
