"""The parent's side of a worker process's channel (``--workers K``): messages read without ever blocking, and a
worker process reaped within a stated bound.

Code under evaluation runs inside the worker process and can write into any descriptor it holds: the socket to the
parent and the pipe whose end tells the parent the process exited (hostile round 12, F9: a policy writing
``b"\\xff\\x00garbage"`` into every descriptor hung the run for ever). So the parent never hands the socket to
``Connection.recv`` (which blocks until it has read as many bytes as the first four spell): :class:`Inbox` reads
only what is there, with ``os.read``, and takes the complete frames (multiprocessing's own framing, a signed 4-byte
big-endian length, ``-1`` then an 8-byte one for long messages) out of what it has. A frame is :class:`Corrupt`
when its length is not in ``1..MAX_MESSAGE_BYTES``, its body does not unpickle to a worker message, or it stays
incomplete for :data:`STALL_S` seconds (a worker writes each message whole, at once). :func:`reap` waits for a
process to end by polling its exit status (``join`` trusts the exit pipe: stray bytes in it made ``join`` wait in
``waitpid`` for a process that was still running), and kills it when it has not ended within the grace it is given.
"""

from __future__ import annotations

import os
import struct
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any

MAX_MESSAGE_BYTES = 64 * 2**20  # a worker's messages are summaries and progress: kilobytes
STALL_S = 30.0  # the longest an incomplete message may wait for its remaining bytes
KILL_WAIT_S = 10.0  # how long a killed process is waited for before it is left to the OS
CHANNEL_LOST_EXIT = 4  # a worker's exit status when its own end of the channel failed (closed by code running in it)
KINDS = ("ready", "done", "steps", "fatal")
_READ = 1 << 16


class Corrupt(Exception):
    """The channel holds bytes no worker message can be: code running in the worker wrote into it."""


class Inbox:
    """The messages a worker sent over ``conn``, read without blocking (see the module docstring)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._buf = bytearray()
        self._partial_since: float | None = None

    def read(self) -> tuple[list[tuple[str, Any]], bool]:
        """Call when ``conn`` is readable: the complete messages now there, in order, and whether the channel
        reached its end (the worker's end closed). Raises :class:`Corrupt`."""
        try:
            chunk = os.read(self.conn.fileno(), _READ)
        except BlockingIOError:
            chunk = None
        except OSError:
            chunk = b""
        if chunk:
            self._buf += chunk
        messages = self._frames()
        self._partial_since = (self._partial_since or time.monotonic()) if self._buf else None
        return messages, chunk == b""

    def stalled(self) -> bool:
        """Whether an incomplete message has waited for its remaining bytes for over :data:`STALL_S` seconds."""
        return self._partial_since is not None and time.monotonic() - self._partial_since > STALL_S

    def _frames(self) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        buf = self._buf
        while len(buf) >= 4:
            (size,), head = struct.unpack("!i", buf[:4]), 4
            if size == -1:
                if len(buf) < 12:
                    break
                (size,), head = struct.unpack("!Q", buf[4:12]), 12
            if not 0 < size <= MAX_MESSAGE_BYTES:
                raise Corrupt(f"a message length of {size} bytes")
            if len(buf) < head + size:
                break
            body = bytes(buf[head : head + size])
            del buf[: head + size]
            try:
                message = ForkingPickler.loads(body)
            except Exception as exc:
                raise Corrupt(f"a message that does not unpickle ({type(exc).__name__})") from None
            if not (isinstance(message, tuple) and len(message) == 2 and message[0] in KINDS):
                raise Corrupt("a message that is none of a worker's")
            out.append(message)
        return out


def pipe_has_bytes(fd: int) -> bool:
    """Whether a readable exit pipe (a process's ``sentinel``) holds bytes: a real one only ever reaches its end."""
    try:
        return bool(os.read(fd, _READ))
    except OSError:
        return False


def reap(proc: BaseProcess, grace: float) -> None:
    """Wait up to ``grace`` seconds for ``proc`` to end, then kill it and wait up to :data:`KILL_WAIT_S` more; never
    blocks longer (its exit status is polled, never waited for)."""
    for wait_s in (grace, KILL_WAIT_S):
        end = time.monotonic() + wait_s
        while proc.exitcode is None and time.monotonic() < end:
            time.sleep(0.02)
        if proc.exitcode is not None:
            return
        proc.kill()
