"""The LeRobot policy host process, seen from rollbench: start it, call it with deadlines, stop it.

The host (:mod:`rollbench.policies.lerobot.host`, a script) runs in LeRobot's interpreter, found in this order:
the ``python`` policy option, ``$ROLLBENCH_LEROBOT_PYTHON``, this interpreter when it can import lerobot, then
``.venv-lerobot/bin/python`` in the working directory or in the rollbench checkout (``bash
scripts/lerobot_compat.sh`` builds it with lerobot 0.6.1; ``--lerobot 0.4.4`` builds ``.venv-lerobot-0.4.4``, which
is used only when named). It is a child process with two pipes (rollbench -> host, host -> rollbench;
:mod:`rollbench.wire.pipe.frames`, :class:`rollbench.wire.pipe.child.ChildProcess`), its stdout and stderr go to a
log file whose last lines are quoted in
errors, and it exits when its input pipe closes, so it dies with rollbench.

Faults: a host that exits, closes its pipe, sends a malformed frame or misses a deadline is
:class:`~rollbench.core.contracts.InfrastructureError` (the host is then stopped; the next episode starts a fresh one); an
exception raised by lerobot's code for one slot is that slot's :class:`~rollbench.core.contracts.EpisodeError` (fault
``policy``). Failing to start or load the checkpoint is a ConfigError (exit 2, before any episode).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, InfrastructureError
from rollbench.wire.pipe.child import ChildFailed, ChildProcess

HOST_SCRIPT = Path(__file__).with_name("host.py")
INSTALL_HINT = "bash scripts/lerobot_compat.sh --eval (builds .venv-lerobot with lerobot 0.6.1 and torch)"


def find_python(option: str | None) -> str:
    """The interpreter to run the host with (see the module docstring); ConfigError when there is none."""
    if option:
        if not Path(option).is_file():
            raise ConfigError(f"lerobot policy: python {option} does not exist")
        return option
    env = os.environ.get("ROLLBENCH_LEROBOT_PYTHON")
    if env:
        if not Path(env).is_file():
            raise ConfigError(f"lerobot policy: ROLLBENCH_LEROBOT_PYTHON={env} does not exist")
        return env
    if importlib.util.find_spec("lerobot") is not None:
        return sys.executable
    for root in (Path.cwd(), *Path(__file__).resolve().parents):
        candidate = root / ".venv-lerobot" / "bin" / "python"
        if candidate.is_file():
            return str(candidate)
    raise ConfigError(
        "lerobot policy: no interpreter with lerobot found; build one with "
        f'{INSTALL_HINT}, or give --policy-options \'{{"python": "PATH"}}\''
    )


def _last_line(failure: str, python: str) -> str:
    """One line for a host that did not start: the last line of its failure (the exception a traceback ends with),
    and the way out when that interpreter has no lerobot (issue 30, item 20)."""
    lines = [ln.strip() for ln in failure.splitlines() if ln.strip()]
    last = lines[-1] if lines else "(no output)"
    if "ModuleNotFoundError: No module named " in last:
        module = last.rsplit(" ", 1)[1]
        return (
            f"{python} has no module {module} (the LeRobot host needs lerobot and its dependencies); build an "
            f'interpreter with {INSTALL_HINT}, or give --policy-options \'{{"python": "PATH"}}\''
        )
    return last


class HostProcess:
    """One running host (a :class:`~rollbench.wire.pipe.child.ChildProcess`). ``call`` sends a message and returns
    the reply ``(message, arrays)``; its failures are InfrastructureError, a failed start a ConfigError."""

    def __init__(
        self, python: str, checkpoint: str, revision: str | None, device: str, dtype: str | None, start_timeout_s: float
    ) -> None:
        cmd = [python, str(HOST_SCRIPT), "--checkpoint", checkpoint, "--device", device]
        cmd += ["--revision", revision] if revision else []
        cmd += ["--dtype", dtype] if dtype else []
        env = {**os.environ, "PYTHONNOUSERSITE": "1", "TQDM_DISABLE": "1"}
        try:
            self.child = ChildProcess("lerobot policy host", cmd, start_timeout_s, env)
        except ChildFailed as exc:
            if exc.refusal is not None:
                raise ConfigError(f"lerobot policy cannot load {checkpoint}: {exc.refusal}") from None
            raise ConfigError(f"lerobot policy host did not start: {_last_line(str(exc), python)}") from None
        self.proc, self.log = self.child.proc, self.child.log_path
        self.info: dict[str, Any] = self.child.info

    def tail(self, n: int = 2000) -> str:
        """The last ``n`` characters of the host's output (for error messages)."""
        return self.child.tail(n)

    def alive(self) -> bool:
        return self.child.alive()

    def call(
        self, message: dict[str, Any], arrays: dict[str, np.ndarray] | None, timeout_s: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """One request and its reply. Raises InfrastructureError (host gone, late, or malformed; the host is
        stopped), or returns the reply, which may be ``{"op": "error", ...}``."""
        try:
            return self.child.call(message, arrays, timeout_s)
        except ChildFailed as exc:
            raise InfrastructureError(str(exc)) from None

    def stop(self) -> None:
        """Close the pipes (the host exits on EOF), then terminate and kill it if it lingers."""
        self.child.stop()

    def close(self) -> None:
        """Ask the host to exit, then stop it; the log file is removed."""
        self.child.close()
