"""What a run directory holds on disk, read without a writer: its writer's namespace (no link, FIFO or misplaced node),
files without an episode row, staged episodes (their index, removal), and LeRobot's per-feature statistics as they
accumulate (the committed episodes themselves: :mod:`rollbench.record.committed`).
Used by :class:`rollbench.record.writer.DatasetWriter` and by the run's start-up checks (:mod:`rollbench.api`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rollbench.core.contracts import ConfigError
from rollbench.core.walk import Bounds, TreeEntry, walk_tree
from rollbench.record.files import is_inside, open_parquet, resolve_inside
from rollbench.record.lerobot import ARTIFACT_PATHS, CHUNKS_SIZE, STAGING
from rollbench.record.safe_files import MAX_DEPTH, MAX_ENTRIES, is_regular, run_files


class FeatureStats:
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


# the top-level names of a run directory that rollbench's writer creates and repairs (its namespace); a user's own
# files beside them (notes/, a README) are never written nor deleted, so they are not checked
WRITER_NAMES = (
    *("data", "meta", "videos", STAGING, "run.json", "run.live.json", "run.lock"),
    *sorted({t.split("/")[0] for t in ARTIFACT_PATHS.values()}),
)


def foreign_entries(run_dir: Path, limit: int = MAX_ENTRIES) -> list[tuple[Path, str]]:
    """Every entry in the writer's namespace of ``run_dir`` (:data:`WRITER_NAMES`, and the writer's temporaries at
    the top level) that is neither a regular file nor a directory: ``(path, what it is)``, path order. Symbolic
    links (leading inside the run or out, dangling or not), FIFOs, sockets and devices: the writer creates none of
    them. Walked with ``lstat`` only (:func:`rollbench.core.walk.walk_tree`: nothing is opened but directories,
    nothing followed); ConfigError beyond ``limit`` entries or :data:`MAX_DEPTH` levels."""

    def writers(e: TreeEntry) -> bool:
        return e.depth > 0 or e.name in WRITER_NAMES or (e.name.startswith(".run.") and e.name.endswith(".tmp"))

    tree = walk_tree(run_dir, Bounds(limit, MAX_DEPTH, "refuse"), descend=writers)
    return [(run_dir / e.rel, e.kind) for e in tree.others if writers(e) and not e.is_dir]


_RUN_JSON_TEMP = re.compile(r"\.run\.json\.[a-z0-9_]{8}\.tmp")  # record.files.writer_temps' run.json temporary


def interrupted_start(run_dir: Path) -> bool:
    """True when ``run_dir`` holds only what a writer killed before its first run.json leaves: ``run.lock`` and
    run.json's own temporaries (``.run.json.XXXXXXXX.tmp``), all regular files. The same command starts it afresh
    (the writer removes its temporaries once it holds the lock); anything else there is not a run's start."""
    with os.scandir(run_dir) as entries:  # at most a few entries read: a large directory is no start
        names = [e.name for e in itertools.islice(entries, 2 + MAX_START_TEMPS)]
    return (
        "run.lock" in names
        and len(names) <= 1 + MAX_START_TEMPS
        and all((n == "run.lock" or _RUN_JSON_TEMP.fullmatch(n)) and is_regular(run_dir / n) for n in names)
    )


MAX_START_TEMPS = 8  # run.json temporaries a killed start may leave beside run.lock (one a try, a few tries)
_CHUNK = re.compile(r"chunk-[0-9]{3}")
_CHUNKED = ("data", "meta/episodes", *sorted({t.split("/")[0] for t in ARTIFACT_PATHS.values()}))
_FILES = ("run.json", "run.live.json", "meta/info.json", "meta/stats.json", "meta/tasks.parquet")


