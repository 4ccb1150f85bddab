"""The LeRobot policy host process, seen from rollbench: start it, call it with deadlines, stop it.

The host (:mod:`rollbench.policies.lerobot.host`, a script) runs in LeRobot's interpreter, found in this order:
the ``python`` policy option, ``$ROLLBENCH_LEROBOT_PYTHON``, this interpreter when it can import lerobot, then
``.venv-lerobot/bin/python`` in the working directory or in the rollbench checkout (``bash
scripts/lerobot_compat.sh`` builds it with lerobot 0.6.1; ``--lerobot 0.4.4`` builds ``.venv-lerobot-0.4.4``, which
is used only when named). It is a child process with two pipes (rollbench -> host, host -> rollbench;
:mod:`rollbench.policies.lerobot.frames`), its stdout and stderr go to a log file whose last lines are quoted in
errors, and it exits when its input pipe closes, so it dies with rollbench.

Faults: a host that exits, closes its pipe, sends a malformed frame or misses a deadline is
:class:`~rollbench.core.contracts.InfrastructureError` (the host is then stopped; the next episode starts a fresh one); an
exception raised by lerobot's code for one slot is that slot's :class:`~rollbench.core.contracts.EpisodeError` (fault
``policy``). Failing to start or load the checkpoint is a ConfigError (exit 2, before any episode).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import rollbench.policies.lerobot.frames as frames
from rollbench.core.contracts import ConfigError, InfrastructureError

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


class HostProcess:
    """One running host. ``call`` sends a message and returns the reply ``(message, arrays)``."""

    def __init__(
        self, python: str, checkpoint: str, revision: str | None, device: str, dtype: str | None, start_timeout_s: float
    ) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="rollbench-lerobot-host-", suffix=".log", delete=False)  # noqa: SIM115
        to_host_r, self._to_host = os.pipe()
        self._from_host, from_host_w = os.pipe()
        cmd = [python, str(HOST_SCRIPT), "--in-fd", str(to_host_r), "--out-fd", str(from_host_w)]
        cmd += ["--checkpoint", checkpoint, "--device", device]
        cmd += ["--revision", revision] if revision else []
        cmd += ["--dtype", dtype] if dtype else []
        try:
            self.proc = subprocess.Popen(
                cmd,
                pass_fds=(to_host_r, from_host_w),
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONNOUSERSITE": "1", "TQDM_DISABLE": "1"},
            )
        except OSError as exc:
            raise ConfigError(f"lerobot policy: cannot start {python}: {exc}") from None
        finally:
            os.close(to_host_r)
            os.close(from_host_w)
        self.reader = frames.FrameReader(self._from_host)
        try:
            msg, _ = self.reader.read(start_timeout_s)
        except (frames.PeerGone, frames.PeerTimeout, frames.FrameError) as exc:
            self.stop()
            raise ConfigError(f"lerobot policy host did not start ({exc}): {self.last_line(python)}") from None
        if msg.get("op") != "hello":
            self.stop()
            raise ConfigError(f"lerobot policy cannot load {checkpoint}: {msg.get('message')}")
        self.info: dict[str, Any] = msg.get("info", {})

    def last_line(self, python: str) -> str:
        """One line for a host that did not start: its last output line (the exception a traceback ends with), the
        way out when that interpreter has no lerobot, and where the whole output is (issue 30, item 20)."""
        lines = [ln.strip() for ln in self.tail().splitlines() if ln.strip()]
        last = lines[-1] if lines else "(no output)"
        if last.startswith("ModuleNotFoundError: No module named "):
            module = last.rsplit(" ", 1)[1]
            return (
                f"{python} has no module {module} (the LeRobot host needs lerobot and its dependencies); build an "
                f"interpreter with {INSTALL_HINT}, or give --policy-options "
                f'\'{{"python": "PATH"}}\' (host output: {self.log.name})'
            )
        return f"{last} (host output: {self.log.name})"

    def tail(self, n: int = 2000) -> str:
        """The last ``n`` characters of the host's output (for error messages)."""
        try:
            text = Path(self.log.name).read_text(errors="replace")
        except OSError:
            return ""
        return text[-n:].strip() or "(no output)"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(
        self, message: dict[str, Any], arrays: dict[str, np.ndarray] | None, timeout_s: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """One request and its reply. Raises InfrastructureError (host gone, late, or malformed; the host is
        stopped), or returns the reply, which may be ``{"op": "error", ...}``."""
        try:
            frames.write_frame(self._to_host, frames.encode(message, arrays))
            return self.reader.read(timeout_s)
        except frames.PeerTimeout:
            self.stop()
            raise InfrastructureError(
                f"lerobot policy host did not answer {message.get('op')} within {timeout_s:g} s (stopped)"
            ) from None
        except (frames.PeerGone, frames.FrameError) as exc:
            code = self.proc.poll()
            self.stop()
            raise InfrastructureError(
                f"lerobot policy host failed during {message.get('op')} ({exc}; exit code {code}): {self.tail(600)}"
            ) from None

    def stop(self) -> None:
        """Close the pipes (the host exits on EOF), then terminate and kill it if it lingers."""
        for fd in (self._to_host, self._from_host):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._to_host = self._from_host = -1
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self.log.close()

    def close(self) -> None:
        """Ask the host to exit, then stop it; the log file is removed."""
        if self._to_host >= 0 and self.alive():
            with contextlib.suppress(InfrastructureError):
                self.call({"op": "close"}, None, 10.0)
        self.stop()
        Path(self.log.name).unlink(missing_ok=True)
