"""Output paths checked before anything is written: one line naming the option and the path, never a traceback.

:func:`check_output_path` is called by every command that writes a file or directory the user names (``eval
--out``, ``report --out`` and ``--plots``, ``optimize-instruction --out``) before any work starts, so that a path
that cannot be created fails at once (exit 2) instead of after the run, and nothing is created on the way:

* a component longer than :data:`NAME_MAX` bytes (Linux's ``NAME_MAX``; ``ENAMETOOLONG`` otherwise);
* an existing ancestor that is not a directory (``--out notes.txt/run``);
* an existing ancestor that this process may not write into;
* for a file: an existing directory, FIFO, socket or device at the path itself; for a directory: an existing
  non-directory.

What the file system still refuses when the path is created (``/proc``, a read-only mount) is caught by
:func:`make_dirs` with the same one-line error.
"""

from __future__ import annotations

import os
from pathlib import Path

from rollbench.core.contracts import ConfigError

NAME_MAX = 255  # bytes in one path component (Linux, ext4/xfs/btrfs/tmpfs: NAME_MAX in <linux/limits.h>)
PATH_MAX = 4096  # bytes in a whole path, with its terminating NUL (PATH_MAX in <linux/limits.h>)


def _exists(path: Path, what: str) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except OSError as exc:  # EACCES on an ancestor, ENAMETOOLONG, ...
        raise ConfigError(f"{what} {path} cannot be checked: {exc.strerror or exc}") from None


def check_output_path(path: Path, what: str, *, directory: bool) -> None:
    """ConfigError (naming ``what`` and ``path``) when ``path`` cannot be written as a directory (``directory``)
    or a regular file, for the reasons in the module docstring. Nothing is created."""
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise ConfigError(f"{what} {path}: the name {part[:24]}... is too long ({size} bytes; at most {NAME_MAX})")
    if len(os.fsencode(path.absolute())) >= PATH_MAX:
        raise ConfigError(f"{what} {path}: the path is too long (at most {PATH_MAX - 1} bytes)")
    if _exists(path, what):
        if not path.exists():
            raise ConfigError(f"{what} {path} is a dangling link; choose another path")
        if directory and not path.is_dir():
            raise ConfigError(f"{what} {path} exists and is not a directory")
        if not directory and path.is_dir():
            raise ConfigError(f"{what} {path} is a directory; give the path of a file")
        if not directory and not path.is_file():
            raise ConfigError(f"{what} {path} exists and is not a regular file")
        return
    parent = path.absolute().parent
    while not _exists(parent, what) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: {parent} is not writable")


def make_dirs(path: Path, what: str) -> bool:
    """``path.mkdir(parents=True, exist_ok=True)``, with the file system's refusal as a ConfigError naming
    ``what`` and ``path``. Returns whether this call made ``path`` itself (atomically: of two processes making it
    at once, exactly one is told so), False when it was a directory already."""
    try:
        path.mkdir(parents=True)
        return True
    except FileExistsError as exc:
        if path.is_dir():
            return False
        raise ConfigError(f"{what} {path} cannot be created: {exc.strerror or exc}") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be created: {exc.strerror or exc}") from None
