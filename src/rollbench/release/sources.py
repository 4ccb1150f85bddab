"""What a release reads (:mod:`rollbench.release.copy`): the paths given checked, each run's files listed (regular
files of the run only, bounded in size, no run nested inside), and no writer at work on a run while it is read."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.runlog_model import RunLog
from rollbench.grading.grade import load_run_log
from rollbench.record.locks import DirLock, LockHeld, file_lock_held
from rollbench.record.safe_files import refuse_link, scan_run_files

EXCLUDED = {
    "run.lock": "the writer's lock file (empty; only its flock matters)",
    "run.live.json": "live progress, not a result",
}
STAGED = "staged episode not committed"  # why .staging/ is excluded
RECORDED_DATE = "latest provenance.created / executions[].finished of the released runs"  # MANIFEST.json date_source


def _is_inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def check_paths(runs: list[Path], labels: list[Path], out: Path) -> None:
    names = [r.name for r in runs]
    for r in runs:
        if r.name in ("", ".", ".."):  # released as RUN/...: "." would put the run's files outside --out
            raise ConfigError(f"the run {r} has no directory name of its own; give it by its folder's name (../NAME)")
        refuse_link(r)
        if not (r / "run.json").is_file():
            load_run_log(r)  # ConfigError: which of missing, not a directory, no run.json
    resolved = [r.resolve() for r in runs]
    twice = next((r for r, k in zip(runs, resolved, strict=True) if resolved.count(k) > 1), None)
    if twice is not None:
        raise ConfigError(f"{twice} is given twice; name each run once")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"two runs share the directory name {dup[0]!r}; release them separately")
    for f in labels:
        if not f.is_file():
            raise ConfigError(f"--labels {f} is not a file")
    o = out.resolve()
    for src in [*runs, *labels]:
        s = src.resolve()
        if _is_inside(o, s):
            raise ConfigError(f"--out {out} is inside the source {src}; a release is written elsewhere")
        if _is_inside(s, o):
            raise ConfigError(f"the source {src} is inside --out {out}; choose an empty directory elsewhere")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty directory; a release needs a fresh one")


MAX_FILE_BYTES = 1 << 28  # 256 MiB: a released file is read whole to be scanned (a recorded episode's is ~MBs)
MAX_RELEASE_BYTES = 1 << 33  # 8 GiB: all released files together


def run_files(run: Path) -> tuple[list[Path], list[dict[str, str]]]:
    """The regular files of ``run`` to release (:func:`rollbench.record.safe_files.scan_run_files`: links never
    followed), and those excluded with why. ConfigError for a link, FIFO, socket or device anywhere in the run, a
    file with a name (hard link) outside the run, a file over :data:`MAX_FILE_BYTES`, or another run inside it."""
    files, excluded = [], []
    listing = scan_run_files(run, "**")
    for p, why in listing.skipped:
        if "hard link" not in why:
            raise ConfigError(f"{p} is {why}; a release copies regular files only")
    found = listing.files + [p for p, why in listing.skipped if "hard link" in why]
    names: dict[tuple[int, int], int] = {}
    for p in found:
        st = os.lstat(p)
        names[(st.st_dev, st.st_ino)] = names.get((st.st_dev, st.st_ino), 0) + 1
    for p in sorted(found, key=lambda q: q.relative_to(run).as_posix()):
        rel = p.relative_to(run).as_posix()
        st = os.lstat(p)
        if st.st_nlink > names[(st.st_dev, st.st_ino)]:
            raise ConfigError(
                f"{p} has {st.st_nlink} names, some outside the run (a hard link); a release copies only the run's own "
                "files: copy it (cp) and release again"
            )
        if rel.endswith("/run.json") and rel.split("/")[0] != ".staging":
            raise ConfigError(f"{run} holds another run ({p.parent}); release each run on its own, not nested")
        if st.st_size > MAX_FILE_BYTES:
            raise ConfigError(
                f"{p} is {st.st_size:,} bytes, over the {MAX_FILE_BYTES:,} bytes a release reads per file; "
                "move it out of the run to release it"
            )
        if rel.split("/")[0] == ".staging":
            excluded.append({"path": f"{run.name}/{rel}", "why": STAGED})
        elif rel in EXCLUDED:
            excluded.append({"path": f"{run.name}/{rel}", "why": EXCLUDED[rel]})
        else:
            files.append(p)
    return files, excluded


@contextlib.contextmanager
def not_being_written(run: Path) -> Iterator[None]:
    """Hold ``run``'s directory lock (the one every writer takes first, :class:`~rollbench.record.locks.DirLock`;
    nothing is created in the source) while the release reads it; ConfigError when a writer holds it or the run's
    ``run.lock`` is held (a run still being recorded is not released)."""
    lock = DirLock(run, timeout_s=0.5)
    try:
        lock.acquire()
    except LockHeld:
        raise ConfigError(f"{run} is being written by a rollbench process; release it once it has finished") from None
    except OSError as exc:  # replaced by a link or a file since it was checked
        raise ConfigError(f"{run} cannot be locked for reading ({exc.strerror}); give a run directory") from None
    try:
        if file_lock_held(run / "run.lock"):
            raise ConfigError(
                f"{run} is being written by a rollbench process (it holds run.lock); release it once it has finished"
            )
        yield
    finally:
        lock.release()


MAX_RULES_BYTES = 2**20  # 1 MiB: a --rules file of patterns and literals
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?")


def check_date(value: str) -> str:
    """``--date`` as given when it is an ISO 8601 calendar date, optionally with a time and offset
    (``2026-03-01``, ``2026-03-01T12:00:00Z``) that exists on the calendar; else ConfigError."""
    import datetime

    ok = bool(_DATE.fullmatch(value))
    try:
        ok = ok and bool(datetime.datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"--date {value!r} is not an ISO 8601 date, e.g. 2026-03-01 or 2026-03-01T12:00:00Z")
    return value


def _odd_annotator(obj: Any) -> str | None:
    """The JSON type name of the first ``annotator`` value anywhere in ``obj`` (an entry's own, or one in its
    ``history``) that is neither a string nor null; None when there is none."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "annotator" and not (v is None or isinstance(v, str)):
                return {dict: "an object", list: "an array", bool: "a boolean"}.get(type(v), "a number")
            if (inner := _odd_annotator(v)) is not None:
                return inner
    elif isinstance(obj, list):
        return next((t for t in map(_odd_annotator, obj) if t is not None), None)
    return None


