"""The one way rollbench lists and opens the files of a run directory, which may be copied, shared or tampered with.

Rules (issue 20, item 3; docs/design.md "Threat model"):

* **Regular files only.** A listed or opened file is a regular file (``S_ISREG`` of ``lstat`` when listing, of
  ``fstat`` of the opened descriptor when opening). A FIFO, socket or device in its place is never opened for
  reading (opening a FIFO would block forever); it is reported as skipped.
* **No links.** Listing never descends into a symbolic link and never lists one; opening uses ``O_NOFOLLOW`` for
  the file and refuses a path whose directories below the run directory pass through a link. So a file is never
  seen twice through ``ln -s chunk-000 data/chunk-001`` and nothing outside the run is read.
* **Each file once.** A listing holds each ``(st_dev, st_ino)`` once (a hard link to an already listed file is
  skipped), in path order.
* **Bounded time.** Opening uses ``O_NONBLOCK``, which makes ``open(2)`` of a FIFO return at once (POSIX
  ``open``: "O_NONBLOCK ... shall return without delay"); the descriptor is then refused by ``fstat``. A listing
  stops after :data:`MAX_ENTRIES` directory entries (ConfigError) so a hostile tree cannot make it run unbounded.

Errors: :class:`UnsafeFile` (an ``OSError``, so readers that report an unreadable file report this one too) for a
file that is not a regular file or is reached through a link.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import kind_of, loads_strict
from rollbench.core.walk import Bounds, TreeEntry, walk_tree

MAX_ENTRIES = 1_000_000  # directory entries one listing may visit: 1,000 runs of 1,000 episodes have ~10 per episode
MAX_DEPTH = 64  # directory levels below a run directory one listing enters (the writer's tree is 3 deep)
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(OSError):
    """A file of a run that rollbench does not read: not a regular file, or reached through a symbolic link."""


def is_regular(path: Path) -> bool:
    """True when ``path`` itself (not following a link) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def refuse_link(path: Path) -> None:
    """ConfigError (one line) when ``path`` (a run directory as given, a trailing ``/`` ignored) is a symbolic link:
    rollbench reads and writes a run only through its real path (the directory lock and ``O_NOFOLLOW`` opens refuse
    a link; hostile8 F5)."""
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"{path} is a link to {os.readlink(path)}, which does not exist; give a run directory")
    if path.is_symlink():
        raise ConfigError(
            f"{path} is a link (to {os.readlink(path)}); rollbench reads runs only through their real path: "
            f"give {path.resolve()} instead"
        )


def check_no_link_below(root: Path, path: Path) -> None:
    """UnsafeFile when a directory between ``root`` and ``path`` is a symbolic link (or ``path`` is not under it)."""
    real_root = os.path.realpath(root)
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        raise UnsafeFile(f"{path} is not inside the run directory {root}; not read")
    parent = os.path.dirname(rel)
    expected = os.path.normpath(os.path.join(real_root, parent))
    if os.path.realpath(os.path.join(root, parent)) != expected:
        raise UnsafeFile(f"{path} is reached through a symbolic link inside {root}; not read")


