"""Hostile peers for the remote-policy tests: fuzzed wire messages, and small real servers that answer badly.

Nothing here is a test double of rollbench: the servers are real websocket/HTTP servers on 127.0.0.1 that speak the
protocols the way a broken or malicious policy server would, so the real clients can be pointed at them. The fuzz
cases come from a seeded ``random.Random`` (no hypothesis dependency: a fixed, bounded list of cases, the same in
every run, so a failure is reproducible by its label).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

# every kind of dtype a peer can name: object, void/structured, strings, complex, datetimes, long double, nonsense,
# and the accepted numeric ones in both byte orders
DTYPES: list[Any] = [
    "|O", "O", "object", "|O8", "|V8", "V", "<U2", "|S3", "<c8", "<c16", "<M8[s]", "<m8[ns]", "<f16", "<g",
    "i4,O", "[('a', '|O')]", "p", "P", "x", "", None, 5, b"<f4",
    "<f4", "<f8", ">f8", "<f2", "|u1", "|b1", "<i2", ">i8", "<u4", "float32",
]  # fmt: skip
SHAPES: list[Any] = [
    [], [0], [1], [3], [4], [2, 3], [-1], [2**40], [1] * 9, [True], ["a"], None, 7, [1.5], [2**24 + 1], [0, 2**62],
    [2, 2, 2], {"a": 1},
]  # fmt: skip
JSON_DTYPES: list[Any] = [
    "object", "O", "|O", "complex64", "float128", "str", "<U2", "V8", "datetime64", "<f4", "bool", "uint8",
    "float32", "float64", "int64", None, 3, ["float32"],
]  # fmt: skip


def _itemsize(dtype: Any) -> int:
    try:
        return int(np.dtype(dtype).itemsize) or 4
    except Exception:
        return 8


def _size(shape: Any) -> int:
    if isinstance(shape, list) and all(type(d) is int and 0 <= d <= 64 for d in shape):
        return int(np.prod(shape)) if shape else 1
    return 3


def ndarray_map(rng: random.Random, dtype: Any, shape: Any) -> dict[bytes, Any]:
    """openpi's msgpack_numpy array map with the given dtype and shape and data of the right or a wrong length."""
    n = _itemsize(dtype) * _size(shape) + rng.choice([0, 0, 0, -1, 1, 7])
    data: Any = rng.randbytes(max(n, 0))
    if rng.random() < 0.1:
        data = rng.choice(["text", 12, None, [1, 2]])
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


