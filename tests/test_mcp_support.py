"""The MCP tests' server subprocess imports the rollbench under test (this process's), whether or not the test run
was launched with PYTHONPATH set: else a worktree's MCP tests would exercise the venv's installed copy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rollbench
from mcp_support import server_env


@pytest.mark.parametrize("pythonpath", [None, "/nonexistent/elsewhere"])
def test_the_server_process_imports_the_rollbench_this_test_imported(
    monkeypatch: pytest.MonkeyPatch, pythonpath: str | None
) -> None:
    if pythonpath is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", pythonpath)
    r = subprocess.run(
        [sys.executable, "-c", "import rollbench; print(rollbench.__file__)"],
        env=server_env(), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert Path(r.stdout.strip()).resolve() == Path(rollbench.__file__).resolve()
