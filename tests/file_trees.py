"""A directory tree's contents as a comparable value, for tests that check a command wrote, deleted or changed
nothing: ``before = tree_hash(run)`` ... ``assert tree_hash(run) == before``.

Written with ``os.walk`` and ``hashlib`` directly (an oracle independent of rollbench's own listing,
``rollbench.core.walk``)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def tree_hash(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file under ``root``: a regular file's bytes, a symbolic link's target
    name (the link is not followed: what it leads to is not part of the tree), and for a FIFO, socket or device
    its type (never opened, so a FIFO cannot block the test)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for f in files:
            p = Path(dirpath) / f
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                data = os.readlink(p).encode()
            elif stat.S_ISREG(mode):
                data = p.read_bytes()
            else:
                data = f"file type {stat.S_IFMT(mode):o}".encode()
            out[str(p.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out
