"""Decoding of untrusted wire data, shared by the policy servers and clients of both protocols.

Everything that arrives from the network (a websocket frame, an HTTP body, a server's reply or metadata) is decoded
here and nowhere else, with the same rules on both sides:

* **arrays** may only have a numeric or boolean dtype: ``bool``, ``int8/16/32/64``, ``uint8/16/32/64``,
  ``float16/32/64``, in either byte order. Object (``|O``), structured/void, string, complex, datetime and
  ``float128`` arrays are refused: numpy reading wire bytes as object pointers is how one frame crashed a server
  (openpi-client 0.1.2's ``msgpack_numpy.unpack_array`` passes the peer's dtype string straight to ``np.ndarray``).
* **shapes** have at most :data:`MAX_NDIM` dimensions, each a non-negative ``int`` of at most :data:`MAX_DIM`, and
  the data must hold exactly ``prod(shape) * itemsize`` bytes (base64/bytes) or that many numbers (JSON lists);
* **nesting** of maps and lists is at most :data:`MAX_DEPTH` deep, JSON may not contain ``NaN``/``Infinity``
  literals (not JSON, RFC 8259 section 6), msgpack map keys must be strings or bytes;
* sizes are bounded before decoding by the caller (the server's ``--max-request-mb``, the clients'
  :data:`MAX_REPLY_BYTES`).

Anything else raises :class:`ProtocolError` (a ``ValueError``) whose message says what was wrong and is safe to
send back to the peer or to print: it never formats the peer's values, only their types, dtypes and shapes.

Wire formats: openpi's ``msgpack_numpy`` (arrays as ``{b"__ndarray__": True, b"data": bytes, b"dtype":
dtype.str, b"shape": list}``, scalars as ``{b"__npgeneric__": True, b"data": value, b"dtype": dtype.str}``; see
:mod:`rollbench.policies.remote.ws`) and rollbench's JSON /act arrays (``{"dtype", "shape", "data"}``; see
:mod:`rollbench.policies.remote.http`).
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError, InfrastructureError
from rollbench.core.format import container_size, quoted
from rollbench.core.jsonfile import JsonRefused, loads_strict

MAX_NDIM = 8
MAX_DIM = 2**24
MAX_DEPTH = 32
# 8 cameras of 512x512x3 uint8 are 6 MiB of pixels, 8 MiB as base64 in JSON; twice that is the default bound on a
# request (websocket frame or HTTP body), which therefore holds several large cameras with room to spare.
DEFAULT_MAX_REQUEST_BYTES = 2 * (8 * 512 * 512 * 3) * 4 // 3  # = 16 MiB
MAX_REPLY_BYTES = 64 * 2**20  # a client reads at most this much of one reply (actions are a few kB)

# numeric and boolean dtypes only, as numpy's dtype.str ("<f4", "|u1", "|b1") or a plain name ("float32")
_DTYPE_STR = re.compile(r"[<>|=]?(?:b1|[iu][1248]|f[248])")
_DTYPE_NAMES = frozenset(
    ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
)


# replies that say the server cannot take the call now (not the policy's answer): request timeout, session gone
# (evicted or restarted server), request too large for the server's limit, server busy
INFRA_STATUSES = (408, 410, 413, 503)


def unquoted_reply(what: str, size: int, unit: str = "bytes") -> str:
    """How a client names a peer's error reply without quoting it: ``"HTTP 500, a reply of 37 bytes (not shown)"``.
    A server's error text is never quoted into an episode's error (and from there into run files, the CLI and MCP):
    it may echo the client's token or anything else, and it is the server's log that says why (``rollbench
    serve-policy --log-requests``)."""
    return f"{what}, a reply of {size} {unit} (not shown: a server's text is never quoted)"


class ProtocolError(ValueError):
    """Data from a peer that does not follow the wire format; the message is safe to show and to send back."""


class PeerFault(ConnectionError):
    """A peer that broke the protocol, said in rollbench's own words (its text is safe to show: it quotes nothing
    the peer sent). A ConnectionError, so a client retries it as it retries a dropped connection."""


# exceptions whose text rollbench wrote itself, from the peer's types, sizes and statuses only (never its strings)
_OWN_WORDS = (ProtocolError, PeerFault, EpisodeError, ConfigError)


def unquoted_failure(exc: BaseException) -> str:
    """How a client names a transport library's failure without quoting it: the exception's class, plus the
    operating system's words for an OS error in its chain (``"ConnectError: Connection refused"``) or the status of
    a refused websocket handshake (``"InvalidStatus: HTTP 500"``). The libraries' own texts are never shown: h11's
    ``RemoteProtocolError`` quotes the offending header line and websockets' ``InvalidUpgrade``/``InvalidHeader*``
    quote header values, any of which a server may fill with the client's token (issue 42, hostile round 5 F1).
    rollbench's own exceptions (:class:`ProtocolError`, :class:`PeerFault`, EpisodeError, ConfigError) keep their
    text, which never quotes a peer."""
    name = type(exc).__name__
    if isinstance(exc, _OWN_WORDS):
        return f"{name}: {exc}"
    if isinstance(exc, TimeoutError) or name.endswith("Timeout"):  # httpx's Connect/Read/Write/PoolTimeout
        return f"{name}: no answer within the deadline"
    status = getattr(getattr(exc, "response", None), "status_code", None)  # websockets' InvalidStatus
    if type(status) is int:
        return f"{name}: HTTP {status}"
    seen: BaseException | None = exc
    for _ in range(8):  # the library's own chain (httpx -> httpcore -> socket): bounded, never a cycle
        if seen is None:
            break
        if isinstance(seen, OSError) and isinstance(seen.errno, int) and seen.errno > 0:
            return f"{name}: {os.strerror(seen.errno)}"
        seen = seen.__cause__ or seen.__context__
    return f"{name} (its text is not shown: it may quote the server's reply)"


def described(value: Any) -> str:
    """A peer's value named by its JSON type and size, never its contents: ``"an object of 3 keys"``, ``"a list of
    2 items"``, ``"a string of 40 characters"``, ``"a number"``, ``"null"``."""
    if (sized := container_size(value)) is not None:
        return sized
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes"
    if value is None:
        return "null"
    if isinstance(value, bool | np.bool_):
        return "a boolean"
    if isinstance(value, int | float | np.number):
        return "a number"
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype.str} and shape {list(value.shape)}"
    return f"a {type(value).__name__}"


