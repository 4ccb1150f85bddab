"""What :mod:`rollbench.grading.grade` reads from a run directory, read so that a damaged directory gives a report.

Every reader here turns damage into a sentence appended to ``violations`` (grade's list of broken invariants) and
returns what is still usable; none raises for a damaged file. Nothing is read through a link that leads outside the
run directory (:func:`rollbench.record.files.is_inside`): such a link is a violation and the files behind it are
left unread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from rollbench.core.jsonfile import read_json
from rollbench.core.types import ConfigError
from rollbench.record.files import escaping_links, is_inside

# columns of meta/episodes that grading reads (LeRobot's and rollbench's own; see record.lerobot.EPISODE_FIELDS)
REQUIRED_EPISODE_COLUMNS = (
    "episode_index",
    "length",
    "dataset_from_index",
    "dataset_to_index",
    "rollbench/task",
    "rollbench/trial",
    "rollbench/seed",
    "rollbench/initial_state",
    "rollbench/max_steps",
    "rollbench/success_rule",
    "rollbench/success",
    "rollbench/success_at_reset",
    "rollbench/termination_reason",
    "rollbench/error",
    "rollbench/render_fault",
)


def link_violations(run_dir: Path) -> list[str]:
    """One sentence per link under ``run_dir`` that leads outside it (its files are not read)."""
    return [
        f"{link.relative_to(run_dir)} is a link leading outside the run directory (to {target}); not read"
        for link, target in escaping_links(run_dir)
    ]


def parquet_files(run_dir: Path, pattern: str) -> list[Path]:
    """Files matching ``pattern`` under ``run_dir``, in path order, without those reached through a link leading
    outside (see link_violations)."""
    return [f for f in sorted(run_dir.glob(pattern)) if is_inside(run_dir, f)]


def readable_parquet(files: list[Path], violations: list[str]) -> list[Path]:
    """The ``files`` whose parquet footer reads; the others are named in ``violations`` (unreadable)."""
    ok = []
    for f in files:
        try:
            pq.ParquetFile(f).metadata  # noqa: B018 - reading the footer is the check
            ok.append(f)
        except Exception as exc:
            violations.append(f"file {f} is unreadable ({type(exc).__name__}: {exc})")
    return ok


def read_info(run_dir: Path, violations: list[str]) -> dict[str, Any]:
    """``meta/info.json`` as a dict (``{}`` when missing or damaged, with the reason in ``violations``).

    ``features`` is guaranteed to be a dict of dicts in what is returned (dropped with a violation otherwise).
    """
    path = run_dir / "meta" / "info.json"
    if not (path.exists() or path.is_symlink()):
        violations.append("meta/info.json is missing")
        return {}
    if not is_inside(run_dir, path):
        return {}  # reported by link_violations
    try:
        info = read_json(path, "meta/info.json")
    except ConfigError as exc:  # "meta/info.json is not readable JSON (...)", "... is a FIFO, not a regular file"
        violations.append(str(exc).replace(f" {path}", "", 1))
        return {}
    if not isinstance(info, dict):
        violations.append(f"meta/info.json is not a JSON object (it holds a {type(info).__name__})")
        return {}
    features = info.get("features")
    if not isinstance(features, dict) or not all(isinstance(v, dict) for v in features.values()):
        violations.append("meta/info.json has no valid 'features' object")
        info = {**info, "features": {}}
    return info


def missing_episode_columns(columns: list[str]) -> list[str]:
    """The columns grading needs that the episode rows lack."""
    return [c for c in REQUIRED_EPISODE_COLUMNS if c not in columns]


def video_violation(run_dir: Path, info: dict[str, Any], m: dict[str, Any], key: str, length: int) -> str | None:
    """None when episode ``m``'s video ``key`` exists inside the run and decodes to ``length`` frames; else the
    sentence naming the file and what is wrong with it (missing, unreadable, outside, wrong frame count)."""
    from rollbench.record.files import count_video_frames

    e = m["episode_index"]
    if m.get(f"videos/{key}/file_index") is None:
        return f"episode {e}: no video for {key}"
    template = info.get("video_path")
    if not isinstance(template, str):
        return f"episode {e}: meta/info.json has no video_path, so its {key} video cannot be found"
    try:
        rel = template.format(
            video_key=key, chunk_index=m[f"videos/{key}/chunk_index"], file_index=m[f"videos/{key}/file_index"]
        )
    except (KeyError, ValueError, IndexError) as exc:
        return f"episode {e}: meta/info.json's video_path {template!r} cannot be filled in ({exc})"
    path = run_dir / rel
    if not (path.exists() or path.is_symlink()):
        return f"episode {e}: video file {rel} is missing"
    if not is_inside(run_dir, path):
        return f"episode {e}: video file {rel} leads outside the run directory; not read"
    try:
        frames = count_video_frames(path)
    except Exception as exc:
        return f"episode {e}: video file {rel} is unreadable ({type(exc).__name__}: {exc})"
    if frames != length:
        return f"episode {e}: video file {rel} ({key}) has {frames} frames for {length} steps"
    return None


def run_timing(log: dict[str, Any], episode_times: list[float | None]) -> dict[str, Any]:
    """Wall time of a run, from disk: ``eval_wall_time_s`` = the summed ``elapsed_s`` of every finished invocation
    in run.json's ``executions`` (None when none is recorded), ``invocations`` = how many, ``episode_time_s`` = the
    summed per-episode wall times of the graded episodes (``rollbench/wall_time_s``: reset to last step, in the
    process that ran the episode; with K workers it can exceed the wall time). Seconds; the wall time is rounded to
    milliseconds, as each ``elapsed_s`` is (a sum of such floats is not exact). An invocation killed by SIGKILL
    (or a power loss) recorded no ``elapsed_s``: its time is not in ``eval_wall_time_s``, it is counted in
    ``invocations_unrecorded``, and the episodes it committed are in ``episode_time_s``."""
    executions = [x for x in log.get("executions") or [] if isinstance(x, dict)]
    runs = [x for x in executions if isinstance(x.get("elapsed_s"), float)]
    times = [t for t in episode_times if isinstance(t, float)]
    return {
        "eval_wall_time_s": round(sum(x["elapsed_s"] for x in runs), 3) if runs else None,  # each is in ms
        "invocations": len(runs),
        "invocations_unrecorded": len(executions) - len(runs),
        "episode_time_s": sum(times),
    }
