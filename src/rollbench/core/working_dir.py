"""A plug-in's ``os.chdir`` never moves rollbench (hostile round 10, F5).

The working directory is one per process: a policy (or a library it loads) that changes it during a call would
make every relative path rollbench reads or writes afterwards (``--out``, a training run's checkpoints, a labels
file) name another place, and a run's episodes were written over another run's recorded data that way. So the
calls into a policy are bracketed: :func:`working_dir` before, :func:`check_working_dir` after; a change is put
back at once and named as the caller's error (a policy error for an episode's call, a refusal for a factory).
The run directory is also written under its absolute form (:func:`rollbench.api.evaluate`), so the writer is safe
even while a call is still running."""

from __future__ import annotations

import os


def working_dir() -> str | None:
    """The process's working directory now, or None when it has none (deleted): then nothing is checked."""
    try:
        return os.getcwd()
    except OSError:
        return None


def check_working_dir(before: str | None, what: str) -> str | None:
    """After a call into plug-in code: None when the working directory is still ``before``; else put it back (when
    it still exists) and return the one-line reason, naming ``what`` (``policy.act``) and the directory it went to."""
    if before is None:
        return None
    now = working_dir()
    if now == before:
        return None
    try:
        os.chdir(before)
    except OSError:
        return f"{what} changed rollbench's working directory and its old one is gone; use absolute paths"
    went = "a directory that no longer exists" if now is None else repr(now)
    return (
        f"{what} changed rollbench's working directory (os.chdir to {went}); rollbench changed it back: "
        "a policy must not change the working directory (use absolute paths)"
    )
