"""A host process in another interpreter, seen from rollbench: start it, call it with deadlines, stop it.

Used by the LeRobot policy host (:mod:`rollbench.policies.lerobot.client`) and the env host
(:mod:`rollbench.envs.hosted.remote`). The child gets two pipes (rollbench -> child, child -> rollbench, passed
with ``pass_fds``; :mod:`rollbench.wire.pipe.frames` on both), its stdout and stderr go to a log file whose last
lines are quoted in errors, and it is expected to exit when its input pipe closes, so it dies with rollbench.
On start it must send ``{"op": "hello", "info": {...}}`` (or ``{"op": "error", "message": ...}``).

Errors: :class:`ChildFailed` (it did not start, exited, closed its pipe, sent a malformed frame or missed a
deadline; the child is stopped when a call fails). Callers map it to their own fault (a policy host's is
``infrastructure``, an env host's ``environment``). Standard library and numpy only (no rollbench import), like
``frames``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import frames


class ChildFailed(RuntimeError):
    """The child did not start, died, broke the protocol or missed a deadline; ``refusal`` is the child's own
    message when it answered its start with ``error`` (it could not load what it was asked to)."""

    refusal: str | None = None


class ChildProcess:
    """One running child: ``cmd`` gets ``--in-fd R --out-fd W`` appended.

    ``name`` names it in errors (``"lerobot policy host"``); ``env`` replaces the child's environment variables
    (default: this process's, plus ``PYTHONNOUSERSITE=1``); ``start_timeout_s`` bounds the wait for ``hello``.
    Raises ChildFailed when it cannot start or says ``error`` instead of ``hello`` (then :attr:`refusal` is that
    message). After start, :attr:`info` is the ``hello`` message's ``info`` and :attr:`pid` the child's pid.
    """

    def __init__(
        self, name: str, cmd: Sequence[str], start_timeout_s: float, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.refusal: str | None = None
        prefix = f"rollbench-{name.replace(' ', '-')}-"
        self.log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False)  # noqa: SIM115
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        argv = [*cmd, "--in-fd", str(to_child_r), "--out-fd", str(from_child_w)]
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else {**os.environ, "PYTHONNOUSERSITE": "1"},
            )
        except OSError as exc:
            self._close_fds()
            raise ChildFailed(f"cannot start {cmd[0]}: {exc}") from None
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.pid = self.proc.pid
        self.reader = frames.FrameReader(self._from_child)
        try:
            msg, _ = self.reader.read(start_timeout_s)
        except (frames.PeerGone, frames.PeerTimeout, frames.FrameError) as exc:
            self.stop()
            raise ChildFailed(f"{name} did not start ({exc}): {self.tail()}") from None
        if msg.get("op") != "hello":
            self.refusal = str(msg.get("message"))
            self.stop()
            failed = ChildFailed(f"{name} refused to start: {self.refusal}")
            failed.refusal = self.refusal
            raise failed
        self.info: dict[str, Any] = msg.get("info", {})

    def tail(self, n: int = 2000) -> str:
        """The last ``n`` characters of the child's output (for error messages)."""
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
        """One request and its reply ``(message, arrays)`` (which may be ``{"op": "error", ...}``). Raises
        ChildFailed (child gone, late, or malformed; the child is then stopped)."""
        op = message.get("op")
        if self._to_child < 0:
            raise ChildFailed(f"{self.name} was stopped before {op}")
        try:
            frames.write_frame(self._to_child, frames.encode(message, arrays))
            return self.reader.read(timeout_s)
        except frames.PeerTimeout:
            self.stop(hung=True)
            raise ChildFailed(f"{self.name} did not answer {op} within {timeout_s:g} s (stopped)") from None
        except (frames.PeerGone, frames.FrameError) as exc:
            code = self.proc.poll()
            if code is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = self.proc.wait(timeout=1)
            self.stop()
            raise ChildFailed(f"{self.name} failed during {op} ({exc}; exit code {code}): {self.tail(600)}") from None

    def _close_fds(self) -> None:
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._to_child = self._from_child = -1

    def stop(self, hung: bool = False) -> None:
        """Close the pipes (the child exits on EOF), then terminate and kill it if it lingers; ``hung``: kill it
        at once (it missed a deadline, so it will not read the EOF)."""
        self._close_fds()
        if hung and self.proc.poll() is None:
            self.proc.kill()
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

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask the child to exit (``{"op": "close"}``), then stop it; the log file is removed."""
        if self._to_child >= 0 and self.alive():
            with contextlib.suppress(ChildFailed):
                self.call({"op": "close"}, None, timeout_s)
        self.stop()
        Path(self.log.name).unlink(missing_ok=True)
