"""The README's custom policy (``module:factory``) and custom gymnasium env (``gym:MODULE:ID``) examples, run exactly
as written there: the files are taken from README.md and the commands run as subprocesses (the real executable)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, rollbench_bin

README = (REPO / "README.md").read_text()


def block_after(marker: str) -> str:
    m = re.search(re.escape(marker) + r"\n\n```python\n(.*?)```", README, re.S)
    assert m, f"README has no python block after {marker!r}"
    return m.group(1)


def command_with(needle: str) -> list[str]:
    (line,) = [ln for ln in README.splitlines() if needle in ln and ln.startswith("PYTHONPATH=. ")]
    args = shlex.split(line.removeprefix("PYTHONPATH=. "))
    assert args[0] == ".venv/bin/rollbench"
    return [rollbench_bin(), *args[1:]]


@pytest.mark.parametrize(
    ("module", "needle", "task", "success_rate"),
    [
        ("my_policy.py", "--policy my_policy:make", "scripted/reach", 1.0),
        ("my_env.py", "--env gym:my_env:Reach1D-v0", "gym/my_env:Reach1D-v0", None),
    ],
)
def test_readme_example_runs_as_written(
    module: str, needle: str, task: str, success_rate: float | None, tmp_path: Path
) -> None:
    (tmp_path / module).write_text(block_after(f"`{module}`:"))
    args = command_with(needle)
    r = subprocess.run(
        args, cwd=tmp_path, env={**os.environ, "PYTHONPATH": "."}, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / args[args.index("--out") + 1]
    results = json.loads((out / "run.json").read_text())["results"]
    assert results["status"] == "OK" and list(results["tasks"]) == [task]
    assert results["episodes_recorded"] == 5
    if success_rate is not None:
        assert results["tasks"][task]["success_rate"] == success_rate