def open_regular(
    path: Path,
    root: Path | None = None,
    *,
    follow_links: bool = False,
    max_bytes: int | None = None,
    dense: bool = False,
) -> BinaryIO:
    """Open ``path`` for reading in binary mode if it is a regular file, without following a link at its last
    component (``O_NOFOLLOW``; ``follow_links=True`` allows one, for a file the user named on the command line) or,
    when ``root`` is given, in any directory below ``root``. Never blocks on a FIFO. Raises UnsafeFile (an OSError)
    otherwise, FileNotFoundError when missing; with ``max_bytes``, UnsafeFile when it is larger; with ``dense``,
    UnsafeFile when it has a hole (:func:`check_dense`). Both are checked on the open descriptor before anything is
    read. The caller closes the file."""
    if root is not None:
        check_no_link_below(root, path)
    try:
        fd = os.open(path, _OPEN_FLAGS & ~os.O_NOFOLLOW if follow_links else _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link (O_NOFOLLOW)
            raise UnsafeFile(f"{path} is a symbolic link; not read") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(f"{path} is a {kind_of(mode)}, not a regular file; not read")
        if max_bytes is not None and (size := os.fstat(fd).st_size) > max_bytes:
            raise UnsafeFile(f"{path} is {size:,} bytes, over the {max_bytes:,} rollbench reads; not read")
        if dense:
            check_dense(path, fd)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_bytes(
    path: Path,
    root: Path | None = None,
    *,
    follow_links: bool = False,
    max_bytes: int,
    dense: bool = False,
) -> bytes:
    """The bytes of regular file ``path``, at most ``max_bytes`` of them (every reader states its bound; hostile
    round 19, F2); see :func:`open_regular` for what is refused, ``max_bytes`` and ``dense`` included."""
    with open_regular(path, root, follow_links=follow_links, max_bytes=max_bytes, dense=dense) as f:
        return f.read()


SPARSE_RATIO = 256  # a file with under 1/256 of its size allocated is read as holey (compressed file systems: <~32x)


def check_dense(path: Path, fd: int) -> None:
    """UnsafeFile when open file ``fd`` has a hole (``lseek(SEEK_HOLE)`` finds one before its end) or, where the
    file system does not report holes, under 1/:data:`SPARSE_RATIO` of its size (over 1 MiB) on disk
    (``st_blocks``): a hole reads as NUL bytes, which no JSON document rollbench writes holds, so such a file
    (``truncate -s 1G run.json``) is named as damaged without reading it (hostile round 15, F7). A file of 1 MiB or
    less is not checked (reading it costs nothing; its NULs make it invalid JSON). The file offset is left at 0."""
    st = os.fstat(fd)
    if st.st_size <= 1 << 20:
        return
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:  # the file system cannot say
        hole = st.st_size
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    on_disk = st.st_blocks * 512
    if hole < st.st_size or on_disk * SPARSE_RATIO < st.st_size:
        raise UnsafeFile(
            f"{path} is a sparse file ({st.st_size:,} bytes, {on_disk:,} of them on disk, a hole at byte {hole:,}); "
            "not read"
        )


MAX_JSON_BYTES = 1 << 28  # 256 MiB: a larger JSON run file is not read (parsed, `[0,0,...]` takes ~7x its bytes)
MAX_LIVE_BYTES = 1 << 20  # run.live.json: a few progress counts (~200 bytes), rewritten every few seconds


def read_regular_json(
    path: Path, root: Path | None = None, *, follow_links: bool = False, max_bytes: int = MAX_JSON_BYTES
) -> Any:
    """The JSON document in regular file ``path``; ValueError saying why when it is not UTF-8 JSON (malformed, not
    UTF-8, or nested deeper than the parser's recursion limit); OSError (:class:`UnsafeFile`) as :func:`open_regular`,
    and for a file over ``max_bytes`` or with a hole (:func:`check_dense`: no JSON document has one)."""
    data = read_regular_bytes(path, root, follow_links=follow_links, max_bytes=max_bytes, dense=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"it is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})") from None
    return loads_strict(text, finite=False)  # NaN read as written: the checks of the values name it


@dataclass
class Listing:
    """What :func:`scan_run_files` found: ``files`` (regular, each once, path order) and ``skipped`` (path, why)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


RUN_BOUNDS = Bounds(max_entries=MAX_ENTRIES, max_depth=MAX_DEPTH, on_excess="refuse")


def scan_run_files(root: Path, pattern: str = "**") -> Listing:
    """The regular files under run directory ``root`` matching ``pattern`` (``/``-separated ``fnmatch`` segments,
    e.g. ``data/chunk-*/file-*.parquet``; ``**`` alone: every file at any depth), by the rules of the module
    docstring (one :func:`rollbench.core.walk.walk_tree` within :data:`RUN_BOUNDS`: ConfigError past them). Entries
    that match but are links, FIFOs, sockets, devices, directories (where the pattern's last segment names a file)
    or a second name of a listed file are in ``skipped``. A missing ``root`` gives an empty listing."""
    parts = pattern.split("/")
    everywhere = parts == ["**"]
    last = len(parts) - 1

    def matches(e: TreeEntry) -> bool:
        return everywhere or (e.depth <= last and fnmatch.fnmatchcase(e.name, parts[e.depth]))

    tree = walk_tree(root, RUN_BOUNDS, lambda e: matches(e) and (everywhere or e.depth < last))
    out, seen = Listing(), set()
    for e in tree.files:  # path order: the first name of a hard-linked file is the one listed
        path = root / e.rel
        if not matches(e):
            continue
        if not everywhere and e.depth < last:  # a file where the pattern names a directory (data/ replaced by a file)
            out.skipped.append((path, "a regular file where a directory is expected"))
        elif (e.device, e.inode) in seen:
            out.skipped.append((path, "a second name (hard link) of a file already read"))
        else:
            seen.add((e.device, e.inode))
            out.files.append(path)
    for e in tree.others:
        if matches(e):  # a directory not entered is one where the pattern names a file
            out.skipped.append((root / e.rel, f"a {e.kind}, not a regular file"))
    out.files.sort()
    out.skipped.sort()
    return out


def run_files(root: Path, pattern: str = "**") -> list[Path]:
    """The ``files`` of :func:`scan_run_files`."""
    return scan_run_files(root, pattern).files


def iter_run_dirs(parent: Path) -> Iterator[Path]:
    """The directories directly in ``parent`` (not links) holding a regular ``run.json``, in name order."""
    tree = walk_tree(parent, Bounds(MAX_ENTRIES, 0, "refuse"), descend=lambda e: False)
    for e in tree.others:
        if e.is_dir and is_regular(parent / e.rel / "run.json"):
            yield parent / e.rel


def run_dir_containing(path: Path) -> Path | None:
    """The run directory (a directory holding ``run.json``) that ``path`` is, or lies inside (links resolved)."""
    real = Path(os.path.realpath(path))
    for d in (real, *real.parents):
        if (d / "run.json").exists():
            return d
    return None


RELEASE_MANIFEST = "MANIFEST.json"  # the record ``rollbench release`` writes last in every release directory
RELEASE_MARK = b'"rollbench_release"'  # the key that marks a MANIFEST.json as a rollbench release's
_SCAN_CHUNK = 1 << 20  # bytes read at a time while looking for the mark (memory bound of the scan)


def is_release_manifest(path: Path) -> bool:
    """True when ``path`` is a regular file (not a link) holding a JSON object with the key
    ``"rollbench_release"``: the manifest of a directory ``rollbench release`` wrote. Read in 1 MiB chunks, the end
    first (its keys are sorted, so the mark lies near the end), at most :data:`MAX_JSON_BYTES`; a link, FIFO or
    unreadable file is not one."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if f.read(_SCAN_CHUNK).lstrip()[:1] != b"{":
                return False
            starts = [max(0, size - _SCAN_CHUNK), *range(0, min(size, MAX_JSON_BYTES), _SCAN_CHUNK)]
            for start in starts:  # each window overlaps the next by the mark's length less one byte
                f.seek(start)
                if RELEASE_MARK in f.read(_SCAN_CHUNK + len(RELEASE_MARK) - 1):
                    return True
    except OSError:
        return False
    return False


def release_dir_containing(path: Path) -> Path | None:
    """The release directory (one whose ``MANIFEST.json`` :func:`is_release_manifest`) that ``path`` is, or lies
    inside (links resolved)."""
    real = Path(os.path.realpath(path))
    for d in (real, *real.parents):
        if is_regular(d / RELEASE_MANIFEST) and is_release_manifest(d / RELEASE_MANIFEST):
            return d
    return None


def refuse_inside_release(out: Path, option: str = "--out") -> None:
    """ConfigError when output path ``out`` is, or lies inside, a release directory: its MANIFEST.json is the record
    of every released file (sha256, size) and redaction, written once by ``rollbench release``, so nothing is
    written over it or beside it (hostile round 15, F4)."""
    release = release_dir_containing(out)
    if release is not None:
        raise ConfigError(
            f"{option} {out} lies inside the release directory {release} (its {RELEASE_MANIFEST} records every "
            "released file and redaction); write outputs elsewhere"
        )


# The records rollbench keeps outside run directories, by file name: (the kind of record, what the file is). A study
# record (every kind but labels) also claims the other files of its directory (a checkpoint selection's figure).
RECORD_FILES: dict[str, tuple[str, str]] = {
    "sequential.json": ("sequential", "a sequential study's decision log"),
    "checkpoints.json": ("checkpoints", "a checkpoint selection's ranking"),
    "checkpoint_files.json": ("checkpoints", "a checkpoint selection's record of its checkpoint files"),
    "elimination.json": ("checkpoints", "a checkpoint elimination's record"),
    "optimize.json": ("optimize", "an optimisation search's state"),
    "labels.json": ("labels", "a dashboard label file (every label and its history)"),
}


def refuse_inside_run(out: Path, option: str = "--out", own: str | None = None) -> None:
    """ConfigError when output path ``out`` is, or lies inside, a run directory: rollbench never writes its reports,
    plots or exports into a recorded run (they would replace or join the run's own files); or a release directory
    (:func:`refuse_inside_release`); or when it is an
    existing file rollbench keeps as a record (:func:`refuse_record`; ``own``: the kind of record the caller
    rewrites itself)."""
    run = run_dir_containing(out)
    if run is not None:
        raise ConfigError(
            f"{option} {out} lies inside the run directory {run}; write outputs elsewhere (a run directory holds "
            "only what its recorder wrote)"
        )
    refuse_inside_release(out, option)
    refuse_shared_file(out, option)
    refuse_record(out, option, own)


def refuse_own_input(out: Path, option: str, inputs: Mapping[str, Sequence[Path | str | None]]) -> None:
    """ConfigError when output path ``out`` is one of the command's own input files (``inputs``: each option's name,
    ``"PATHS"`` for the arguments, with the paths it was given; a value that is not an existing regular file is
    left out, as text that names no file, e.g. a rubric's name): writing it would replace what the command reads
    (``report --labels mine.json --out mine.json``: hostile round 18, b F1). Compared as files (device and inode),
    so another spelling or a symbolic link of the same file counts."""
    try:
        st = os.stat(out)
    except OSError:
        return  # a new path is no input
    for name, given in inputs.items():
        for path in given:
            if path is None:
                continue
            try:
                other = os.stat(path)
            except (OSError, ValueError):
                continue
            if stat.S_ISREG(other.st_mode) and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                raise ConfigError(
                    f"{option} {out} is the file this command reads as {name} {path}; choose another path"
                )


def refuse_record(out: Path, option: str = "--out", own: str | None = None) -> None:
    """ConfigError when output path ``out`` is an existing regular file that one of :data:`RECORD_FILES` names, or
    lies in a directory holding a study record, of a kind other than ``own`` (the record a command rewrites in its
    own output directory: ``sequential --out S`` its ``sequential.json``). A report written over a study's decision
    log or a label file would lose what only that file records. A new path, or a directory, passes."""
    if not is_regular(out):
        return
    kind, what = RECORD_FILES.get(out.name, (own, ""))
    if kind != own:
        raise ConfigError(f"{option} {out} is {what}; choose another path")
    for name, (kind, what) in RECORD_FILES.items():
        if kind not in (own, "labels") and is_regular(out.parent / name):
            raise ConfigError(f"{option} {out} lies beside {what} ({out.parent / name}); choose another path")


def refuse_shared_file(out: Path, option: str = "--out") -> None:
    """ConfigError when output path ``out`` exists as a file that is not a regular file or has other hard links
    (``st_nlink > 1``): appending to it or rewriting it in place would change every other name of that file, a
    recorded run's among them (issue 42). A missing path, a directory or a lone regular file passes."""
    try:
        st = os.lstat(out)
    except OSError:
        return  # missing (created new) or unreadable: check_output_path and the open itself say why
    if stat.S_ISDIR(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{option} {out} exists and is not a regular file ({_kind(st.st_mode)}); choose another path")
    if st.st_nlink > 1:
        raise ConfigError(
            f"{option} {out} has {st.st_nlink} hard links; rollbench writes only to a file with no other names "
            "(give a new path)"
        )


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((word for test, word in kinds if test(mode)), "a device")


def open_append_private(path: Path, option: str) -> TextIO:
    """``path`` opened for appending text (created 0o666 minus umask if missing), refused with ConfigError when it
    is a link, not a regular file, or has other hard links (checked on the open file, so no race)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise ConfigError(f"{option} {path} cannot be opened: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise ConfigError(f"{option} {path} is not a regular file with a single name; give a new path")
    return os.fdopen(fd, "a", encoding="utf-8")
