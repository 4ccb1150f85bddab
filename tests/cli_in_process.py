"""``rollbench`` run inside the test process (Typer's CliRunner), for tests about what a command prints, returns and
writes rather than about the process boundary (signals, a hang on a FIFO, a real process's pipes): it spares the
~0.5 s interpreter start and imports of a real ``rollbench`` process per command.

:func:`invoke` answers like ``conftest.run_cli``: a ``subprocess.CompletedProcess`` with ``returncode`` (the exit
code), ``stdout`` and ``stderr``. An exception that escapes the command is written into ``stderr`` as the
interpreter would print it (``Traceback (most recent call last): ...``) with exit code 1, so a test's "no traceback
reaches the user" check keeps its meaning."""

from __future__ import annotations

import contextlib
import os
import subprocess
import traceback
from collections.abc import Mapping
from pathlib import Path


def invoke(
    *args: object, cwd: Path | None = None, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``rollbench ARGS`` in this process: in ``cwd`` when given, with ``env`` added to the environment (a None
    value unsets that variable) for the command's duration."""
    from typer.testing import CliRunner

    from rollbench.cli import common
    from rollbench.cli.main import app

    argv = [os.fspath(a) if isinstance(a, Path) else str(a) for a in args]
    width, common.out.width = common.out.width, 160  # what a real process writing to a pipe has (cli/common.py)
    try:
        with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
            result = CliRunner().invoke(app, argv, env=env)
    finally:
        common.out.width = width
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(argv, result.exit_code, result.stdout, stderr)
