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
from pathlib import Path

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
