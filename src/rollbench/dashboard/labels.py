"""The label sidecar: hand labels on episodes, kept in one JSON file outside the run directories.

Format (``version`` 1)::

    {"version": 1, "rubric": "outcome-v1",
     "labels": {"HOST/ROBOT/NAME/EPISODE": {"label": "failed", "note": "...", "annotator": "ana",
                                            "labeled_at": "2026-11-30T23:59:01.123456Z",
                                            "task": "...", "instruction": "...", "policy": "...", "model": "...",
                                            "status": "success" | "failure" | "error" | null,
                                            "history": [earlier entries, oldest first, without their own history]}}}

* The key is the episode's identity (:meth:`rollbench.core.identity.RunIdentity.episode_key`).
* ``label`` is a label of the file's rubric, or ``null`` for a cleared label (the entry and its history stay; a
  cleared episode counts as unlabelled).
* ``task``, ``instruction``, ``policy``, ``model`` and ``status`` are copied from the run when the label is set, so
  the file alone is enough for analysis. ``status`` is the episode's recorded outcome as graded: ``success``,
  ``failure`` or ``error``.
* A relabel (or a clear) moves the previous entry into ``history``.
* A label that the rubric does not have (file edited by hand, rubric changed) is kept and reported in
  :attr:`LabelFile.unknown`, never dropped.

Writes (:func:`set_label`) hold an OS file lock (``FILE.lock``, :class:`rollbench.record.locks.PathLock`, which
exists only while a write holds it and is released by the OS if the holder dies) around read-modify-write, and
replace the file atomically (:func:`rollbench.record.files.atomic_write_bytes`: temp file in the same directory,
fsync, rename; mode 0o666 minus the umask read once at import), so concurrent writers in any number of threads and
processes lose nothing and a reader never sees half a file.

Errors: :class:`rollbench.core.contracts.ConfigError` (unreadable or malformed file, another rubric, unknown label, bad key).
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.format import is_decimal
from rollbench.core.identity import RunIdentity, sanitize_segment
from rollbench.core.jsonfile import parse_json, read_text
from rollbench.dashboard.rubrics import BUILTIN_RUBRICS, Rubric
from rollbench.record.files import atomic_write_bytes
from rollbench.record.locks import LockHeld, PathLock

SIDECAR_VERSION = 1
CONTEXT_FIELDS: tuple[str, ...] = ("task", "instruction", "policy", "model", "status")
ENTRY_FIELDS: tuple[str, ...] = ("label", "note", "annotator", "labeled_at", *CONTEXT_FIELDS)
EPISODE_STATUSES: tuple[str, ...] = ("success", "failure", "error")
MAX_NOTE_CHARS = 10_000
LOCK_TIMEOUT_S = 30.0


def parse_episode_key(key: str) -> tuple[RunIdentity, int]:
    """Split ``host/robot/name/episode_index`` into the run identity and the index; ConfigError if malformed."""
    parts = key.split("/") if isinstance(key, str) else []
    if len(parts) != 4 or not is_decimal(parts[3]) or len(parts[3]) > 9:
        raise ConfigError(f"episode key {key!r} is not host/robot/name/episode_index")
    return RunIdentity(parts[0], parts[1], parts[2]), int(parts[3])


def default_annotator() -> str:
    """The OS user's name, as an identity segment (``unknown`` when there is none)."""
    try:
        user = getpass.getuser()
    except Exception:  # no USER/LOGNAME and no passwd entry (containers)
        user = ""
    return sanitize_segment(user, "unknown")


@dataclass(frozen=True)
class UnknownLabel:
    """An entry whose label the rubric does not have (kept in the file, reported here)."""

    key: str
    label: str


@dataclass
class LabelFile:
    """A label sidecar as read. ``entries`` maps episode key to its entry as stored (unknown fields kept)."""

    path: Path
    rubric: str | None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknown: list[UnknownLabel] = field(default_factory=list)

    def label_of(self, key: str) -> str | None:
        """The current label of episode ``key`` (None when unlabelled or cleared)."""
        entry = self.entries.get(key)
        value = entry.get("label") if entry else None
        return value if isinstance(value, str) else None

    def labeled(self) -> dict[str, dict[str, Any]]:
        """Entries with a current (non-null) label, by key, in key order."""
        return {k: e for k, e in sorted(self.entries.items()) if isinstance(e.get("label"), str)}


def _read_raw(path: Path) -> dict[str, Any]:
    if not (path.exists() or path.is_symlink()):
        return {"version": SIDECAR_VERSION, "rubric": None, "labels": {}}
    text = read_text(path, "label file")  # a FIFO or device is refused (core.jsonfile), never waited on
    if not text.strip():
        return {"version": SIDECAR_VERSION, "rubric": None, "labels": {}}
    data = parse_json(text, f"label file {path}")
    if not isinstance(data, dict) or not isinstance(data.get("labels"), dict):
        raise ConfigError(f"label file {path} is not a label sidecar (expected an object with 'labels')")
    if data.get("version") != SIDECAR_VERSION:
        raise ConfigError(f"label file {path} has version {data.get('version')!r}; this rollbench reads version 1")
    for key, entry in data["labels"].items():
        _check_entry(path, key, entry)
    return data