def _numpy_words() -> frozenset[str]:
    """Every dtype name and type code numpy itself defines (a fixed vocabulary: ``object``, ``|O``, ``complex64``,
    ``<U``...): a dtype a peer names is shown only when it is one of these."""
    words: set[str] = {k for k in np.sctypeDict if isinstance(k, str)}
    for t in set(np.sctypeDict.values()):
        try:
            dt = np.dtype(t)
        except TypeError:
            continue
        words |= {dt.name, dt.str, dt.newbyteorder("<").str, dt.newbyteorder(">").str}
    return frozenset(w for w in words if len(w) <= 16)


_NUMPY_WORDS = _numpy_words()


def shown_dtype(spec: Any) -> str:
    """A dtype a peer named, as an error message may show it: quoted when it is one of numpy's own names, else only
    its type and length (a server may name any text as a dtype, the client's token too)."""
    if isinstance(spec, str) and spec in _NUMPY_WORDS:
        return quoted(spec)
    return f"({described(spec)})"


def status_error(status: Any, said: str) -> EpisodeError:
    """The error for a server's non-2xx reply (a whole request's, or one batch item's ``status``):
    InfrastructureError for :data:`INFRA_STATUSES`, else an EpisodeError (the policy's fault)."""
    return InfrastructureError(said) if status in INFRA_STATUSES else EpisodeError(said)


def wire_dtype(spec: Any) -> np.dtype:
    """A dtype from the wire (``"<f4"``, ``"float32"``...) if it is numeric or boolean; else ProtocolError."""
    if isinstance(spec, bytes):
        spec = spec.decode("ascii", errors="replace")
    if not isinstance(spec, str) or not (spec in _DTYPE_NAMES or _DTYPE_STR.fullmatch(spec)):
        raise ProtocolError(
            f"unsupported array dtype {shown_dtype(spec)}: only bool, int8-64, uint8-64 and float16-64 arrays are accepted"
        )
    return np.dtype(spec)