def check_label_annotators(path: Path, entries: dict[str, Any]) -> None:
    """Refuse a label file whose released entries (``{episode key: entry}``) give an ``annotator`` that is not a
    string (or null): release redacts an annotator as one name, so a name inside an object or array is refused
    (ConfigError naming the file and the label), never released."""
    for key, entry in entries.items():
        odd = _odd_annotator(entry)
        if odd is not None:
            raise ConfigError(
                f"--labels {path}: label {key}: its annotator is {odd}, not a string (release redacts an annotator "
                "as one name); write it as a string or null"
            )


def release_date(logs: list[RunLog], date: str | None) -> tuple[str, str]:
    """MANIFEST.json's ``date`` and where it came from: ``date`` (``--date``, checked: :func:`check_date`), else the
    latest ``provenance.created`` / ``executions[].finished`` of the runs' ``logs`` of the ISO 8601 form ``--date``
    takes (a time of another form is not used: it would be released as it is); ConfigError when they record none."""
    if date is not None:
        return check_date(date), "--date"
    stamps: list[str | None] = []
    for log in logs:
        stamps.append(log.provenance.created)
        stamps += [e.finished for e in log.executions]
    found = sorted(s for s in stamps if isinstance(s, str) and _DATE.fullmatch(s))  # a date only: MANIFEST.json
    if not found:  # is released unredacted, and a handed-over run.json's time can be any text (an address, a name)
        raise ConfigError(
            "the runs record no creation time (an ISO 8601 provenance.created or executions[].finished); give the "
            "release date with --date YYYY-MM-DD"
        )
    return found[-1], RECORDED_DATE
