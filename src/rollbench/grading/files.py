"""What :mod:`rollbench.grading.grade` reads from a run directory, read so that a damaged directory gives a report.

Every reader here turns damage into a sentence appended to ``violations`` (grade's list of broken invariants) and
returns what is still usable; none raises for a damaged file. Files are listed and opened only through
:mod:`rollbench.record.safe_files`: regular files, never through a link (a link leading outside the run is a
violation, a link inside is not followed), each file once, never a FIFO, socket or device (each such entry where a
run file is expected is a violation and is not read).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import string
from pathlib import Path
from typing import Any

import pyarrow as pa

from rollbench.core.format import quoted
from rollbench.core.grade_model import Timing
from rollbench.core.runlog_model import RunLog
from rollbench.record.episode_row import EpisodeRow
from rollbench.record.files import escaping_links, is_inside, open_parquet, why_not_read
from rollbench.record.safe_files import (
    UnsafeFile,
    check_no_link_below,
    read_regular_json,
    scan_run_files,
)

MAX_INFO_BYTES = 64 << 20  # meta/info.json: a few KiB for any run rollbench writes

# columns of meta/episodes that grading reads (LeRobot's and rollbench's own; see record.episode_row.EPISODE_FIELDS)
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
    "rollbench/render_failure",
)


def link_violations(run_dir: Path) -> list[str]:
    """One sentence per link under ``run_dir`` that leads outside it (its files are not read)."""
    return [
        f"{link.relative_to(run_dir)} is a link leading outside the run directory (to {target}); not read"
        for link, target in escaping_links(run_dir)
    ]


def parquet_files(run_dir: Path, pattern: str, violations: list[str] | None = None) -> list[Path]:
    """The regular files matching ``pattern`` under ``run_dir``, each once, in path order
    (:func:`~rollbench.record.safe_files.scan_run_files`: links are not followed). A FIFO, socket, device or
    directory in a matching place, and a symbolic link there (to a file, or to a directory that is not a second name
    of one listed beside it), is named in ``violations`` (when given) and left unread; a link leading outside the
    run is named by :func:`link_violations` instead, a hard link to a file already read is not named (it is read
    once)."""
    listing = scan_run_files(run_dir, pattern)
    if violations is not None:
        for path, why in listing.skipped:
            if "hard link" in why or ("symbolic link" in why and not _named_link(run_dir, path, pattern)):
                continue
            rel = path.relative_to(run_dir)
            if "symbolic link" in why:
                why = f"a symbolic link (to {os.readlink(path)}), not a regular file"
            violations.append(f"{rel} is {why}; not read")
    return listing.files


def _named_link(run_dir: Path, link: Path, pattern: str) -> bool:
    """Whether link ``link`` (matching ``pattern``) inside the run is a violation: False for one leading outside
    (:func:`link_violations` names it) and for a directory link to a sibling the pattern lists too (e.g.
    ``data/chunk-001 -> chunk-000``: the same files under a second name, read once)."""
    if not is_inside(run_dir, link):
        return False
    depth = len(link.relative_to(run_dir).parts)
    if depth == len(pattern.split("/")):
        return True  # a link where a file is expected
    target = Path(os.path.realpath(link))
    segment = pattern.split("/")[depth - 1]
    return not (
        target.is_dir()
        and target.parent == Path(os.path.realpath(link.parent))
        and fnmatch.fnmatchcase(target.name, segment)
    )


def readable_parquet(files: list[Path], violations: list[str]) -> list[Path]:
    """The ``files`` whose parquet footer reads (:func:`parquet_footers`); the others are named in ``violations``."""
    return list(parquet_footers(files, violations))


def parquet_footers(files: list[Path], violations: list[str]) -> dict[Path, pa.Schema]:
    """The arrow schema of each of ``files`` (listed by :func:`parquet_files`) whose parquet footer reads, by file,
    in their order; the others are named in ``violations``: unreadable, or not read
    (:func:`~rollbench.record.files.open_parquet`: a link, over :data:`~rollbench.record.files.MAX_PARQUET_BYTES`,
    with a hole, or decoding to more than :data:`~rollbench.record.parquet_bounds.MAX_DECODED_BYTES`). Grading
    checks every file this way before DuckDB reads it. Cost: the footer (and a page header per list column),
    ~0.2-0.3 ms a file on the shared 2-core machine."""
    ok: dict[Path, pa.Schema] = {}
    for f in files:
        try:
            with open_parquet(f) as pf:
                ok[f] = pf.schema_arrow
        except UnsafeFile as exc:
            violations.append(f"file {f} is not read ({why_not_read(exc, f)})")
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
    if path.is_symlink():  # a link leading outside is reported by link_violations; one inside is not followed
        if is_inside(run_dir, path):
            violations.append("meta/info.json is a symbolic link; not read")
        return {}
    try:
        info = read_regular_json(path, run_dir, max_bytes=MAX_INFO_BYTES)
    except OSError as exc:
        violations.append(f"meta/info.json is unreadable ({exc})")
        return {}
    except ValueError as exc:
        violations.append(f"meta/info.json is not readable JSON ({exc})")
        return {}
    if not isinstance(info, dict):
        violations.append(f"meta/info.json is not a JSON object (it holds a {type(info).__name__})")
        return {}
    features = info.get("features")
    if not isinstance(features, dict) or not all(isinstance(v, dict) for v in features.values()):
        violations.append("meta/info.json has no valid 'features' object")
        info = {**info, "features": {}}
    for why in info_field_problems(info):
        violations.append(f"meta/info.json: {why}")
    return info


def _count(v: Any, low: int = 0) -> bool:
    return type(v) is int and v >= low


def info_field_problems(info: dict[str, Any]) -> list[str]:
    """What is wrong with the fields LeRobot readers rely on in an info.json document (empty when nothing): ``fps``
    a positive finite number (a frame rate of 0 makes every timestamp infinite), ``total_episodes``,
    ``total_frames``, ``total_tasks`` non-negative integers, ``chunks_size`` a positive one, and each feature a
    ``dtype`` string with a ``shape`` list of positive integers (issue 30, item 9)."""
    out = []
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps) or fps <= 0:
        out.append(f"fps is {fps!r}, not a positive number of frames per second")
    for key, low in (("total_episodes", 0), ("total_frames", 0), ("total_tasks", 0), ("chunks_size", 1)):
        if key in info and not _count(info[key], low):
            out.append(f"{key} is {info[key]!r}, not an integer of at least {low}")
    for name, feat in (info.get("features") or {}).items():
        shape = feat.get("shape")
        if not isinstance(feat.get("dtype"), str):
            out.append(f"feature {quoted(str(name))} has no dtype string")
        elif not isinstance(shape, list) or not all(_count(d, 1) for d in shape):
            out.append(
                f"feature {quoted(str(name))} has shape {quoted(shape, as_text=True)}, not a list of positive integers"
            )
    return out


def missing_episode_columns(columns: list[str]) -> list[str]:
    """The columns grading needs that the episode rows lack."""
    return [c for c in REQUIRED_EPISODE_COLUMNS if c not in columns]


_SPEC = re.compile(r"0?[0-9]?d?")  # LeRobot's templates use {chunk_index:03d}: a width of at most 9, zero-padded


def fill_template(template: Any, **fields: Any) -> str:
    """``template`` (an info.json ``data_path``/``video_path``) filled with ``fields``: only their plain names, with
    at most a ``0Nd`` spec (``{chunk_index:03d}``); ValueError for anything else (a non-string, an unknown name, an
    attribute or index lookup, a conversion, a wider spec: a run someone handed over may hold any template)."""
    if not isinstance(template, str):
        raise ValueError(f"the template is a {type(template).__name__}, not a string")
    for _text, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if name not in fields or conversion or not _SPEC.fullmatch(spec or ""):
            raise ValueError(f"{{{name}{'!' + conversion if conversion else ''}:{spec}}} is not a field it may use")
    try:
        return template.format(**fields)
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        raise ValueError(str(exc)) from None


def leads_outside(rel: str) -> bool:
    """Whether ``rel``, a filled-in ``data_path``/``video_path``, names a place outside the run directory by its
    text alone (absolute, or climbing out with ``..``), whatever is on disk: nothing there is looked at."""
    return os.path.isabs(rel) or os.path.normpath(rel).split(os.sep)[0] == ".."


def recorded_frame_size(info: dict[str, Any], key: str) -> tuple[int, int] | None:
    """``(height, width)`` of video feature ``key`` in ``info`` (its ``shape``, ``[height, width, channels]`` as
    rollbench records it), or None when it records no such shape."""
    shape = (info.get("features") or {}).get(key, {}).get("shape")
    if isinstance(shape, list) and len(shape) == 3 and all(_count(d, 1) for d in shape):
        return shape[0], shape[1]
    return None


def video_violation(run_dir: Path, info: dict[str, Any], m: EpisodeRow, key: str, length: int) -> str | None:
    """None when episode ``m``'s video ``key`` exists inside the run and decodes to ``length`` frames, or is behind
    a link leading outside (:func:`link_violations` names that link, once); else the sentence naming the file and
    what is wrong with it (missing, a link, unreadable, a hole, wrong frame count, frames of another size than
    meta/info.json's shape for ``key``), or the ``video_path`` whose text leads outside the run (one sentence for
    every episode; nothing outside is looked at). Decoding is bounded (hostile round 19, F4): never a stream of
    another size than the recorded one, at most ``length + 1`` frames (enough to say it has more)."""
    from rollbench.record.files import VideoRefused, count_video_frames

    e, span = m.episode_index, m.video(key)
    if span.file_index is None:
        return f"episode {e}: no video for {key}"
    template = info.get("video_path")
    if not isinstance(template, str):
        return f"episode {e}: meta/info.json has no video_path, so its {key} video cannot be found"
    try:
        rel = fill_template(
            template,
            video_key=key,
            chunk_index=span.chunk_index,
            file_index=span.file_index,
        )
    except ValueError as exc:
        return f"episode {e}: meta/info.json's video_path {template!r} cannot be filled in ({exc})"
    if leads_outside(rel):  # hostile round 5, F7
        return f"meta/info.json's video_path {template!r} leads outside the run directory; no video it names is read"
    path = run_dir / rel
    if not is_inside(run_dir, path):
        return None  # a link leading outside the run, named once by link_violations
    if not (path.exists() or path.is_symlink()):
        return f"episode {e}: video file {rel} is missing"
    if (size := recorded_frame_size(info, key)) is None:
        return f"episode {e}: video file {rel} ({key}) is not decoded: meta/info.json records no frame size for it"
    try:
        check_no_link_below(run_dir, path)
        if path.is_symlink():
            return f"episode {e}: video file {rel} is a symbolic link (to {os.readlink(path)}); not read"
        frames = count_video_frames(path, run_dir, limit=length + 1, size=size)
    except UnsafeFile as exc:
        return f"episode {e}: video file {rel} is not read ({why_not_read(exc, path)})"
    except VideoRefused as exc:
        return f"episode {e}: video file {rel} ({key}) {exc}"
    except Exception as exc:
        return f"episode {e}: video file {rel} is unreadable ({type(exc).__name__}: {exc})"
    if frames > length:
        return f"episode {e}: video file {rel} ({key}) has more than {length} frames for {length} steps"
    if frames != length:
        return f"episode {e}: video file {rel} ({key}) has {frames} frames for {length} steps"
    return None


def run_timing(log: RunLog, episode_times: list[object]) -> Timing:
    """Wall time of a run, from disk: ``eval_wall_time_s`` = the summed ``elapsed_s`` of every finished invocation
    in run.json's ``executions`` (None when none is recorded), ``invocations`` = how many, ``episode_time_s`` = the
    summed per-episode wall times of the graded episodes (``rollbench/wall_time_s``: reset to last step, in the
    process that ran the episode; with K workers it can exceed the wall time). Seconds; the wall time is rounded to
    milliseconds, as each ``elapsed_s`` is (a sum of such floats is not exact). An invocation killed by SIGKILL
    (or a power loss) recorded no ``elapsed_s``: its time is not in ``eval_wall_time_s``, it is counted in
    ``invocations_unrecorded``, and the episodes it committed are in ``episode_time_s``."""
    executions = log.executions
    runs = [x.elapsed_s for x in executions if x.elapsed_s is not None]
    times = [t for t in episode_times if isinstance(t, float) and math.isfinite(t) and t >= 0]  # else a violation
    return Timing(
        eval_wall_time_s=round(sum(runs), 3) if runs else None,  # each is in ms
        invocations=len(runs),
        invocations_unrecorded=len(executions) - len(runs),
        episode_time_s=sum(times),
    )