def wire_shape(shape: Any) -> tuple[int, ...]:
    """A shape from the wire: a list of at most MAX_NDIM ints in ``[0, MAX_DIM]``; else ProtocolError."""
    if not isinstance(shape, list | tuple) or len(shape) > MAX_NDIM:
        raise ProtocolError(f"an array shape must be a list of at most {MAX_NDIM} dimensions")
    if not all(type(d) is int and 0 <= d <= MAX_DIM for d in shape):
        raise ProtocolError(f"an array shape must hold integers from 0 to {MAX_DIM}, got {_types(shape)}")
    return tuple(shape)


def array_from_bytes(data: Any, dtype: Any, shape: Any) -> np.ndarray:
    """``data`` (bytes, the array in C order) as a read-only array of ``dtype`` and ``shape``, all checked."""
    dt, sh = wire_dtype(dtype), wire_shape(shape)
    if not isinstance(data, bytes | bytearray):
        raise ProtocolError(f"array data must be bytes, got {type(data).__name__}")
    need = math.prod(sh) * dt.itemsize
    if len(data) != need:
        raise ProtocolError(f"array data holds {len(data)} bytes but {dt.name} {list(sh)} needs {need}")
    return np.frombuffer(bytes(data), dtype=dt).reshape(sh)


def array_from_list(data: Any, dtype: Any, shape: Any) -> np.ndarray:
    """A JSON list of numbers (flat, or nested to ``shape``) as an array of ``dtype`` and ``shape``."""
    dt, sh = wire_dtype(dtype), wire_shape(shape)
    try:
        values = np.asarray(data)
    except (ValueError, TypeError):
        raise ProtocolError("array data is a ragged or non-numeric list") from None
    if values.dtype.kind not in "biuf":
        raise ProtocolError(f"array data must be a list of numbers, got {values.dtype.kind!r} values")
    if values.size != math.prod(sh):
        raise ProtocolError(f"array data holds {values.size} values but shape {list(sh)} needs {math.prod(sh)}")
    return exact_cast(values, dt).reshape(sh)


