"""An exclusive lock held through a lock file that exists only while the lock is held (no empty lock file is left
in a finished run directory or beside a label file).

Protocol (``flock(2)``, so the operating system releases the lock when the holder dies):

* acquire: open (creating) ``PATH``, take ``flock(LOCK_EX | LOCK_NB)``, then check that ``PATH`` still names the
  file that was locked (same device and inode): a holder that released in between unlinked it, and a lock on an
  unlinked file protects nothing, so the attempt starts again; retried every 50 ms until ``timeout_s``;
* release: unlink ``PATH`` while still holding the lock, then close (which releases it).

So at any instant at most one process holds a lock on the file that ``PATH`` names. A lock file left by a holder
that was killed is harmless: the next holder locks it (the kernel released the dead holder's lock) and removes it
when it releases. A ``PATH`` that is a symbolic link or not a regular file is refused (``O_NOFOLLOW``; ``S_ISREG``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rollbench.core.contracts import ConfigError

RETRY_S = 0.05


class LockHeld(Exception):
    """The lock was not acquired within the timeout: another process holds it."""


class PathLock:
    """Exclusive lock through ``path`` (see the module docstring). Use as a context manager; raises
    :class:`LockHeld` when not acquired within ``timeout_s`` seconds (0: one attempt), ``OSError`` when ``path``
    cannot be a lock file (a link, a directory, a FIFO, a read-only place)."""

    def __init__(self, path: Path, timeout_s: float = 0.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._fd: int | None = None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file", str(self.path))
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise LockHeld(str(self.path)) from None
                time.sleep(RETRY_S)
                continue
            except BaseException:
                os.close(fd)
                raise
            if self._names(fd):
                self._fd = fd
                return
            os.close(fd)  # released and unlinked by its holder after we opened it: try again on the new file

    def _names(self, fd: int) -> bool:
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def __enter__(self) -> PathLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_NO_DIR_LOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)  # a file system without flock on directories


class DirLock:
    """An exclusive ``flock`` on a directory itself (a descriptor opened on it, ``O_DIRECTORY | O_NOFOLLOW``).

    A lock file can be deleted by anyone while its holder runs (a new file of the same name is then free to lock);
    the directory cannot go away while it holds files, so a second holder of the directory is refused whatever
    happens to the files in it. :class:`LockHeld` when another process holds it (retried for ``timeout_s``); ``OSError`` when the
    path is a link or not a directory. On a file system that cannot lock a directory (``ENOLCK``: some NFS mounts)
    the lock is not taken and :attr:`held` stays False."""

    def __init__(self, path: Path, timeout_s: float = 0.5) -> None:
        self.path = path
        self.timeout_s = timeout_s  # retried: a reader's probe (dir_locked) holds the lock for microseconds
        self._fd: int | None = None
        self.held = False

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockHeld(str(self.path)) from None
                    time.sleep(RETRY_S)
        except LockHeld:
            os.close(fd)
            raise
        except OSError as exc:
            os.close(fd)
            if exc.errno in _NO_DIR_LOCK:
                return
            raise
        self._fd, self.held = fd, True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd, self.held = self._fd, None, False
            os.close(fd)


def dir_locked(path: Path) -> bool:
    """True when another process holds a :class:`DirLock` on ``path`` (probed with a non-blocking ``flock`` that is
    released at once; False for a path that is not a directory or cannot be opened)."""
    return _held(path, os.O_DIRECTORY, stat.S_ISDIR)


def file_lock_held(path: Path) -> bool:
    """True when a process holds a :class:`PathLock` on the regular file ``path`` (a non-blocking ``flock`` probe,
    released at once; never creates the file, never follows a link nor opens a FIFO)."""
    return _held(path, os.O_NONBLOCK, stat.S_ISREG)


def _held(path: Path, flags: int, is_kind: Callable[[int], bool]) -> bool:
    """Probe ``path`` (opened read-only with ``flags``, never through a link) with a non-blocking exclusive
    ``flock``: True when another holder blocks it; False when it is free, of the wrong kind or cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags)
    except OSError:
        return False
    try:
        if not is_kind(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases a probe's lock
    return False


@contextmanager
def directory_held(path: Path, busy: str) -> Iterator[None]:
    """A :class:`DirLock` on the existing directory ``path`` held for the ``with`` block: ConfigError ``busy`` (one
    line for the user) when another process holds it, ConfigError naming ``path`` when it cannot be locked. What a
    command that writes a folder of its own for a long time takes (a checkpoints OUT, a release's --out), so a
    second command on the same folder is refused instead of mixing two records."""
    lock = DirLock(path, timeout_s=0.5)
    try:
        lock.acquire()
    except LockHeld:
        raise ConfigError(busy) from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be locked: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        lock.release()