def ws_cases(seed: int = 0, random_cases: int = 120) -> Iterator[tuple[str, list[bytes | str]]]:
    """(label, frames): frames to send on one fresh connection after the metadata; only the last is hostile.

    Every dtype in three places (a reset's seed, the state of an act, an image of an act), then seeded random
    dtype/shape/data combinations, then malformed msgpack.
    """
    rng = random.Random(seed)
    pack = msgpack.Packer().pack
    reset = pack({"reset": {"task": "scripted/reach", "seed": 0, "instruction": "x"}})

    def act(state: Any, image: Any = None) -> bytes:
        msg: dict[Any, Any] = {"observation/state": state, "prompt": "move the point to the goal"}
        if image is not None:
            msg["observation/image"] = image
        return pack(msg)

    good_state = {b"__ndarray__": True, b"data": np.zeros(4, "<f4").tobytes(), b"dtype": "<f4", b"shape": [4]}
    for dtype in DTYPES:
        yield f"seed {dtype!r}", [pack({"reset": {"task": "scripted/reach", "seed": ndarray_map(rng, dtype, [1])}})]
        yield f"state {dtype!r}", [reset, act(ndarray_map(rng, dtype, [4]))]
        yield f"image {dtype!r}", [reset, act(good_state, ndarray_map(rng, dtype, [2, 2, 3]))]
        yield (
            f"scalar {dtype!r}",
            [
                pack(
                    {"reset": {"task": "scripted/reach", "seed": {b"__npgeneric__": True, b"data": 1, b"dtype": dtype}}}
                )
            ],
        )
    for i in range(random_cases):
        arr = ndarray_map(rng, rng.choice(DTYPES), rng.choice(SHAPES))
        where = rng.choice(["seed", "state", "image"])
        if where == "seed":
            yield f"random {i} seed", [pack({"reset": {"task": "scripted/reach", "seed": arr}})]
        else:
            yield f"random {i} {where}", [reset, act(arr) if where == "state" else act(good_state, arr)]
    valid = act(good_state)
    garbage: list[tuple[str, bytes | str]] = [
        ("empty", b""),
        ("0xc1", b"\xc1"),
        ("text frame", "hello"),
        ("truncated", valid[: len(valid) // 2]),
        ("trailing bytes", valid + b"\x00"),
        ("array32 of 2**32-1 items, no data", b"\xdd\xff\xff\xff\xff"),
        ("map32 of 2**32-1 items, no data", b"\xdf\xff\xff\xff\xff"),
        ("int map key", pack({1: 2})),
        ("ext type", pack(msgpack.ExtType(5, b"x"))),
        ("timestamp", pack({"reset": {"task": "scripted/reach", "seed": msgpack.Timestamp(1)}})),
        ("deep nesting", pack(nested(200))),
        ("npgeneric str", pack({"reset": {"seed": {b"__npgeneric__": True, b"data": "x", b"dtype": "<i8"}}})),
        ("npgeneric huge", pack({"reset": {"seed": {b"__npgeneric__": True, b"data": 2**63, b"dtype": "|i1"}}})),
        ("ndarray missing keys", pack({"reset": {"seed": {b"__ndarray__": True}}})),
        ("str-key ndarray", pack({"reset": {"task": "scripted/reach", "seed": {"__ndarray__": True, "dtype": "|O"}}})),
        ("list request", pack([1, 2, 3])),
        ("reset not a map", pack({"reset": 5})),
        ("unknown task", pack({"reset": {"task": "nope/nope", "seed": 0}})),
    ]
    for j in range(20):
        garbage.append((f"random bytes {j}", rng.randbytes(rng.randint(1, 200))))
    for label, frame in garbage:
        yield label, [reset, frame] if label != "text frame" else [frame]


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def http_bodies(seed: int = 0, random_cases: int = 80) -> Iterator[tuple[str, bytes]]:
    """(label, body) of JSON /act act requests for session ``fuzz`` (reset first), every dtype and odd shapes."""
    rng = random.Random(seed)

    def act(state: Any, images: Any = None) -> bytes:
        body = {"session": "fuzz", "instruction": "x", "state": state, "images": images or {}}
        return json_bytes(body)

    def arr(dtype: Any, shape: Any) -> dict[str, Any]:
        n = _itemsize(dtype if isinstance(dtype, str) else "f4") * _size(shape) + rng.choice([0, 0, -1, 1])
        data: Any = base64.b64encode(rng.randbytes(max(n, 0))).decode()
        roll = rng.random()
        if roll < 0.15:
            data = [rng.choice([1, 2.5, "a", None, [1], True]) for _ in range(_size(shape))]
        elif roll < 0.2:
            data = "not base64!"
        return {"dtype": dtype, "shape": shape, "data": data}

    for dtype in JSON_DTYPES:
        yield f"state {dtype!r}", act(arr(dtype, [4]))
        yield f"image {dtype!r}", act(arr("float32", [4]), {"corner": arr(dtype, [2, 2, 3])})
    for i in range(random_cases):
        yield f"random {i}", act(arr(rng.choice(JSON_DTYPES), rng.choice(SHAPES)))
    yield (
        "NaN literal",
        b'{"session": "fuzz", "instruction": "x", "state": {"dtype": "float32", "shape": [1], "data": [NaN]}}',
    )
    yield (
        "1e999",
        b'{"session": "fuzz", "instruction": "x", "state": {"dtype": "float32", "shape": [1], "data": [1e999]}}',
    )
    yield "5000 digits", b'{"session": "fuzz", "state": ' + b"9" * 5000 + b"}"
    yield "deep nesting", b"[" * 100_000 + b"]" * 100_000
    yield "not JSON", b"{'single': quotes}"
    yield "not UTF-8", b"\xff\xfe\x00"
    yield "array body", b"[1, 2]"
    yield "session not a string", json_bytes({"session": [1], "instruction": "x", "state": arr("float32", [4])})
    yield (
        "images not a map",
        json_bytes({"session": "fuzz", "instruction": "x", "state": arr("float32", [4]), "images": 3}),
    )
    for j in range(10):
        yield f"random bytes {j}", rng.randbytes(rng.randint(1, 200))


def http_replies(seed: int = 0) -> Iterator[tuple[str, tuple[int, bytes]]]:
    """(label, (status, body)) replies of a broken JSON /act server: actions of every dtype and odd shapes,
    error bodies of odd shapes, and bodies that are not JSON."""
    for label, body in http_bodies(seed, random_cases=40):
        try:
            state = json.loads(body).get("state")
        except Exception:
            state = None
        if isinstance(state, dict):
            yield f"actions from {label}", (200, json_bytes({"actions": state}))
        else:
            yield label, (200, body)
    for status in (400, 404, 422, 500, 503):
        for body in (b"", b"null", b'{"error": 5}', b'{"detail": {"deep": [1, 2]}}', b"\xff\xfe", b"[" * 5000):
            yield f"{status} {body[:20]!r}", (status, body)
    yield "nested actions", (200, json_bytes({"actions": [[[1.0, 2.0]]]}))
    yield "string actions", (200, json_bytes({"actions": [["a", "b"]]}))
    yield "ragged actions", (200, json_bytes({"actions": [[1.0, 2.0], [3.0]]}))
    yield "valid", (200, json_bytes({"actions": [[0.5, -0.5]]}))


def json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def hostile_ws_server(replies: Callable[[int], bytes | str], metadata: dict[str, Any]) -> Iterator[str]:
    """A real websocket server on 127.0.0.1: sends ``metadata``, then answers request ``i`` with ``replies(i)``."""
    from websockets.sync.server import serve

    count = [0]

    def handler(conn: Any) -> None:
        conn.send(msgpack.packb(metadata))
        try:
            while True:
                conn.recv()
                count[0] += 1
                conn.send(replies(count[0] - 1))
        except Exception:
            pass

    with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(timeout=10)


@contextmanager
def hostile_http_server() -> Iterator[str]:
    """A real FastAPI app on uvicorn, 127.0.0.1, in a thread; yields its base URL. Paths (each also answers GET
    readiness with ``reset: false``): ``/detail`` validates its body with a pydantic model (FastAPI's own 422
    ``{"detail": [...]}`` for rollbench's act body), ``/object`` answers actions of dtype ``object``, ``/plain``
    answers 500 with a text body, ``/nan`` answers ``NaN`` actions as JSON would never allow, ``/fuzz`` answers the
    replies of :func:`http_replies` in turn."""
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse, Response
    from pydantic import BaseModel

    class Needs(BaseModel):
        observation: dict[str, float]

    app = FastAPI()
    fuzz = [b for _, b in http_replies()]
    calls = [0]
    for path in ("/detail", "/object", "/plain", "/nan", "/fuzz"):
        app.get(path)(lambda: {"ready": True, "metadata": {"reset": False, "needs_images": False}})

    @app.post("/detail")
    def detail(body: Needs) -> dict[str, Any]:
        return {}

    @app.post("/object")
    def obj() -> dict[str, Any]:
        return {"actions": {"dtype": "object", "shape": [1, 2], "data": base64.b64encode(b"\x01" * 16).decode()}}

    @app.post("/plain")
    def plain() -> Response:
        return PlainTextResponse("the GPU fell over", status_code=500)

    @app.post("/nan")
    def nan() -> Response:
        return Response(b'{"actions": [[NaN, 0.0]]}', media_type="application/json")

    @app.post("/fuzz")
    def fuzzed() -> Response:
        calls[0] += 1
        status, body = fuzz[(calls[0] - 1) % len(fuzz)]
        return Response(body, status_code=status, media_type="application/json")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.05)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass(frozen=True)
class RawRequest:
    """One HTTP/1.1 request as a raw server read it: ``n`` counts the server's requests from 0."""

    n: int
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes


@contextmanager
def raw_http_server(answer: Callable[[RawRequest], bytes]) -> Iterator[str]:
    """A real TCP server on 127.0.0.1 that reads one HTTP/1.1 request per connection and writes ``answer(request)``
    as it is, then closes; yields ``http://127.0.0.1:PORT``. It can send what no HTTP server library would: a
    malformed header line, a ``101`` with a hostile ``Upgrade`` header, an error body echoing the request's
    ``Authorization``."""
    import socketserver

    count = [0]
    lock = threading.Lock()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                data = self.request.recv(4096)
                if not data:
                    return
                head += data
            raw, _, body = head.partition(b"\r\n\r\n")
            first, *lines = raw.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
            need = int(headers.get("content-length", "0") or 0)
            while len(body) < need:
                data = self.request.recv(65536)
                if not data:
                    break
                body += data
            method, path, *_ = [*first.split(" "), "", ""]
            with lock:
                n, count[0] = count[0], count[0] + 1
            self.request.sendall(answer(RawRequest(n, method, path, headers, body)))

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def http_reply(status: int, body: bytes, *headers: str) -> bytes:
    """A well-formed HTTP/1.1 reply (``Connection: close``) with ``body`` and the extra ``headers`` lines."""
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