def exact_cast(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``values`` as ``dt`` when every value is exactly representable: integers within ``dt``'s range (no wrap),
    booleans 0 or 1, floats that stay finite; else ProtocolError (never a silent cast or overflow warning)."""
    if values.size and dt.kind in "iub":
        if values.dtype.kind == "f" and not bool(np.all(np.isfinite(values) & (values == np.trunc(values)))):
            raise ProtocolError(f"array data holds non-integer values for a {dt.name} array")
        lo, hi = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        vmin, vmax = int(values.min()), int(values.max())
        if vmin < lo or vmax > hi:
            raise ProtocolError(f"array data holds values outside the {dt.name} range [{lo}, {hi}]")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = values.astype(dt)
    if dt.kind == "f" and values.size and not bool(np.isfinite(cast).all()):
        raise ProtocolError(f"array data holds values outside the finite {dt.name} range")
    return cast


def _types(value: Any) -> str:
    """The element types of a short list, for error messages that never echo a peer's values."""
    return "[" + ", ".join(type(v).__name__ for v in list(value)[:8]) + (", ...]" if len(value) > 8 else "]")


def _msgpack_hook(obj: dict[Any, Any]) -> Any:
    """openpi's ``msgpack_numpy.unpack_array``, with every field checked (see the module docstring)."""
    if b"__ndarray__" in obj:
        if not {b"data", b"dtype", b"shape"} <= set(obj):
            raise ProtocolError('an "__ndarray__" map needs "data", "dtype" and "shape"')
        return array_from_bytes(obj[b"data"], obj[b"dtype"], obj[b"shape"])
    if b"__npgeneric__" in obj:
        if not {b"data", b"dtype"} <= set(obj):
            raise ProtocolError('an "__npgeneric__" map needs "data" and "dtype"')
        dt, value = wire_dtype(obj[b"dtype"]), obj[b"data"]
        if type(value) not in (bool, int, float):
            raise ProtocolError(f"a numpy scalar's data must be a number, got {type(value).__name__}")
        try:
            return dt.type(value)
        except (OverflowError, ValueError):
            raise ProtocolError(f"{type(value).__name__} value does not fit a {dt.name} scalar") from None
    return obj


def check_depth(value: Any, limit: int = MAX_DEPTH) -> Any:
    """``value`` unchanged if its maps and lists nest at most ``limit`` deep; else ProtocolError. Iterative."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list | tuple):
            if depth >= limit:
                raise ProtocolError(f"the message nests maps and lists more than {limit} deep")
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return value


def unpack_msgpack(frame: Any) -> Any:
    """One openpi ``msgpack_numpy`` frame (bytes) -> Python value with checked numpy arrays; else ProtocolError."""
    import msgpack

    if not isinstance(frame, bytes | bytearray):
        raise ProtocolError(f"expected a binary msgpack frame, got a {type(frame).__name__} frame")
    try:
        value = msgpack.unpackb(frame, object_hook=_msgpack_hook, raw=False, strict_map_key=True)
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack's own errors (ExtraData, FormatError, StackError, ValueError, TypeError...)
        raise ProtocolError(f"not a msgpack message ({type(exc).__name__})") from None
    return check_depth(value)


def loads_json(body: bytes | bytearray | str) -> Any:
    """A JSON document from the wire -> Python value; ProtocolError if not JSON, not UTF-8 (RFC 8259 §8.1: JSON
    exchanged between systems is UTF-8, where ``json.loads`` would take UTF-16 and UTF-32 bytes too), more than
    :data:`MAX_DEPTH` deep, with NaN/Infinity, or with a key twice in one object (which value counts is then a guess:
    RFC 8259 §4). The parsing is :func:`rollbench.core.jsonfile.loads_strict`'s, in the wire's words."""
    try:
        return loads_strict(body, finite=True, depth=MAX_DEPTH, unique_keys=True)
    except JsonRefused as exc:
        raise ProtocolError(_wire_words(str(exc))) from None


def _wire_words(why: str) -> str:
    """What :func:`loads_strict` refused, said as the wire has always said it."""
    if why.startswith("it is nested too deeply"):
        return f"the message nests maps and lists more than {MAX_DEPTH} deep"
    if why.startswith("it is not UTF-8"):
        return "not JSON (its bytes are not UTF-8)"
    if why == "an object names a key twice":
        return "not JSON this reader accepts: an object names a key twice"
    if " is not a JSON number" in why:
        return f"{why.split(' ', 1)[0]} is not JSON (RFC 8259); send finite numbers"
    return f"not JSON ({why})"


DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")


def encode_array(arr: np.ndarray) -> dict[str, Any]:
    """An array as wire JSON ``{"dtype", "shape", "data": base64}`` (little-endian, C order)."""
    a = np.asarray(arr)
    if a.dtype.name not in DTYPES:
        raise ValueError(f"arrays of dtype {a.dtype} cannot be sent; supported: {', '.join(DTYPES)}")
    le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": base64.b64encode(le.tobytes()).decode("ascii")}


def decode_array(obj: Any) -> np.ndarray:
    """Wire JSON (base64 or list ``data``) -> numpy array, checked by this module (numeric and boolean
    dtypes only, bounded shapes, exact sizes); raises ProtocolError (a ValueError) saying what is wrong."""
    if not isinstance(obj, Mapping) or not {"dtype", "shape", "data"} <= set(obj):
        raise ProtocolError('an array must be an object with "dtype", "shape" and "data"')
    dtype, shape, data = obj["dtype"], obj["shape"], obj["data"]
    if dtype not in DTYPES:
        raise ProtocolError(f"unsupported dtype {shown_dtype(dtype)}; supported: {', '.join(DTYPES)}")
    if isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            raise ProtocolError("array data is not valid base64") from None
        return array_from_bytes(raw, np.dtype(dtype).newbyteorder("<").str, shape).astype(dtype, copy=False)
    if isinstance(data, list):
        return array_from_list(data, dtype, shape)
    raise ProtocolError("data must be a base64 string or a list of numbers")
