"""Shared test helpers (keep this file small and free of rollbench imports: tests/compat loads it from the LeRobot
venv, where rollbench is not installed).

``run_cli(*args)`` runs the ``rollbench`` command line as a subprocess, with no stdin, and returns the completed
process (stdout/stderr as text). The executable is ``$ROLLBENCH_BIN``, else the one beside this Python, else
``.venv/bin/rollbench`` of this checkout.

Offscreen GL: MuJoCo fixes its GL back-end when first imported, and a test module may import a simulator (e.g.
``pytest.importorskip("metaworld")``) before anything of rollbench runs; so the back-end is chosen here, once, the
way rollbench chooses it (:func:`rollbench.core.gl.configure_offscreen_gl`), before any test module is imported.

Output width: rollbench's piped output is ``$COLUMNS`` wide when that is set; the launcher's (a CI's terminal of 80
columns) is removed here, before anything of rollbench is imported, so that what a test reads never depends on how
the suite was launched (tests of the width set ``COLUMNS`` themselves).

``tests/compat`` (read run directories with lerobot's own ``LeRobotDataset``) is collected only where lerobot is
importable: ``scripts/lerobot_compat.sh`` runs it in its own venv; lerobot never enters the core install.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

collect_ignore = [] if importlib.util.find_spec("lerobot") else ["compat"]

if importlib.util.find_spec("rollbench"):  # not in the LeRobot venv
    from rollbench.core.gl import configure_offscreen_gl

    configure_offscreen_gl()


def rollbench_bin() -> str:
    if os.environ.get("ROLLBENCH_BIN"):
        return os.environ["ROLLBENCH_BIN"]
    beside = Path(sys.executable).with_name("rollbench")
    return str(beside if beside.exists() else REPO / ".venv" / "bin" / "rollbench")


def run_cli(
    *args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [rollbench_bin(), *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def double() -> Iterator[Any]:
    """The LLM provider test double (:mod:`agent_double`) served on loopback and named as the agent policies'
    provider (its URL and key in the environment) for one test."""
    from agent_double import serve_as_provider

    with serve_as_provider() as served:
        yield served


@pytest.fixture(scope="module")
def reach_recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One episode of ``scripted/reach`` (policy ``zero``, 3 steps, seed 1), recorded once per test module."""
    from rollbench.api import evaluate

    out = tmp_path_factory.mktemp("reach") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=1, max_steps=3, seed=1)
    return out


@pytest.fixture
def notes_run(reach_recorded: Path, tmp_path: Path) -> Path:
    """A copy of :func:`reach_recorded` at ``tmp_path/src/run`` with an empty ``notes/`` directory, where release tests
    plant the files they hand over."""
    import shutil

    out = tmp_path / "src" / "run"
    shutil.copytree(reach_recorded, out)
    (out / "notes").mkdir()
    return out
