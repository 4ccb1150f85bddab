"""A host process in another interpreter, seen from rollbench: start it, call it with deadlines, stop it.

Used by the LeRobot policy host (:mod:`rollbench.policies.lerobot.client`) and the env host
(:mod:`rollbench.envs.hosted.remote`). The child gets two pipes (rollbench -> child, child -> rollbench, passed
with ``pass_fds``; :mod:`rollbench.wire.pipe.frames` on both), and it is expected to exit when its input pipe
closes, so it dies with rollbench. Its stdout and stderr go through a third pipe that a thread of rollbench's
drains: into a log file of at most :data:`MAX_LOG_BYTES` (then a line says the rest was dropped) and a memory tail
of the last :data:`TAIL_BYTES`, quoted in errors. A child that prints without end costs neither disk nor memory
(hostile round 10: an env host filled the disk with 7.9 GB of output), and never blocks on a full pipe.
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
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import frames

MAX_LOG_BYTES = 16 * 2**20  # the child's output kept on disk; the rest is dropped, said in the log
TAIL_BYTES = 64 * 2**10  # the child's latest output kept in memory, for error messages


class ChildLog:
    """Drains a child's output pipe (``read_fd``) in a daemon thread: the first :data:`MAX_LOG_BYTES` into
    ``path``'s file, the last :data:`TAIL_BYTES` in memory (:meth:`tail`)."""

    def __init__(self, read_fd: int, path: str) -> None:
        self.path = path
        self._tail = b""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, args=(read_fd,), name="rollbench-child-log", daemon=True)
        self._thread.start()

    def _drain(self, read_fd: int) -> None:
        kept = 0
        with open(self.path, "ab", buffering=0) as out, contextlib.closing(os.fdopen(read_fd, "rb", 0)) as pipe:
            while chunk := pipe.read(65536):
                with self._lock:
                    self._tail = (self._tail + chunk)[-TAIL_BYTES:]
                if kept < MAX_LOG_BYTES:
                    with contextlib.suppress(OSError):  # a full disk costs the log, never the run
                        out.write(chunk[: MAX_LOG_BYTES - kept])
                        if kept + len(chunk) >= MAX_LOG_BYTES:
                            out.write(f"\n[rollbench: output past {MAX_LOG_BYTES:,} bytes is not kept]\n".encode())
                    kept += len(chunk)

    def tail(self, n: int) -> str:
        """The last ``n`` characters of the child's output so far."""
        with self._lock:
            text = self._tail.decode(errors="replace")
        return text[-n:]

    def join(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` for the output to end (the child and its children gone)."""
        self._thread.join(timeout_s)


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
        fd, self.log_path = tempfile.mkstemp(prefix=prefix, suffix=".log")
        os.close(fd)
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        log_r, log_w = os.pipe()
        argv = [*cmd, "--in-fd", str(to_child_r), "--out-fd", str(from_child_w)]
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                stdout=log_w,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else {**os.environ, "PYTHONNOUSERSITE": "1"},
            )
        except OSError as exc:
            self._close_fds()
            os.close(log_r)
            raise ChildFailed(f"cannot start {cmd[0]}: {exc}") from None
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
            os.close(log_w)
        self.log = ChildLog(log_r, self.log_path)
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
        info = msg.get("info", {})
        if not isinstance(info, dict):
            self.stop()
            raise ChildFailed(f"{name} did not start (its hello's info is not a JSON object)")
        self.info: dict[str, Any] = info

    def tail(self, n: int = 2000) -> str:
        """The last ``n`` characters of the child's output (for error messages); a stopped child's output is read
        to its end first (at most 2 s)."""
        if self.proc.poll() is not None:
            self.log.join(2.0)
        return self.log.tail(n).strip() or "(no output)"

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

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask the child to exit (``{"op": "close"}``), then stop it; the log file is removed."""
        if self._to_child >= 0 and self.alive():
            with contextlib.suppress(ChildFailed):
                self.call({"op": "close"}, None, timeout_s)
        self.stop()
        Path(self.log_path).unlink(missing_ok=True)
