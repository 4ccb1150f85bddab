"""The one version lookup of rollbench's own interpreter: :func:`installed_version`.

The far sides (the env host's adapters under ``envs/hosted/far/`` and the LeRobot policy host) run in another
interpreter where rollbench is not installed, so they cannot import this module and keep their own three-line copy.
"""

from __future__ import annotations

import importlib.metadata


def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist`` (``importlib.metadata``; no package is imported), or None when
    it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