def _check_entry(path: Path, key: str, entry: Any, *, in_history: bool = False) -> None:
    """ConfigError naming the label file, the episode key and the field when an entry is not as the format says:
    ``label`` and every text field a string or null, ``history`` a list of such entries (without their own history).
    Fields the format does not name are kept untyped."""
    where = f"label file {path} is damaged: the entry of {key!r}" + (" (in its history)" if in_history else "")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} is not an object")
    for name in ENTRY_FIELDS:
        value = entry.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where} has {name} {value!r}; expected a string or null")
    if "history" not in entry:
        return
    history = entry["history"]
    if in_history or not (history is None or isinstance(history, list)):
        raise ConfigError(f"{where} has history {history!r}; expected a list of earlier entries")
    for earlier in history or []:
        _check_entry(path, key, earlier, in_history=True)


def load_labels(path: str | Path, rubric: Rubric | None = None) -> LabelFile:
    """Read the sidecar at ``path`` (a missing or empty file is an empty sidecar).

    ``unknown`` lists the entries whose label is not in ``rubric`` (or, when ``rubric`` is None, in the built-in
    rubric the file names; a custom rubric the file names cannot be resolved here, so nothing is checked).

    Raises:
        ConfigError: unreadable, not JSON, not version 1, or recorded under a rubric other than ``rubric``.
    """
    p = Path(path)
    data = _read_raw(p)
    recorded = data.get("rubric")
    if rubric is not None and recorded not in (None, rubric.id):
        raise ConfigError(f"label file {p} was written with rubric {recorded!r}, not {rubric.id!r}")
    check = rubric or BUILTIN_RUBRICS.get(str(recorded))
    entries: dict[str, dict[str, Any]] = data["labels"]
    unknown = [
        UnknownLabel(k, str(e["label"]))
        for k, e in sorted(entries.items())
        if check is not None and e.get("label") is not None and not check.has(str(e["label"]))
    ]
    return LabelFile(path=p, rubric=recorded if recorded is not None else None, entries=entries, unknown=unknown)


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # a context value (from a run.json) that is not text: refused, the file untouched
        raise ConfigError(f"label file {path} not written: a field of the entry is not UTF-8 text") from None
    atomic_write_bytes(path, encoded)


def _check_text(**fields: str | None) -> None:
    """ConfigError naming the first field that is not encodable UTF-8 text (a lone surrogate such as ``"\\ud800"``,
    which JSON can carry but no file can hold)."""
    for name, text in fields.items():
        if isinstance(text, str) and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(f"the {name} is not UTF-8 text (it holds a lone surrogate)") from None


def set_label(
    path: str | Path,
    key: str,
    label: str | None,
    *,
    rubric: Rubric,
    note: str = "",
    annotator: str | None = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """Set (or with ``label=None`` clear) the label of episode ``key`` in the sidecar at ``path``; return the entry.

    ``context`` gives ``task``, ``instruction``, ``policy``, ``model`` and ``status`` (missing ones are kept from the
    previous entry). The previous entry moves into ``history``. Clearing an episode that has no entry writes nothing
    and returns None. Safe across threads and processes (file lock + atomic replace; see the module docstring).

    Raises:
        ConfigError: malformed key, label not in ``rubric`` (the message lists the valid labels), note longer than
            10,000 characters, text that is not encodable UTF-8 (a lone surrogate, in any field of the entry), a
            file written with another rubric, or the lock not acquired within 30 s.
    """
    _check_text(key=key, label=label, note=note if isinstance(note, str) else None, annotator=annotator)
    parse_episode_key(key)
    if label is not None:
        rubric.check(label)
    if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS:
        raise ConfigError(f"a note is a string of at most {MAX_NOTE_CHARS} characters")
    p = Path(path)
    lock = PathLock(p.with_name(p.name + ".lock"), timeout_s=LOCK_TIMEOUT_S)
    try:
        with lock:
            data = _read_raw(p)
            if data.get("rubric") not in (None, rubric.id):
                raise ConfigError(f"label file {p} was written with rubric {data.get('rubric')!r}, not {rubric.id!r}")
            labels: dict[str, Any] = data["labels"]
            previous = labels.get(key)
            if label is None and previous is None:
                return None
            entry: dict[str, Any] = {
                "label": label,
                "note": note,
                "annotator": annotator or default_annotator(),
                "labeled_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
            ctx = dict(context or {})
            for name in CONTEXT_FIELDS:
                value = ctx.get(name, (previous or {}).get(name))
                entry[name] = None if value is None else str(value)
            history: list[Any] = []
            if previous is not None:
                history = list(previous.get("history") or [])
                history.append({k: v for k, v in previous.items() if k != "history"})
            entry["history"] = history
            labels[key] = entry
            data["version"] = SIDECAR_VERSION
            data["rubric"] = rubric.id
            _write_atomic(p, data)
            return entry
    except LockHeld:
        raise ConfigError(f"could not lock label file {p} within {LOCK_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise ConfigError(f"cannot lock label file {p} ({exc.strerror})") from None
