"""What a run directory holds on disk, read without a writer: the committed episodes' lengths (for resuming), staged
episodes (their index, and whether one reads back whole), and LeRobot's per-feature statistics as they accumulate.
Used by :class:`rollbench.record.writer.DatasetWriter` and by the run's start-up checks (:mod:`rollbench.api`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.core.contracts import ConfigError
from rollbench.record.files import read_parquet, resolve_inside
from rollbench.record.lerobot import DATA_PATH, chunk_file
from rollbench.record.safe_files import open_regular, read_regular_json, run_files


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


def check_state_files(run_dir: Path) -> None:
    """ConfigError (nothing changed) when the writer's own state files are of the wrong kind: ``run.lock`` not a
    regular file, ``.staging`` not a directory (a resume would crash on them)."""
    for name, kind in (("run.lock", "regular file"), (".staging", "directory")):
        p = run_dir / name
        if (p.exists() or p.is_symlink()) and not (p.is_dir() if kind == "directory" else p.is_file()):
            raise ConfigError(f"{run_dir} is damaged and cannot be resumed: its {name} is not a {kind}")


def committed_lengths(run_dir: Path) -> list[int]:
    """Lengths (steps) of the committed episodes ``0..k-1`` of ``run_dir``, read from ``meta/episodes``.

    Raises ConfigError (one line, nothing changed) when the committed episodes cannot be resumed from: an unreadable
    episode row file, duplicate or non-contiguous episode rows, a data file missing, unreadable or of another length
    than its row says. Commits happen strictly in episode order, so anything else was damaged or edited outside
    rollbench; ``rollbench grade`` reports every problem.
    """

    def damaged(why: str) -> ConfigError:
        return ConfigError(
            f"{run_dir} is damaged and cannot be resumed: {why}; nothing was changed "
            f"(`rollbench grade {run_dir}` reports every problem)"
        )

    found: dict[int, int] = {}
    for f in run_files(run_dir, "meta/episodes/chunk-*/file-*.parquet"):
        try:
            t = read_parquet(resolve_inside(run_dir, f), columns=["episode_index", "length"])
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            raise damaged(f"episode row file {f.relative_to(run_dir)} is unreadable ({type(exc).__name__})") from None
        missing = [c for c in ("episode_index", "length") if c not in t.column_names]
        if missing:
            raise damaged(f"episode row file {f.relative_to(run_dir)} has no column {', '.join(missing)}")
        for e, n in zip(t["episode_index"].to_pylist(), t["length"].to_pylist(), strict=True):
            if not (isinstance(e, int) and isinstance(n, int) and e >= 0 and n >= 0):
                raise damaged(f"episode row file {f.relative_to(run_dir)} has episode_index {e!r}, length {n!r}")
            if e in found:
                raise damaged(f"episode {e} has more than one episode row")
            found[e] = n
    lengths = []
    for e in range(len(found)):
        if e not in found:
            raise damaged(f"episode {e} has no episode row but episode {max(found)} has one")
        lengths.append(found[e])
    for e, n in enumerate(lengths):
        if not n:
            continue
        c, i = chunk_file(e)
        path = run_dir / DATA_PATH.format(chunk_index=c, file_index=i)
        try:
            with open_regular(resolve_inside(run_dir, path), run_dir) as raw:
                rows = pq.ParquetFile(raw).metadata.num_rows
        except FileNotFoundError:
            raise damaged(f"episode {e} has no data file {path.relative_to(run_dir)}") from None
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise damaged(f"data file {path.relative_to(run_dir)} is unreadable ({type(exc).__name__})") from None
        if rows != n:
            raise damaged(f"data file {path.relative_to(run_dir)} holds {rows} rows but episode {e} has {n} steps")
    return lengths


def staged_index(name: str) -> int | None:
    """The episode index of a staged episode directory ``episode-EEEEEE``, else None (not rollbench's)."""
    digits = name.removeprefix("episode-")
    return int(digits) if name.startswith("episode-") and digits.isdigit() else None


def staged_damage(staged: Path) -> str | None:
    """Why the staged episode directory ``staged`` does not read back whole, or None (see
    :meth:`rollbench.record.writer.DatasetWriter._remove_damaged_staged`)."""
    try:
        row = read_regular_json(staged / "episode.json")
        length = int(row["length"])
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
        return f"episode.json: {type(exc).__name__}: {exc}"
    try:
        with open_regular(staged / "data.parquet") as raw:
            rows = pq.ParquetFile(raw).metadata.num_rows
    except Exception as exc:  # pyarrow raises several types for a cut or empty file
        return f"data.parquet: {type(exc).__name__}: {exc}"
    if rows != max(length, 1):
        return f"data.parquet holds {rows} rows, its episode.json says length {length}"
    empty = sorted(f.name for f in staged.iterdir() if f.suffix in (".mp4", ".jsonl") and f.lstat().st_size == 0)
    return f"empty files: {', '.join(empty)}" if empty else None
