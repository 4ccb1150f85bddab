"""The frames rollbench and a process it started in another interpreter exchange over a pipe (standard library and
numpy only), and that process's request loop (:func:`serve`): the LeRobot policy host
(:mod:`rollbench.policies.lerobot.host`) and the env host (:mod:`rollbench.envs.hosted.far.host`, docs/env-host.md).

This module is imported by both sides: by rollbench as ``rollbench.wire.pipe.frames`` and by a host script as the
top-level module ``frames`` (a host runs in its own interpreter, where rollbench is not installed, and puts this
folder, :data:`PIPE_DIR`, on ``sys.path``). So it must not import rollbench.

One frame, all integers big-endian::

    b"RBLR" | header length (uint32) | header: UTF-8 JSON object | array bytes, in header order

The header holds the message (``"op"`` and its fields) and ``"arrays": [[name, dtype, shape], ...]``; each array's
bytes follow in that order, C-contiguous, exactly ``dtype.itemsize * prod(shape)`` of them. Decoding checks
everything before building an array: the magic, a header of at most :data:`MAX_HEADER` bytes that parses as a JSON
object without NaN/Infinity literals, nested at most :data:`MAX_DEPTH` deep, each key once per object and no integer
longer than Python converts (4300 digits; the same rules as ``rollbench.wire.decode.loads_json``), dtypes from :data:`DTYPES` only (never an object or structured dtype), at
most :data:`MAX_NDIM` dimensions of at most ``2**24`` each, and at most :data:`MAX_FRAME` array bytes in total.
A violation raises :class:`FrameError`.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import TYPE_CHECKING, Any

import numpy as np

PIPE_DIR = os.path.dirname(os.path.abspath(__file__))
"""This folder: a host script in another interpreter puts it on ``sys.path`` to ``import frames``."""
MAGIC = b"RBLR"
MAX_HEADER = 1 << 20  # 1 MiB of JSON: names, task strings, provenance
MAX_FRAME = 256 << 20  # 256 MiB of arrays: B=64 slots x 3 cameras x 480x640x3 uint8 is ~177 MiB
MAX_NDIM = 8
MAX_DIM = 1 << 24
MAX_DEPTH = 32  # maps and lists in a header (rollbench.wire.decode.MAX_DEPTH): real headers nest a few deep
DTYPES = frozenset({"|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8"})


class FrameError(ValueError):
    """A frame that breaks the format above (or a peer that stopped mid-frame)."""


class PeerGone(EOFError):
    """The other end closed the pipe (it exited or crashed)."""


class PeerTimeout(TimeoutError):
    """No complete frame arrived within the time allowed."""


def encode(message: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """One frame holding ``message`` (JSON-serialisable, without an ``arrays`` key) and ``arrays`` (name -> array
    of a dtype in :data:`DTYPES`, sent little-endian and C-contiguous)."""
    parts: list[bytes] = []
    table = []
    for name, value in (arrays or {}).items():
        a = np.asarray(value)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False) if a.dtype.byteorder == ">" else a
        if a.dtype.str not in DTYPES:
            raise FrameError(f"array {name!r}: dtype {a.dtype.str} cannot be sent (allowed: {sorted(DTYPES)})")
        table.append([name, a.dtype.str, list(a.shape)])
        parts.append(np.ascontiguousarray(a).tobytes())
    header = json.dumps({**message, "arrays": table}, allow_nan=False).encode()
    return MAGIC + struct.pack(">I", len(header)) + header + b"".join(parts)


def _no_constant(name: str) -> Any:
    raise FrameError(f"JSON constant {name} is not allowed in a frame header")


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise FrameError("frame header has a key twice in one object")
    return out


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests maps and lists more than :data:`MAX_DEPTH` deep (iterative: never recurses)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):  # a tuple: a far side may run Python < 3.10
            if depth > MAX_DEPTH:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def parse_header(data: bytes) -> dict[str, Any]:
    """A frame header's bytes -> its JSON object; FrameError in plain words (never the peer's text) for anything
    else (see the module docstring)."""
    try:
        message = json.loads(data, parse_constant=_no_constant, object_pairs_hook=_one_value_per_key)
    except FrameError:
        raise
    except json.JSONDecodeError as exc:
        raise FrameError(f"frame header is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError:  # its text quotes the bytes
        raise FrameError("frame header is not UTF-8") from None
    except RecursionError:
        raise FrameError(f"frame header nests maps and lists more than {MAX_DEPTH} deep") from None
    except ValueError:  # an integer of more digits than int() converts; its text is Python's, not the peer's
        raise FrameError("frame header holds an integer too long to convert (over 4300 digits)") from None
    if not isinstance(message, dict):
        raise FrameError("frame header is not a JSON object")
    if _too_deep(message):
        raise FrameError(f"frame header nests maps and lists more than {MAX_DEPTH} deep")
    return message


def _array_sizes(table: Any) -> list[tuple[str, np.dtype, tuple[int, ...], int]]:
    if not isinstance(table, list):
        raise FrameError("frame header: 'arrays' must be a list")
    out = []  # errors name an entry by its position and types, never the peer's strings
    for i, entry in enumerate(table):
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
            raise FrameError(f"frame header: array entry {i} is not [name, dtype, shape] ({type(entry).__name__})")
        name, dt, shape = entry
        if not isinstance(dt, str) or dt not in DTYPES:
            raise FrameError(f"frame header: array entry {i} has a dtype not in {sorted(DTYPES)}")
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_NDIM
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_DIM for n in shape)
        ):
            raise FrameError(
                f"frame header: array entry {i} has a shape that is not {MAX_NDIM} or fewer sizes <= {MAX_DIM}"
            )
        dtype = np.dtype(dt)
        out.append((name, dtype, tuple(shape), dtype.itemsize * math.prod(shape)))
    if sum(n for *_, n in out) > MAX_FRAME:
        raise FrameError(f"frame arrays exceed {MAX_FRAME} bytes")
    return out


class FrameReader:
    """Reads frames from file descriptor ``fd`` with a deadline per frame (``select`` + ``os.read``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _exactly(self, n: int, deadline: float | None) -> bytes:
        chunks, got = [], 0
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    raise PeerTimeout("no complete frame in time")
            data = os.read(self.fd, min(n - got, 1 << 20))
            if not data:
                raise PeerGone("the other end closed the pipe")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)

    def read(self, timeout_s: float | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The next frame as ``(message, arrays)``. Raises PeerTimeout, PeerGone or FrameError."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        head = self._exactly(8, deadline)
        if head[:4] != MAGIC:
            raise FrameError("not a frame (bad magic)")
        (size,) = struct.unpack(">I", head[4:])
        if size > MAX_HEADER:
            raise FrameError(f"frame header of {size} bytes exceeds {MAX_HEADER}")
        message = parse_header(self._exactly(size, deadline))
        arrays = {}
        for name, dtype, shape, nbytes in _array_sizes(message.pop("arrays", [])):
            buf = self._exactly(nbytes, deadline) if nbytes else b""
            arrays[name] = np.frombuffer(buf, dtype=dtype).reshape(shape).copy()
        return message, arrays


def write_frame(fd: int, frame: bytes) -> None:
    """Write all of ``frame`` to ``fd``; raises PeerGone when the reader is gone."""
    view = memoryview(frame)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except (BrokenPipeError, OSError) as exc:
        raise PeerGone(f"the other end closed the pipe ({exc})") from None


if TYPE_CHECKING:  # types only: a far side's interpreter may be older than the syntax they use
    from collections.abc import Callable, Collection

    Handler = Callable[[str, dict[str, Any], dict[str, np.ndarray]], tuple[dict[str, Any], dict[str, Any] | None]]
    """``handle(op, message, arrays) -> (reply, reply_arrays or None)``: a far side's answer to one request."""
    ErrorReply = Callable[[str, BaseException], dict[str, Any]]
    """``error(where, exc) -> reply``: a far side's ``error`` reply for an exception raised while answering it."""


def serve(
    handle: Handler, ops: Collection[str], reader: FrameReader, out_fd: int, error: ErrorReply, timed: bool = False
) -> None:
    """A far side's request loop, one reply per request frame, until ``close`` (answered ``ok``) or the end of its
    input (the other end closed the pipe: returns quietly).

    An op in ``ops`` is answered by ``handle``; an exception it raises is answered ``error(op, exc)`` and the loop
    goes on. Any other op (or a missing one) is answered ``error`` {where: "protocol", message: "unknown op ..."}.
    With ``timed``, every reply to an op in ``ops`` carries ``host_s``: the seconds ``handle`` took (the far side's
    own time, so the boundary's cost can be told apart). A malformed request raises FrameError (the caller ends the
    process); a reader gone while replying raises PeerGone."""
    while True:
        try:
            message, arrays = reader.read()
        except PeerGone:
            return
        op = message.get("op")
        if op == "close":
            write_frame(out_fd, encode({"op": "ok"}))
            return
        reply: dict[str, Any]
        reply_arrays: dict[str, Any] | None = None
        if not isinstance(op, str) or op not in ops:
            reply = {"op": "error", "where": "protocol", "message": f"unknown op {op!r:.40}"}
        else:
            t0 = time.perf_counter()
            try:
                reply, reply_arrays = handle(op, message, arrays)
            except Exception as exc:
                reply = error(op, exc)
            if timed:
                reply = {**reply, "host_s": time.perf_counter() - t0}
        write_frame(out_fd, encode(reply, reply_arrays))
