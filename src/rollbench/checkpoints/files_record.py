"""What each evaluated checkpoint's files were when its episodes were made: ``OUT/checkpoint_files.json``.

A training rerun into the same folder writes new weights at the same steps; without this record the same
``rollbench checkpoints`` command would resume into ``OUT/<step>`` and rank the old weights' episodes as that step.
The record holds, per step, every regular file under the checkpoint (relative path, size, mtime in ns, SHA-256 of
its bytes), taken just before the checkpoint is evaluated (its run directory is made). A later invocation compares a
checkpoint that already has a run directory with it: a file added or removed, a size that differs, or an mtime that
differs with other bytes (the SHA-256 is computed again only then) is a change, refused before anything runs
(:class:`FilesChanged`, a ConfigError). The hash makes a copied training folder (new mtimes, same bytes) no change,
and weights rewritten at the same size always one. A step without a run directory is recorded afresh; an OUT made
before the record existed is recorded on first sight (what its episodes were made with cannot be known).

The file is the checkpoints command's own (never inside a run directory); it is rewritten atomically.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from rollbench.checkpoints.discover import Checkpoint, fingerprint
from rollbench.core.contracts import ConfigError
from rollbench.record.files import atomic_write_json
from rollbench.record.safe_files import check_dense, open_regular, read_regular_json

FILES_RECORD = "checkpoint_files.json"
MAX_FILES = 10_000  # directory entries under one checkpoint recorded (a stated bound on the work); more is refused
SHOWN = 3  # changed files named one by one in the refusal; the rest are counted


class FileStamp(BaseModel):
    """One regular file of a checkpoint: ``file`` (path relative to the checkpoint), ``size`` (bytes),
    ``mtime_ns`` and ``sha256`` (hex digest of its bytes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str
    size: int
    mtime_ns: int
    sha256: str


class CheckpointFiles(BaseModel):
    """A checkpoint's files as recorded: ``path`` (the folder then, for the reader) and ``files``."""

    model_config = ConfigDict(extra="forbid")
    path: str
    files: list[FileStamp]


class FilesRecord(BaseModel):
    """The whole record: ``steps`` (the training step as text -> :class:`CheckpointFiles`)."""

    model_config = ConfigDict(extra="forbid")
    checkpoint_files: int = 1
    steps: dict[str, CheckpointFiles] = {}


class FilesChanged(ConfigError):
    """A checkpoint's files differ from those its recorded episodes were made with."""


def _sha256(path: Path) -> str:
    """The SHA-256 of regular file ``path``'s bytes; UnsafeFile (an OSError) for a sparse file, never read: weights
    are written whole, and a hole would cost a read of its whole apparent size (``truncate -s 1T``: hours)."""
    digest = hashlib.sha256()
    with open_regular(path) as f:
        check_dense(path, f.fileno())
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def stamp(ckpt: Checkpoint) -> CheckpointFiles:
    """``ckpt``'s files now, each hashed (OSError when one cannot be read)."""
    files = [
        FileStamp(file=f, size=s, mtime_ns=m, sha256=_sha256(ckpt.path / f))
        for f, s, m in fingerprint(ckpt, MAX_FILES, "refuse")
    ]
    return CheckpointFiles(path=str(ckpt.path), files=files)


def changes(ckpt: Checkpoint, recorded: CheckpointFiles) -> list[str]:
    """What differs between ``ckpt``'s files now and ``recorded``: ``NAME added``, ``NAME removed``, ``NAME: size A
    -> B bytes``, ``NAME: other bytes`` (an mtime that differs at the same size is hashed again); empty when none."""
    was = {f.file: f for f in recorded.files}
    now = {f: (s, m) for f, s, m in fingerprint(ckpt, MAX_FILES, "refuse")}
    found = [f"{name} removed" for name in sorted(set(was) - set(now))]
    found += [f"{name} added" for name in sorted(set(now) - set(was))]
    for name in sorted(set(was) & set(now)):
        old, (size, mtime) = was[name], now[name]
        if size != old.size:
            found.append(f"{name}: size {old.size} -> {size} bytes")
        elif mtime != old.mtime_ns and _sha256(ckpt.path / name) != old.sha256:
            found.append(f"{name}: other bytes")
    return found


def read_record(out: Path) -> FilesRecord:
    """``OUT/checkpoint_files.json`` (empty when missing); ConfigError naming it when it is a link or damaged."""
    try:
        return FilesRecord.model_validate(read_regular_json(out / FILES_RECORD, out))
    except FileNotFoundError:
        return FilesRecord()
    except (OSError, ValueError, ValidationError) as exc:
        n = exc.error_count() if isinstance(exc, ValidationError) else 0
        why = f"{n} invalid field{'s' * (n != 1)}" if isinstance(exc, ValidationError) else str(exc)
        raise ConfigError(f"{out / FILES_RECORD} is damaged: {why}") from None


def _refusal(ckpt: Checkpoint, out: Path, found: list[str]) -> FilesChanged:
    shown = "; ".join(found[:SHOWN]) + (f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
    return FilesChanged(
        f"step {ckpt.step}: its checkpoint files changed since {out / ckpt.label} was evaluated ({shown}); its "
        f"episodes are of the old files: evaluate into another --out, or remove {out / ckpt.label} to run it again"
    )


def _has_run(out: Path, ckpt: Checkpoint) -> bool:
    return os.path.lexists(out / ckpt.label)


def check_files(ckpts: Sequence[Checkpoint], out: Path) -> None:
    """Before anything runs: FilesChanged (one line naming the step and what changed) for the first of ``ckpts``
    whose run directory exists and whose files differ from the record; then, only when none differs, record the
    checkpoints with a run directory and no record yet (an OUT made before the record: first sight)."""
    record = read_record(out)
    fresh: dict[str, CheckpointFiles] = {}
    for ckpt in ckpts:
        if not _has_run(out, ckpt):
            continue
        was = record.steps.get(str(ckpt.step))
        if was is None:
            fresh[str(ckpt.step)] = _stamped(ckpt)
        elif found := _changes(ckpt, was):
            raise _refusal(ckpt, out, found)
    if fresh:
        record.steps.update(fresh)
        atomic_write_json(out / FILES_RECORD, record.model_dump(mode="json"))


def record_files(ckpt: Checkpoint, out: Path) -> None:
    """Just before ``ckpt`` is evaluated into ``out/<step>``: record its files when that run directory does not exist
    yet (or has no record); FilesChanged when it exists and its files differ from the record."""
    record = read_record(out)
    was = record.steps.get(str(ckpt.step))
    if was is not None and _has_run(out, ckpt):
        if found := _changes(ckpt, was):
            raise _refusal(ckpt, out, found)
        return
    out.mkdir(parents=True, exist_ok=True)
    record.steps[str(ckpt.step)] = _stamped(ckpt)
    atomic_write_json(out / FILES_RECORD, record.model_dump(mode="json"))


def _stamped(ckpt: Checkpoint) -> CheckpointFiles:
    try:
        return stamp(ckpt)
    except OSError as exc:
        raise ConfigError(f"step {ckpt.step}: {ckpt.path} cannot be read: {exc.strerror or exc}") from None


def _changes(ckpt: Checkpoint, was: CheckpointFiles) -> list[str]:
    try:
        return changes(ckpt, was)
    except OSError as exc:
        raise ConfigError(f"step {ckpt.step}: {ckpt.path} cannot be read: {exc.strerror or exc}") from None