def _node(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def misplaced_node(run_dir: Path) -> tuple[Path, str] | None:
    """The first path of the writer's tree whose node type is not the one the writer creates there, as
    ``(path, "a directory" | "a file")`` (what it should be), else None. Directories: ``meta``, the chunked trees
    (``data``, ``meta/episodes``, ``videos/KEY``, ``transcripts``, ``wire``) and their ``chunk-NNN``; regular files:
    run.json, meta's files and every ``file-NNN.*`` of a chunk. A file where ``meta/episodes/chunk-000`` should be
    would hide every committed row from the writer, which would then take the recorded data for leftovers."""
    trees = [run_dir / t for t in _CHUNKED]
    videos = run_dir / "videos"
    for p in (run_dir / "meta", videos, *trees):
        if (m := _node(p)) is not None and not stat.S_ISDIR(m):
            return p, "a directory"
    for p in (run_dir / f for f in _FILES):
        if (m := _node(p)) is not None and stat.S_ISDIR(m):
            return p, "a file"
    if stat.S_ISDIR(_node(videos) or 0):
        for e in sorted(os.scandir(videos), key=lambda e: e.name):
            if e.is_dir(follow_symlinks=False):
                trees.append(Path(e.path))
            elif e.name.startswith("observation.images."):  # a video key's tree (record.lerobot.video_key)
                return Path(e.path), "a directory"
    for tree in trees:
        if not stat.S_ISDIR(_node(tree) or 0):
            continue
        for chunk in sorted(os.scandir(tree), key=lambda e: e.name):
            if not _CHUNK.fullmatch(chunk.name):
                continue
            if not chunk.is_dir(follow_symlinks=False):
                return Path(chunk.path), "a directory"
            for f in sorted(os.scandir(chunk.path), key=lambda e: e.name):
                if f.name.startswith("file-") and f.is_dir(follow_symlinks=False):
                    return Path(f.path), "a file"
    return None


def check_state_files(run_dir: Path) -> None:
    """ConfigError (nothing changed) unless the writer may open ``run_dir``: ``run.lock`` must be a regular file,
    ``.staging`` a directory, and nothing in the writer's namespace a link (inside or out), FIFO, socket or device
    (:func:`foreign_entries`). The writer creates only regular files and directories and reads, writes and deletes
    by exact name: a link there would be written through (``meta/episodes/chunk-000`` moved and linked back made a
    resume re-run and rewrite recorded episodes), a FIFO would block it or be replaced, so both are refused."""
    for name, kind in (("run.lock", "regular file"), (".staging", "directory")):
        p = run_dir / name
        if (p.exists() or p.is_symlink()) and not (p.is_dir() if kind == "directory" else p.is_file()):
            raise ConfigError(
                f"{run_dir} is damaged and cannot be resumed: its {name} is not a {kind}; remove it and run the "
                "command again (nothing was changed)"
            )
    found = foreign_entries(run_dir)
    if found:
        (path, what), more = found[0], f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        if what == "symbolic link" and not is_inside(run_dir, path):
            what = f"link leading outside the run directory (to {os.path.realpath(path)})"
        raise ConfigError(
            f"{path} is a {what}{more}, which rollbench never writes in a run directory; it never writes, deletes or "
            "reads through one: remove it and run the command again (nothing was changed)"
        )
    misplaced = misplaced_node(run_dir)
    if misplaced is not None:
        raise ConfigError(
            f"{run_dir} is damaged and cannot be resumed: {misplaced[0]} is not {misplaced[1]}, which is what "
            "rollbench writes there; nothing was changed (`rollbench grade` reports every problem)"
        )


LEFTOVER_PATTERNS = (
    "data/chunk-[0-9][0-9][0-9]/file-[0-9][0-9][0-9].parquet",
    "videos/*/chunk-[0-9][0-9][0-9]/file-[0-9][0-9][0-9].mp4",
    *(t.split("/chunk-")[0] + "/chunk-[0-9][0-9][0-9]/file-[0-9][0-9][0-9].jsonl" for t in ARTIFACT_PATHS.values()),
)
"""Where an episode's data, video and artifact files lie (one per episode, ``chunk-CCC/file-FFF``)."""


def file_episode(f: Path) -> int:
    """The episode index of a chunked file ``.../chunk-CCC/file-FFF.EXT``."""
    return int(f.parent.name.split("-")[1]) * CHUNKS_SIZE + int(f.stem.split("-")[1])


def rowless_files(run_dir: Path, committed: int) -> list[tuple[int, Path]]:
    """``(episode index, path)`` of every data, video or artifact file (:data:`LEFTOVER_PATTERNS`) at an index at or
    past ``committed``: files without an episode row, in index then path order. An interrupted commit (or take-back)
    leaves them for episode ``committed`` only (the next to commit)."""
    found = ((file_episode(f), f) for p in LEFTOVER_PATTERNS for f in run_files(run_dir, p))
    return sorted((e, f) for e, f in found if e >= committed)


def check_rowless(run_dir: Path, committed: int, planned: int | None = None) -> None:
    """ConfigError (one line naming the files, nothing changed) unless every data, video or artifact file without an
    episode row (:func:`rowless_files`) is one an interrupted commit can leave. Commits (and the retry's take-backs)
    go strictly in episode order, so only episode ``committed``, the next to commit, can hold such files; the writer
    deletes those when it opens. A rowless file of a later episode of the plan (``planned`` episodes; None: no
    bound) is a recorded episode whose row was removed or moved, and the writer would delete or overwrite it (hostile
    round 24, F3: episode 3's data file, only 0..1 committed, was deleted and recorded again without a word); rowless
    files of two or more episodes are damage too. A rowless file past the plan alone is not this run's: the writer
    names it and leaves it (grade names it). Call while holding the run lock (a writer commits between two listings
    otherwise)."""
    found = rowless_files(run_dir, committed)
    later = [(e, f) for e, f in found if e > committed]
    if not any(planned is None or e < planned for e, _ in later) and len({e for e, _ in found}) < 2:
        return
    names = [str(f.relative_to(run_dir)) for _, f in later]
    listed = ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")
    raise ConfigError(
        f"{run_dir} is damaged and cannot be resumed: {listed} {'has' if len(names) == 1 else 'have'} no episode "
        f"row, but an interrupted commit leaves files without a row only for episode {committed}, the next to "
        f"commit, so episode rows were removed or moved; nothing was changed (`rollbench grade {run_dir}` reports "
        "every problem)"
    )


def recorded_artifact_kinds(run_dir: Path) -> set[str]:
    """The artifact kinds (:data:`~rollbench.record.lerobot.ARTIFACT_PATHS`) some committed episode row names (only
    those columns are read)."""
    kinds: set[str] = set()
    for f in run_files(run_dir, "meta/episodes/chunk-*/file-*.parquet"):
        with contextlib.suppress(OSError, ValueError, KeyError, pa.ArrowException):
            with open_parquet(resolve_inside(run_dir, f), run_dir) as pf:
                named = {k: c for k in ARTIFACT_PATHS if (c := f"rollbench/{k}") in pf.schema_arrow.names}
                t = pf.read(columns=list(named.values()))
            kinds |= {k for k, c in named.items() if t[c].null_count < t.num_rows}
    return kinds


_MKSTEMP_MP4 = re.compile(r"[a-z0-9_]{8}\.mp4")  # encode_video's temporary: mkstemp's 8 characters, its suffix
STAGED_TMP = re.compile(r"\.tmp-[0-9]{6}-([0-9a-f]{8}|discarded)")  # stage_episode's, _restage's, discard_staged's


def is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def staged_file(name: str, video_keys: Sequence[str]) -> bool:
    """True for the name of a file the writer puts in a staged episode directory (or its partial video)."""
    own = {"data.parquet", "episode.json", *(f"{k}.mp4" for k in video_keys), *(f"{k}.jsonl" for k in ARTIFACT_PATHS)}
    if name in own:
        return True
    target, _, rest = name.removeprefix(".").rpartition(".mp4.")
    return name.startswith(".") and f"{target}.mp4" in own and _MKSTEMP_MP4.fullmatch(rest) is not None


def remove_staged_dir(d: Path, video_keys: Sequence[str]) -> None:
    """Remove staged episode directory ``d`` (a real directory, not a link): the regular files the writer puts
    there, then the directory if that emptied it. Nothing is opened (a FIFO never blocks), nothing followed, and
    anything else in it stays (named on stderr), so nothing the writer did not write is deleted."""
    if not is_real_dir(d):
        return
    foreign = []
    for entry in sorted(os.scandir(d), key=lambda e: e.name):
        if entry.is_file(follow_symlinks=False) and staged_file(entry.name, video_keys):
            os.unlink(entry.path)
        else:
            foreign.append(entry.name)
    if foreign:
        print(f"warning: {d} holds {', '.join(foreign)}, not rollbench's; left in place", file=sys.stderr)
        return
    with contextlib.suppress(OSError):
        d.rmdir()
