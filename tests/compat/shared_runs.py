"""Runs recorded once for both LeRobot lines (``scripts/lerobot_compat.sh --lerobot both``).

Some compat runs do not depend on the LeRobot line at all: they are recorded by the core install's ``rollbench eval``
(the scripted, Meta-World, PushT-controller and full libero_spatial runs), and only what reads them (each line's
``LeRobotDataset``, each line's evaluation loop) differs. ``lerobot_compat.sh`` gives both lines one fresh folder,
``$ROLLBENCH_COMPAT_RUNS``; :func:`shared_run` records run NAME into ``DIR/NAME`` in the first line to need it, under
an exclusive lock (``DIR/NAME.lock``) that the other line waits on, and the other line reads the same files. A run is
reused only when its recording returned (its own assertions passed): ``DIR/NAME.json`` holds what the recording
returned and is written last; a recording that failed or was skipped leaves none, so the next line records it again
and reports its own failure. Without the variable (tests/compat run by hand, one line) each run is recorded into the
test session's own temporary folder, as before.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ENV = "ROLLBENCH_COMPAT_RUNS"


def shared_run(
    name: str, record: Callable[[Path], dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    """``(run directory, what record(run directory) returned)`` for run ``name``; ``record`` writes the run into the
    folder it is given (which does not exist yet) and returns a JSON-serialisable dict, e.g. ``rollbench grade
    --json``. Recorded once per ``$ROLLBENCH_COMPAT_RUNS`` (module docstring), else once per call."""
    root = os.environ.get(ENV)
    if not root:
        out = tmp_path_factory.mktemp("runs") / name
        return out, record(out)
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    out, done = base / name, base / f"{name}.json"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when record raises
        if done.is_file():
            return out, json.loads(done.read_text())
        shutil.rmtree(out, ignore_errors=True)  # left by a recording that failed in the other line
        result = record(out)
        done.write_text(json.dumps(result))
        return out, result
