"""The one way rollbench reads a JSON document it did not just write itself: a file named on the command line
(``--spec``, ``--policy-options FILE``, ``--instructions``, ``--labels``, a rubric, ``--rules``, an ``/api/runs``
export) or a file of a run directory (``run.json``, ``meta/info.json``).

Every failure is a :class:`~rollbench.core.contracts.ConfigError` with one line naming the file and what is wrong with it,
never a traceback, and nothing can make the read block or grow without bound:

* only a regular file is read: a FIFO, socket, device or directory is refused from its ``fstat`` (the file is
  opened with ``O_NONBLOCK``, so opening a FIFO with no writer returns at once instead of waiting for one);
* at most ``max_bytes`` bytes (default :data:`MAX_JSON_BYTES`) are read; a larger file is refused;
* the bytes must be UTF-8 (RFC 8259 section 8.1: JSON exchanged between systems is UTF-8);
* the text must be JSON (:func:`parse_json`): a document nested deeper than the parser's recursion limit
  (``RecursionError`` in CPython's ``json``) is refused like any other malformed document; with ``finite=True``
  (options a user types) so are the non-standard constants ``NaN``, ``Infinity`` and ``-Infinity`` (RFC 8259
  section 6 has no such numbers; Python's ``json`` reads and writes them by default, so files rollbench wrote
  itself may hold them).
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError

MAX_JSON_BYTES = 256 * 2**20  # 256 MiB: a run.json of 100,000 planned episodes is ~40 MB
# maps and lists nested deeper than this are refused: rollbench's own files nest under 10 deep, a user's options
# (recorded in run.json's spec) get the rest; CPython's parser would give up near 1,000 with a RecursionError
MAX_JSON_DEPTH = 64


class JsonRefused(ValueError):
    """A JSON text :func:`loads_strict` refuses; the message says why in rollbench's words and never quotes the
    text (a JSON parser's own message names only a position)."""


_DEPTH_CHUNK = 16 * 2**20
_BRACKET_STEP = np.zeros(256, np.int8)  # +1 for "[" and "{", -1 for "]" and "}"
_BRACKET_STEP[[0x5B, 0x7B]], _BRACKET_STEP[[0x5D, 0x7D]] = 1, -1


def _depth_over(text: str, limit: int) -> bool:
    """Whether valid JSON ``text`` nests maps and lists more than ``limit`` deep: its brackets outside strings,
    counted with numpy a chunk at a time (no recursion; memory bounded by the chunk; a document of 40 MB takes a
    fraction of a second where walking the parsed value took seconds). Escapes are blanked first (``\\\\`` then
    ``\\"``, left to right as JSON reads them), so every quote left opens or closes a string."""
    depth, quotes, start = 0, 0, 0
    while start < len(text):
        end = min(start + _DEPTH_CHUNK, len(text))
        while end < len(text) and text[end - 1] == "\\":  # never split a run of backslashes
            end += 1
        chunk = np.frombuffer(text[start:end].encode("utf-8").replace(b"\\\\", b"__").replace(b'\\"', b"__"), np.uint8)
        is_quote = chunk == 0x22
        inside = (np.cumsum(is_quote, dtype=np.int32) + quotes) & 1
        steps = _BRACKET_STEP[chunk]
        steps[inside.astype(bool)] = 0
        running = np.cumsum(steps, dtype=np.int32) + depth
        if running.size and int(running.max()) > limit:
            return True
        depth = int(running[-1]) if running.size else depth
        quotes = (quotes + int(np.count_nonzero(is_quote))) % 2
        start = end
    return False


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise JsonRefused("an object names a key twice")
    return obj


def _refuse_constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    """A JSON number literal as a float; JsonRefused when it is too large for one (``1e999`` is valid JSON grammar
    that Python reads as infinity: what no writer of finite numbers produces, so always damage)."""
    value = float(literal)
    if math.isinf(value):
        raise JsonRefused("it holds a number too large for a float")
    return value


def loads_strict(
    text: str | bytes | bytearray, *, finite: bool = True, depth: int = MAX_JSON_DEPTH, unique_keys: bool = True
) -> Any:
    """The one JSON parser for text rollbench did not just write itself (a run directory's files, a file named on
    the command line, a peer's message: :func:`rollbench.wire.decode.loads_json` is this with the wire's limits).

    Refused with :class:`JsonRefused` (a ValueError whose text never quotes ``text``): bytes that are not UTF-8
    (RFC 8259 section 8.1), malformed JSON, maps and lists nested more than ``depth`` deep (checked without
    recursion; a document too deep for CPython's recursive parser is refused the same way), with ``finite`` the
    non-standard ``NaN``/``Infinity``/``-Infinity`` (RFC 8259 section 6), with ``unique_keys`` an object naming a key
    twice (which value counts is then a guess: RFC 8259 section 4), a number too large for a float (``1e999``,
    which Python would read as infinity; always, since no writer of finite numbers produces one), and an integer of
    more than Python's 4,300 digits."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonRefused(f"it is not UTF-8 text (byte {exc.start})") from None
    hooks: dict[str, Any] = {"parse_float": _finite_float}
    if finite:
        hooks["parse_constant"] = _refuse_constant
    if unique_keys:
        hooks["object_pairs_hook"] = _one_value_per_key
    try:
        value = json.loads(text, **hooks)
    except JsonRefused:
        raise
    except RecursionError:
        raise JsonRefused(f"it is nested too deeply: more than {depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError:  # an integer of more digits than int() takes (sys.get_int_max_str_digits())
        raise JsonRefused(f"it holds a number of more than {sys.get_int_max_str_digits()} digits") from None
    if text.count("[") + text.count("{") > depth and _depth_over(text, depth):
        raise JsonRefused(f"it is nested too deeply: more than {depth} levels")
    return value


def finite_json(obj: Any) -> Any:
    """``obj`` (a JSON-able value) with every NaN or infinite float replaced by None: what rollbench writes is
    strict JSON (RFC 8259 has no such numbers; ``json.dumps`` would write the non-standard ``NaN``), and the reader
    learns of the non-finite value from the violation that names it (``rollbench grade``)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


def strict_dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` of :func:`finite_json` ``(obj)`` with ``allow_nan=False``: always strict JSON."""
    return json.dumps(finite_json(obj), allow_nan=False, **kw)


def kind_of(mode: int) -> str:
    """A file type in words (``stat`` mode -> "regular file", "symbolic link", "FIFO", ...)."""
    for test, name in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "special file"


def read_bytes(path: Path, what: str, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of regular file ``path`` (links followed; whether a link may be followed is the caller's check).

    ``what`` names the file in the error (e.g. ``"--spec"``, ``"run log"``). Raises ConfigError when ``path``
    cannot be opened, is not a regular file (FIFO, socket, device, directory: refused without blocking) or holds
    more than ``max_bytes`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ConfigError(f"{what} {path} is a {kind_of(mode)}, not a regular file")
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise ConfigError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{what} {path} is larger than {max_bytes} bytes; refused")
    return data


def read_text(path: Path, what: str, max_bytes: int = MAX_JSON_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8; ConfigError (naming the first bad byte's offset) when it is not."""
    data = read_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})") from None


def parse_json(text: str | bytes, what: str, finite: bool = False) -> Any:
    """``text`` parsed by :func:`loads_strict` (``finite``: NaN and Infinity refused). ``what`` names the source in
    the error (e.g. ``"--policy-options"``). Raises ConfigError for what :func:`loads_strict` refuses."""
    try:
        return loads_strict(text, finite=finite)
    except JsonRefused as exc:
        raise ConfigError(f"{what} is not readable JSON ({exc})") from None


def read_json_or(path: Path, default: Any) -> Any:
    """The JSON document in ``path`` as :func:`read_json` reads it, or ``default`` when it is missing or cannot be
    read (for derived files whose damage another check reports, e.g. ``meta/info.json`` by ``grade``)."""
    try:
        return read_json(path, "file")
    except ConfigError:
        return default


def read_json(path: Path, what: str, finite: bool = False, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON document in regular file ``path`` (see the module docstring and :func:`parse_json`); ConfigError
    naming ``what`` and ``path`` on any failure."""
    return parse_json(read_text(path, what, max_bytes), f"{what} {path}", finite)
