"""The one bounded walk of a directory tree: every lister of files rollbench does not trust uses it (a run
directory's files for grade and release, a dashboard run's signature, a checkpoint's fingerprint).

Rules:

* **Nothing below the root is followed or opened but directories.** Each directory is opened with
  ``O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK`` relative to its parent's descriptor, so a link (to a directory or
  elsewhere) is never entered, even one swapped in while the walk runs, and a FIFO or device is never opened
  (``O_DIRECTORY`` refuses it before any open of the node). Every entry is described by its ``lstat``. The root
  itself is opened as the caller names it (a link there is the caller's check: ``refuse_link`` for a run directory).
* **Stated bounds, the caller's policy.** :class:`Bounds` caps the directory entries read (every kind counts, as
  each directory is listed; a directory is read whole or not at all, never more than the remaining budget plus
  one entry) and the depth of directories entered. Past a bound the walk either *refuses* (:class:`TreeTooLarge`,
  a ConfigError with one line naming the directory) or *truncates*: it stops there and says so in
  :attr:`TreeListing.truncated`. Which directories are read is decided by names alone, so a truncated listing of
  an unchanged tree is the same every time.
* **Deterministic order.** Every list of a :class:`TreeListing` is in path order (by path components; the order
  of ``sorted`` over ``pathlib.Path``), whatever order the file system returns names in.

Cost: one ``open`` and one ``scandir`` per directory entered, one ``lstat`` per entry, nothing read or hashed; at
most ``max_depth + 1`` descriptors open at once; no recursion (a deep tree cannot exhaust Python's stack).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import kind_of

OnExcess = Literal["refuse", "truncate"]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TreeTooLarge(ConfigError):
    """A walk under ``on_excess="refuse"`` passed one of its :class:`Bounds` (one line: where, which bound)."""


@dataclass(frozen=True)
class Bounds:
    """The work one walk may do: ``max_entries`` directory entries read (of every kind, the root's included),
    directories entered at most ``max_depth`` levels below the root (the root's entries are at depth 0, so
    ``max_depth=0`` lists the root alone), and what happens past either: ``"refuse"`` (raise :class:`TreeTooLarge`)
    or ``"truncate"`` (stop, and say so in :attr:`TreeListing.truncated`)."""

    max_entries: int
    max_depth: int
    on_excess: OnExcess


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry below the root: ``rel`` (``/``-separated path relative to the root) and its ``lstat``: ``mode``,
    ``size`` (bytes), ``mtime_ns``, ``inode``, ``device``."""

    rel: str
    mode: int
    size: int
    mtime_ns: int
    inode: int
    device: int

    @property
    def name(self) -> str:
        return self.rel.rpartition("/")[2]

    @property
    def depth(self) -> int:
        """Directories between the root and the entry (0 for an entry of the root itself)."""
        return self.rel.count("/")

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def kind(self) -> str:
        """What it is in words ("regular file", "directory", "symbolic link", "FIFO", ...)."""
        return kind_of(self.mode)


@dataclass
class TreeListing:
    """What :func:`walk_tree` found, each list in path order: ``files`` (regular files, every name of a hard-linked
    file), ``others`` (everything else not entered: links, FIFOs, sockets, devices, and directories not entered),
    ``unreadable`` (directories that could not be opened or listed, e.g. removed meanwhile or without permission)
    and ``truncated`` (None when the walk is complete; under ``"truncate"``, why it stopped early)."""

    files: list[TreeEntry] = field(default_factory=list)
    others: list[TreeEntry] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    truncated: str | None = None


def _every(entry: TreeEntry) -> bool:
    return True


class _Excess(Exception):
    """A bound was passed (internal: turned into the caller's policy)."""


def _read(fd: int, rel: str, budget: int) -> list[TreeEntry]:
    """The entries of open directory ``fd`` by name; _Excess when there are more than ``budget`` (stops reading
    at ``budget + 1``)."""
    entries: list[TreeEntry] = []
    with os.scandir(fd) as it:
        for e in it:
            if len(entries) >= budget:
                raise _Excess
            try:
                st = e.stat(follow_symlinks=False)  # fstatat on the directory's descriptor: never follows
            except OSError:  # removed while listed
                continue
            r = f"{rel}/{e.name}" if rel else e.name
            entries.append(TreeEntry(r, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev))
    return sorted(entries, key=lambda x: x.name)


def walk_tree(root: Path, bounds: Bounds, descend: Callable[[TreeEntry], bool] = _every) -> TreeListing:
    """Every entry at and below directory ``root``, by the module's rules, as a :class:`TreeListing`. ``descend``
    chooses which directories are entered (default: all); one it declines is listed in ``others`` (its own entries
    are not read). A ``root`` that is missing gives an empty listing; one that is not a directory or cannot be
    read, an empty listing with ``""`` in ``unreadable``. Raises :class:`TreeTooLarge` past ``bounds`` under
    ``"refuse"``."""
    walker = _Walker(root, bounds, descend)
    try:
        fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            walker.out.unreadable.append("")
        return walker.out
    try:
        walker.run(fd)
    finally:
        for open_fd, _ in walker.stack:
            os.close(open_fd)
    out = walker.out
    for found in (out.files, out.others):
        found.sort(key=lambda e: e.rel.split("/"))
    out.unreadable.sort(key=lambda r: r.split("/"))
    return out


class _Walker:
    """One walk's state: what was found, the entries left to read, the open directories (depth-first)."""

    def __init__(self, root: Path, bounds: Bounds, descend: Callable[[TreeEntry], bool]) -> None:
        self.root, self.bounds, self.descend = root, bounds, descend
        self.out = TreeListing()
        self.budget = bounds.max_entries
        self.stack: list[tuple[int, Iterator[TreeEntry]]] = []  # (open directory, its subdirectories to enter)

    def run(self, fd: int) -> None:
        if not self.enter(fd, None):
            return
        while self.stack:
            top, pending = self.stack[-1]
            sub = next(pending, None)
            if sub is None:
                os.close(self.stack.pop()[0])
                continue
            if sub.depth + 1 > self.bounds.max_depth:
                self.excess(sub, f"{self.root / sub.rel}: more than {self.bounds.max_depth} directory levels below")
                return
            try:
                fd = os.open(sub.name, _DIR_FLAGS, dir_fd=top)
            except OSError:  # removed, replaced by a link or a FIFO meanwhile, or no permission
                self.out.unreadable.append(sub.rel)
                continue
            if not self.enter(fd, sub):
                return

    def enter(self, fd: int, sub: TreeEntry | None) -> bool:
        """List open directory ``fd`` (closed once its subdirectories are done); False when the walk stops here."""
        self.stack.append((fd, iter(())))  # closed by the walk from here on, whatever happens
        rel = sub.rel if sub is not None else ""
        try:
            entries = _read(fd, rel, self.budget)
        except _Excess:
            self.excess(sub, f"{self.root / rel}: more than {self.bounds.max_entries} directory entries under")
            return False
        except OSError:
            self.out.unreadable.append(rel)
            return True
        self.budget -= len(entries)
        enter = []
        for e in entries:
            if e.is_file:
                self.out.files.append(e)
            elif e.is_dir and self.descend(e):
                enter.append(e)
            else:
                self.out.others.append(e)
        self.stack[-1] = (fd, iter(enter))
        return True

    def excess(self, sub: TreeEntry | None, why: str) -> None:
        """The caller's policy past a bound at directory ``sub``: raise, or stop here, the directories not entered
        (``sub`` and those still pending) listed in ``others``, and record why."""
        why = f"{why} {self.root}"
        if self.bounds.on_excess == "refuse":
            raise TreeTooLarge(f"{why}; refused")
        self.out.truncated = why
        self.out.others.extend([sub] if sub is not None else [])
        for _, pending in self.stack:
            self.out.others.extend(pending)
