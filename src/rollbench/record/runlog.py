"""run.json (the run log), run.live.json (live snapshot) and the run-directory lock.

``run.json`` holds the spec, the plan (every planned episode), provenance, status and the results *as graded*
from the directory. It is rewritten atomically; results in it are never read back as truth: ``rollbench grade``
recomputes them from the dataset files.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import platform
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from rollbench.core.contracts import ConfigError, RollbenchError, describe
from rollbench.core.family import EnvFamily
from rollbench.core.format import error_location, error_message
from rollbench.core.grade_model import GradeDocument
from rollbench.core.runlog_model import (
    ExecutionEntry,
    Identity,
    Plan,
    Provenance,
    RunLog,
    RunStatus,
)
from rollbench.core.spec import EvalSpec
from rollbench.record.files import atomic_write_json, json_bytes, resolve_inside, utc_now
from rollbench.record.live import LiveSnapshot
from rollbench.record.locks import DirLock, LockHeld, PathLock, dir_locked, file_lock_held
from rollbench.record.runlog_shape import check_run_log
from rollbench.record.safe_files import is_regular, read_regular_json, refuse_link

RUN_LOG_VERSION = 1
__all__ = ["LiveSnapshot", "utc_now"]  # re-exported: rollbench.record.live, rollbench.record.files
# run.json is read whole, so its size is bounded (hostile round 15, F7). Measured (scripted/reach, one-sentence
# instruction): 294 bytes of plan and 507 of results per planned episode, 0.87 KB in all, so 256 MiB holds ~300,000
# planned episodes, 3x the 100,000 one task may plan (spec.MAX_EPISODES_PER_TASK). A new run whose plan alone would
# pass a quarter of it is refused before it starts (:func:`check_plan_bytes`), so every run.json rollbench writes
# stays readable (results measured at 1.7x the plan's bytes per episode: 3x is left for them).
MAX_RUN_JSON_BYTES = 256 << 20
MAX_PLAN_BYTES = MAX_RUN_JSON_BYTES // 4
RUN_SEARCH_DEPTH = 3  # run directories are found at most this many levels below a root (runs/NAME/rounds/RUN)


# Both looked up once per process (a scan of site-packages, a git subprocess: with the rest of provenance ~12 ms of
# each run's start-up in `benchmarks/bench_harness.py --profile` before). A package
# upgraded under a long-lived process (an MCP server, a dashboard) is not what that process runs anyway.
@functools.cache
def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def _git_commit() -> str | None:
    src = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def gl_provenance(families: Sequence[EnvFamily]) -> dict[str, str | None]:
    """The offscreen OpenGL back-end the run renders with: ``MUJOCO_GL`` (``egl``, ``osmesa``, ``glfw``; None when
    unset) and ``PYOPENGL_PLATFORM`` when set. For families that render through it (``EnvFamily.offscreen_gl``) the
    back-end is chosen first, as the envs do (:func:`rollbench.core.gl.configure_offscreen_gl`; its variables are
    inherited by workers, Ray actors and env hosts); a machine without GL records None (such runs cannot render)."""
    if any(fam.offscreen_gl for fam in families):
        from rollbench.core.gl import configure_offscreen_gl

        with contextlib.suppress(ConfigError):
            configure_offscreen_gl()
    out: dict[str, str | None] = {"MUJOCO_GL": os.environ.get("MUJOCO_GL") or None}
    if os.environ.get("PYOPENGL_PLATFORM"):
        out["PYOPENGL_PLATFORM"] = os.environ["PYOPENGL_PLATFORM"]
    return out


def provenance(families: Sequence[EnvFamily]) -> dict[str, Any]:
    """Versions of rollbench, numpy, gymnasium and each family's simulator packages (``EnvFamily.sim_packages``;
    None for a package that is not installed); the OpenGL back-end (``gl``, see :func:`gl_provenance`) and what
    renders each family (``renderers``: ``EnvFamily.renderer``, where it declares one); git commit; host; UTC
    time. The families' own ``provenance()`` facts are added by the caller (``run.prepare``)."""
    ordered = sorted(families, key=lambda f: f.name)
    versions = {
        "rollbench": _version("rollbench"),
        "numpy": _version("numpy"),
        "gymnasium": _version("gymnasium"),
    }
    for fam in ordered:
        for key, dist in fam.sim_packages:
            versions[key] = _version(dist)
    return {
        "versions": versions,
        "gl": gl_provenance(ordered),
        "renderers": {fam.name: fam.renderer for fam in ordered if fam.renderer is not None},
        "python": platform.python_version(),
        "git_commit": _git_commit(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "created": utc_now(),
    }


def write_run_log(run_dir: Path, log: RunLog) -> None:
    """Write ``run_dir/run.json`` atomically from ``log``, once the whole document validates against its model
    again (a change made by attribute is not validated when made); RollbenchError, and nothing written, when the model
    refuses it (a bug). The document holds the keys it was read or built with (``exclude_unset``), in the model's
    order, so a run log read and written back keeps its keys."""
    doc = log.model_dump(mode="json", by_alias=True, exclude_unset=True)
    try:
        RunLog.model_validate(doc)
    except ValidationError as exc:
        raise RollbenchError(
            f"{run_dir / 'run.json'} would not match its model ({_first_error(exc)}); not written"
        ) from None
    atomic_write_json(run_dir / "run.json", doc)


def update_run_log(run_dir: Path, change: Callable[[RunLog], bool]) -> RunLog | None:
    """Read ``run_dir/run.json`` (:func:`read_run_log`), let ``change`` set fields of it (assign a field: a list
    or block mutated in place where the document had no such key is not written) and write it when ``change``
    returns True; returns the log, or None (nothing done) when there is no run.json. The caller holds the run's lock
    (:class:`RunLock`). The one way a module that does not hold the run log edits run.json; one that holds it sets
    fields and calls :func:`write_run_log`."""
    log = read_run_log(run_dir)
    if log is not None and change(log):
        write_run_log(run_dir, log)
    return log


def new_run_log(
    run_id: str,
    identity: Identity,
    spec: EvalSpec,
    spec_identity: str,
    plan: Plan,
    provenance: Provenance,
    warnings: list[str],
) -> RunLog:
    """The run log of a new run, before its first execution (``status`` RUNNING; see
    :class:`rollbench.core.runlog_model.RunLog` for each key)."""
    return RunLog.model_validate(  # from JSON: every key of the spec is written, set or default
        {
            "rollbench_run_log": RUN_LOG_VERSION,
            "run_id": run_id,
            "identity": _dump(identity),
            "spec": spec.model_dump(mode="json"),
            "spec_identity": spec_identity,
            "plan": _dump(plan),
            "provenance": _dump(provenance),
            "warnings": warnings,
            "status": "RUNNING",
        }
    )


def begin_execution(run_dir: Path, log: RunLog, workers: int, executor: str, batch_size: int) -> None:
    """Mark the run RUNNING, append this invocation to ``executions`` and write run.json."""
    entry = ExecutionEntry.model_validate(
        {"started": utc_now(), "workers": workers, "executor": executor, "batch_size": batch_size}
    )
    log.status = "RUNNING"
    log.executions = [*log.executions, entry]
    write_run_log(run_dir, log)


def note_counters(log: RunLog, counters: Mapping[str, Any]) -> None:
    """Add the executor's counters (``worker_starts`` ..., ``ray``: see :class:`ExecutionEntry`) to this invocation's
    entry; written with the next write. RollbenchError for a counter the model does not declare (a bug)."""
    last = log.executions[-1]
    try:
        log.executions[-1] = ExecutionEntry.model_validate({**_dump(last), **counters})
    except ValidationError as exc:
        raise RollbenchError(f"execution counters would not match the run log's model ({_first_error(exc)})") from None


def end_execution(run_dir: Path, log: RunLog, elapsed_s: float, interrupted: bool) -> None:
    """Note when this invocation finished and how long it took (``elapsed_s``, rounded to ms; ``interrupted`` when a
    signal stopped it) and write run.json, before grading: the graded timing includes this invocation."""
    last = log.executions[-1]
    last.finished = utc_now()
    last.elapsed_s = round(elapsed_s, 3)
    if interrupted:
        last.interrupted = True
    write_run_log(run_dir, log)


def record_results(run_dir: Path, log: RunLog, result: GradeDocument, status: RunStatus) -> None:
    """Store the grade document ``result`` under ``results`` with the run's ``status`` and write run.json (which
    validates the whole log before writing)."""
    log.status = status
    log.results = result
    write_run_log(run_dir, log)


def abandon_execution(run_dir: Path, log: RunLog, exc: BaseException) -> None:
    """A run still RUNNING that stops with ``exc`` (anything but a finish): mark it INTERRUPTED (resumable), note
    when and why in this invocation's entry, and write run.json. A run already finished is left as it is."""
    if log.status == "RUNNING":
        log.status = "INTERRUPTED"
        last = log.executions[-1]
        last.finished = utc_now()
        last.error = f"{describe(exc)}"
        write_run_log(run_dir, log)


def check_resumable(run_dir: Path) -> None:
    """ConfigError unless ``run_dir/run.json`` (read to continue the run) validates against the run log's model
    :class:`rollbench.core.runlog_model.RunLog` as written, keys unknown to it included: a run is only continued from
    a log of the format rollbench writes. Its ``results`` are left out: they are recomputed from the files when the
    run finishes and never read as truth, so a run graded by an older rollbench still resumes."""
    path = run_dir / "run.json"
    raw = _read_raw(run_dir)
    try:
        RunLog.model_validate({**(raw or {}), "results": None})
    except ValidationError as exc:
        raise ConfigError(f"{path} is not a run log rollbench can continue: {_first_error(exc)}") from None


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = error_location(err["loc"], "the document")
    return f"{where}: {error_message(err)}" + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")


def find_run_dirs(roots: list[Path], max_depth: int = RUN_SEARCH_DEPTH) -> list[Path]:
    """The run directories (holding a ``run.json``) at or below each root, at most ``max_depth`` levels down, in
    path order per root: a root that is a run directory is itself the only one found there; a run directory's own
    subdirectories are not searched; hidden directories, links to directories and unreadable directories are
    skipped. Used by ``rollbench runs`` and the dashboard's catalog."""
    found: list[Path] = []

    def walk(d: str, depth: int) -> None:
        if is_regular(Path(d) / "run.json"):
            found.append(Path(d))
            return
        if depth >= max_depth:
            return
        try:
            entries = sorted(os.scandir(d), key=lambda x: x.name)
        except OSError:
            return
        for x in entries:
            if not x.name.startswith(".") and x.is_dir(follow_symlinks=False):
                walk(x.path, depth + 1)

    for root in roots:
        walk(os.fspath(root), 0)
    return found


def read_run_log(run_dir: Path) -> RunLog | None:
    """``run_dir/run.json`` as a :class:`rollbench.core.runlog_model.RunLog`, or None when ``run_dir`` holds no
    ``run.json``.

    Raises ConfigError (one line, naming the file) when it is a link leading outside ``run_dir``, unreadable, not
    JSON, not of a rollbench run log's shape (see :func:`check_run_log`) or refused by the model. Top-level keys the
    model does not know are skipped (a reader of an older rollbench reads a newer log; resuming refuses them, see
    :func:`check_resumable`). ``results`` that are not an object are refused; an object the current grade document
    model refuses (graded by another rollbench) is read as None: results are never read as truth.
    """
    raw = _read_raw(run_dir)
    if raw is None:
        return None
    path = run_dir / "run.json"
    results = raw.get("results")
    if results is not None and not isinstance(results, dict):
        raise ConfigError(f"{path} is not a rollbench run log: its 'results' is not an object")
    known = {k: v for k, v in raw.items() if k in RunLog.model_fields and k != "results"}
    try:
        log = RunLog.model_validate(known)
    except ValidationError as exc:
        raise ConfigError(f"{path} is not a rollbench run log: {_first_error(exc)}") from None
    if results is not None:
        with contextlib.suppress(ValidationError):
            log.results = GradeDocument.model_validate(results)
    elif "results" in raw:
        log.results = None
    return log


def _read_raw(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/run.json`` as JSON of a run log's shape (:func:`check_run_log`), or None when there is none."""
    path = run_dir / "run.json"
    if not (path.exists() or path.is_symlink()) or not run_dir.is_dir():
        return None
    resolve_inside(run_dir, path)
    try:
        log = read_regular_json(path, run_dir, max_bytes=MAX_RUN_JSON_BYTES)  # a hole or over it: not read
    except OSError as exc:
        raise ConfigError(f"{path} is not a rollbench run log: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{path} is not a rollbench run log: it is not readable JSON: {exc}") from None
    check_run_log(log, path)
    assert isinstance(log, dict)  # check_run_log refuses anything else
    return log


def check_plan_bytes(plan: Plan) -> None:
    """ConfigError when run.json's ``plan`` would take more than :data:`MAX_PLAN_BYTES` as written (so the run log
    with its results could pass :data:`MAX_RUN_JSON_BYTES`, which readers refuse)."""
    size = len(json_bytes(plan.model_dump(mode="json", by_alias=True, exclude_unset=True)))
    if size > MAX_PLAN_BYTES:
        raise ConfigError(
            f"the plan of {len(plan.episodes):,} episodes would take {size:,} bytes of run.json, over the "
            f"{MAX_PLAN_BYTES:,} a run may plan (run.json is read up to {MAX_RUN_JSON_BYTES:,} bytes with its "
            "results); split it into several runs (fewer tasks, episodes or instruction variants each)"
        )


def require_run_log(run_dir: Path) -> RunLog:
    """``run_dir/run.json`` as a RunLog (see :func:`read_run_log`). Raises ConfigError naming ``run_dir`` when it
    does not exist, is not a directory, or holds no ``run.json`` (and whatever :func:`read_run_log` raises)."""
    log = read_run_log(run_dir)
    if log is not None:
        return log
    if not (run_dir.exists() or run_dir.is_symlink()):
        raise ConfigError(f"{run_dir} does not exist")
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir} is not a directory, so not a rollbench run directory")
    found = [str(d.relative_to(run_dir)) for d in find_run_dirs([run_dir])]  # a folder of runs: say so (issue 42)
    held = f"; it holds {len(found)} runs (e.g. {', '.join(found[:3])}): `rollbench runs {run_dir}` lists them"
    raise ConfigError(f"{run_dir} is not a rollbench run directory (no run.json){held if found else ''}")


class RunLock:
    """An exclusive lock on a run directory: ``flock`` on the directory itself and on ``run.lock`` (which exists only
    while held), released by the OS if the holder dies (:class:`~rollbench.record.locks.DirLock`, ``PathLock``)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "run.lock"
        self._lock = PathLock(self.path, timeout_s=0)
        self._dir = DirLock(run_dir)  # and the directory itself: deleting run.lock lets no second writer in

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._dir.acquire()
            try:
                self._lock.acquire()
            except BaseException:
                self._dir.release()
                raise
        except LockHeld:
            raise ConfigError(
                f"{self.path.parent} is being written by another rollbench process (it holds {self.path}); "
                "wait for it to finish or stop it, then resume"
            ) from None
        except OSError as exc:
            refuse_link(self.path.parent)  # the run directory itself is a link (hostile8 F5): say so
            raise ConfigError(f"{self.path} cannot be used as the run's lock file ({exc.strerror})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        self._dir.release()


def is_locked(run_dir: Path) -> bool:
    """True when a process holds the run's lock (the run is being written right now). Read-only: probes
    ``run.lock`` with a non-blocking ``flock`` (the lock :class:`RunLock` takes) and never creates it, so asking
    cannot make a writer starting at that moment fail; a lock file that is a link is taken as not held."""
    return dir_locked(run_dir) or file_lock_held(run_dir / "run.lock")  # the directory's lock, else run.lock's
