"""Where each file of a release lands (:mod:`rollbench.release.copy`): its released path, the whole layout checked
before anything is written, and the writing of a checked layout.

A release is one directory holding ``RUN/...`` for each run (its directory name and file names with every secret
or private name replaced: :func:`released_path`), ``labels/NAME`` for each ``--labels`` file and ``MANIFEST.json``.
Two sources must never land on the same released path (hostile round 18, F1/F2: a run named ``labels`` shared the
label files' folder, a run named ``REDACTED-email-1-`` merged with one released under that name, a run named
``MANIFEST.json`` left a release without a manifest), so :func:`check_layout` refuses, before the first write:

* a run released as ``MANIFEST.json``, or as ``labels`` when ``--labels`` files are released;
* two runs released under one directory name, two files under one path, and a file where another file's path
  needs a folder;
* a released path that is not inside the release (an empty, ``.`` or ``..`` segment: a run given as ``.``).

Two paths are one when they are equal after Unicode NFC normalisation and case folding (:func:`path_key`): a release
is handed to others, and macOS and Windows file systems hold ``Run`` and ``run`` (or an accented name in its
composed and decomposed forms) as one file, so one of the two would overwrite the other there.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from rollbench.core.contracts import ConfigError
from rollbench.core.identity import sanitize_segment
from rollbench.release.redact import Released
from rollbench.release.rules import Scanner

MANIFEST = "MANIFEST.json"  # the release's own file, written last
LABELS = "labels"  # the folder of the --labels files


def released_path(scanner: Scanner, rel: str) -> str:
    """``rel`` with every path segment redacted (a run or file named after a host, a user or an address), in the
    segment-safe form of its placeholder; a hex run in a segment is kept (a run named by a commit sha)."""
    out = []
    for seg in rel.split("/"):
        new, pairs = scanner.redact(seg, structural=True)
        out.append(sanitize_segment(new) if pairs else seg)
    return "/".join(out)


def renamed(scanner: Scanner, rels: list[str]) -> list[str]:
    """One warning line per run directory or file released under a redacted name (``rels``: the paths before
    redaction): the path up to its first renamed segment, as released."""
    found = set()
    for rel in rels:
        segs, new = rel.split("/"), released_path(scanner, rel).split("/")
        at = next((k for k, (a, b) in enumerate(zip(segs, new, strict=True)) if a != b), None)
        if at is not None:
            found.add("/".join(new[: at + 1]))
    return [
        f"{r} is released under a redacted name (a path segment held a secret or a private name)" for r in sorted(found)
    ]


def path_key(path: str) -> str:
    """The form under which two released paths are one file: NFC-normalised and case-folded (see the module
    docstring)."""
    return unicodedata.normalize("NFC", path).casefold()


def _same(a: str, b: str) -> str:
    """How two released paths with one :func:`path_key` are said: one path, or two that one file system holds as one."""
    if a == b:
        return a
    return f"{a} and {b}, one path on a case-insensitive file system (macOS, Windows)"


def check_runs(runs: list[Path], names: list[str], labels: bool) -> None:
    """ConfigError (one line naming the run) when a run's released directory name (``names``, in the order of
    ``runs``) is not a folder name, is ``MANIFEST.json`` (or ``labels`` while ``labels``: --labels files are
    released), or is another run's (:func:`path_key`)."""
    seen: dict[str, tuple[Path, str]] = {}
    for run, name in zip(runs, names, strict=True):
        if name in ("", ".", "..") or "/" in name:
            raise ConfigError(f"the run {run} has no directory name of its own; give it by its folder's name (../NAME)")
        key = path_key(name)
        if key == path_key(MANIFEST):
            raise ConfigError(
                f"the run {run} would be released as {name}, the name of the release's manifest; release a copy of "
                "it under another directory name"
            )
        if labels and key == path_key(LABELS):
            raise ConfigError(
                f"the run {run} would be released as {name}, the folder of the --labels files; release a copy of it "
                "under another directory name, or the labels on their own"
            )
        if key in seen:
            other, was = seen[key]
            raise ConfigError(
                f"the runs {other} and {run} would both be released as {_same(was, name)}; release a copy of one "
                "under another directory name"
            )
        seen[key] = (run, name)


def check_files(files: list[tuple[str, Path]]) -> None:
    """ConfigError (one line naming both sources) when two of ``files`` (``(released path, source file)``) would be
    written as one file (:func:`path_key`), or one as a file where another needs a folder; MANIFEST.json is one of
    them. So every released path is written once and MANIFEST.json lists each once."""
    entries: list[tuple[str, str]] = [(MANIFEST, "the release's MANIFEST.json")] + [(p, str(s)) for p, s in files]
    taken: dict[str, tuple[str, str]] = {}
    folders: dict[str, tuple[str, str]] = {}  # every folder a released file needs, with the first file needing it
    for path, source in entries:
        segs = path.split("/")
        if any(s in ("", ".", "..") for s in segs):
            raise ConfigError(f"{source} would be released as {path}, which is not a path inside the release")
        key = path_key(path)
        if key in taken:
            was, other = taken[key]
            raise ConfigError(
                f"{other} and {source} would both be released as {_same(was, path)}; rename one (a copy) and "
                "release again"
            )
        taken[key] = (path, source)
        for k in range(1, len(segs)):
            folders.setdefault(path_key("/".join(segs[:k])), ("/".join(segs[:k]), source))
    for key, (path, source) in taken.items():
        if key in folders:
            folder, other = folders[key]
            raise ConfigError(
                f"{source} would be released as the file {path}, where {other} needs the folder {folder}; rename one "
                "(a copy) and release again"
            )


def write_release(out: Path, released: list[Released], manifest: bytes) -> None:
    """Write every file (each released path once: :func:`check_files` was passed), then MANIFEST.json (``manifest``,
    its bytes as checked: :func:`rollbench.release.manifest.check_manifest`) last, holding a lock on ``out`` (:class:`~rollbench.record.locks.DirLock`) and having found it
    still empty under that lock: ConfigError (nothing written) when another ``release`` holds it or wrote into it
    since the command's first check (two releases into one new --out: hostile round 18, b F3)."""
    from rollbench.record.files import atomic_write_bytes
    from rollbench.record.locks import directory_held

    out.mkdir(parents=True, exist_ok=True)
    with directory_held(out, f"--out {out} is being written by another rollbench release; a release needs its own"):
        if any(out.iterdir()):
            raise ConfigError(
                f"--out {out} is no longer empty (another release wrote into it); a release needs a fresh one"
            )
        for f in released:
            atomic_write_bytes(out / f.path, f.data, durable=False)
        atomic_write_bytes(out / MANIFEST, manifest)
