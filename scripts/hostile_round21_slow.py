"""Hostile round 21's slow-reader classes (attacker b, F1 and F2) for ``scripts/hostile_inputs.py`` (its
:class:`Runner` ``r``; seeded by ``r.rng``; each variant holds on main and fails before the fix, when nothing bounded
how long a server waited for its peer to take its answers). Every client here never reads what it is sent:

* ``r21s-http-SURFACE-i``: ``serve-policy --protocol http``, ``dashboard`` and ``mcp --transport http`` with a random
  ``--request-timeout-s`` (1 to 2 s) and ``--max-connections`` (1 to 3), held by as many clients (a 1 to 4 kB
  receive buffer) that pipeline a random request (``GET /``, the surface's 200 request kept alive, a 404 path) until
  the server stops reading (all at once): a new request before is answered 503; each is reset between half a
  deadline and 1.25 deadlines + 3 s after it stalled; then a new request is answered 200; no traceback on stderr;
* ``r21s-ws-i``: ``serve-policy`` (websocket, ``--max-sessions 1``, a random deadline of 2.5 to 3.5 s) held by a
  client that floods act requests or pings and never reads: a new client meanwhile is refused 1013; the flooder is
  reset between half a deadline and a deadline + 3 s after it stalled, the server says so in one line on stderr,
  and a new client gets the metadata.
"""

from __future__ import annotations

import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import hostile_round19_http as h19  # the HTTP surfaces' start, stop and requests, beside this script

ESTABLISHED = 1  # Linux's tcp_info.tcpi_state of an open connection


def _connect(port: int, rcvbuf: int) -> socket.socket:
    """A connection with a small receive buffer and small segments (the server's send buffer stays small)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.connect(("127.0.0.1", port))
    return s


def _unread(s: socket.socket, opening: bytes, flood: bytes) -> tuple[socket.socket, float]:
    """On ``s``, send ``opening`` (a websocket handshake, whose 101 is read), then ``flood`` until the server stops
    reading: (the socket, when its sends stalled)."""
    if opening:
        s.settimeout(10)
        s.sendall(opening)
        s.recv(12)
    s.setblocking(False)
    stall, start, pending = None, time.monotonic(), b""
    while (stall is None or time.monotonic() - stall < 0.3) and time.monotonic() - start < 60:
        try:
            pending = pending or flood
            pending = pending[s.send(pending) :]  # whole frames or requests: a cut one would be refused at once
            stall = None
        except BlockingIOError:
            stall = stall or time.monotonic()
            time.sleep(0.01)
        except OSError:
            break
    return s, stall or time.monotonic()


def _cut_after(s: socket.socket, since: float, within_s: float = 30) -> float | None:
    """Seconds from ``since`` until ``s`` is no longer ESTABLISHED (the server reset or closed it); None if not."""
    while time.monotonic() - since < within_s:
        if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != ESTABLISHED:
            return time.monotonic() - since
        time.sleep(0.05)
    return None


def _pipelined(rng: Any, surface: str) -> bytes:
    kind = rng.choice(["root", "normal", "missing"])
    if kind == "normal":
        one = h19._normal(surface).replace(b"connection: close\r\n", b"")
    else:
        one = f"GET {'/' if kind == 'root' else '/no-such-page'} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode()
    return one * max(1, 2000 // len(one))


def http_surfaces(r: Any, n: int) -> None:
    """r21s-http: ``n`` variants per surface, each its own server."""
    for surface in h19.SURFACES:
        for i in range(n):
            cid = f"r21s-http-{surface}-{i}"
            timeout, cap = round(r.rng.uniform(1.0, 2.0), 1), r.rng.randint(1, 3)
            floods = [(r.rng.randint(1024, 4096), _pipelined(r.rng, surface)) for _ in range(cap)]
            if r.pattern not in cid:
                continue
            r.count += 1
            bounds = ("--request-timeout-s", timeout, "--max-connections", cap)
            proc, port, err = h19._start(r, surface, r.work / "r21s" / cid, *bounds)
            try:
                if not port:
                    r.failures.append(f"{cid}: the server did not start: {err.read_text()[-400:]!r}")
                    continue
                held = [_connect(port, rcvbuf) for rcvbuf, _ in floods]
                during = h19._answer(h19._exchange(port, h19._normal(surface))[1])[0]
                with ThreadPoolExecutor(len(held)) as pool:
                    cuts = list(pool.map(lambda s, f: _cut_after(*_unread(s, b"", f[1])), held, floods))
                for s in held:
                    s.close()
                after = h19._status_soon(port, h19._normal(surface), within_s=5)
            finally:
                h19._stop(proc)
            _judge(
                r, cid, f"--request-timeout-s {timeout:g}, {cap} held", timeout, cuts, (during, after), (503, 200), err
            )


def websocket(r: Any, n: int) -> None:
    """r21s-ws: ``n`` variants, each its own ``serve-policy`` (websocket)."""
    import numpy as np
    from openpi_client import msgpack_numpy

    state = np.array([0.1, 0.1, 0.5, 0.1], np.float32)  # a scripted/reach state
    act = msgpack_numpy.packb({"observation/state": state, "prompt": "move the point to the goal"})
    for i in range(n):
        cid, timeout = f"r21s-ws-{i}", round(r.rng.uniform(2.5, 3.5), 1)  # the meanwhile client may wait 1 s
        kind, rcvbuf = r.rng.choice(["act", "ping"]), r.rng.randint(1024, 4096)
        if r.pattern not in cid:
            continue
        r.count += 1
        payload = act if kind == "act" else b"p" * 125
        frame = bytes([0x82 if kind == "act" else 0x89, 0x80 | len(payload)]) + b"\0\0\0\0" + payload
        d = r.work / "r21s" / cid
        d.mkdir(parents=True, exist_ok=True)
        err = d / "stderr.txt"
        cmd = [r.rb, "serve-policy", "--policy", "scripted-expert", "--env", "scripted/reach", "--port", "0"]
        extra = ["--max-sessions", "1", "--request-timeout-s", str(timeout)]
        with err.open("wb") as stderr:
            proc = subprocess.Popen([*cmd, *extra], stdout=subprocess.PIPE, stderr=stderr, env=r.env, text=True)
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line.startswith("serving "):
                r.failures.append(f"{cid}: the server did not start: {err.read_text()[-400:]!r}")
                continue
            port = int(line.split(":")[-1])
            handshake = (
                f"GET / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n"
            ).encode()
            s, stall = _unread(_connect(port, rcvbuf), handshake, frame * 32)
            during = _first_message(port)
            cuts = [_cut_after(s, stall)]
            s.close()
            after = _first_message(port)
        finally:
            proc.kill()
            proc.wait()
        said = err.read_text(errors="replace")
        lines = [ln for ln in said.splitlines() if ln.strip()]
        problems = (
            [] if len(lines) == 1 and "closed the websocket connection" in lines[0] else [f"stderr {said[-300:]!r}"]
        )
        _judge(
            r,
            cid,
            f"{kind} flood, --request-timeout-s {timeout:g}",
            timeout,
            cuts,
            (during, after),
            (1013, 0),
            err,
            problems,
        )


def _first_message(port: int) -> int:
    """0 when a new websocket client gets the metadata first; else the close code after the error text (-1: none)."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    try:
        with connect(f"ws://127.0.0.1:{port}", compression=None, open_timeout=10) as ws:
            if isinstance(ws.recv(timeout=10), bytes):
                return 0
            ws.recv(timeout=10)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd else -1
    except (OSError, TimeoutError):
        return -1
    return -1


def _judge(
    r: Any,
    cid: str,
    what: str,
    timeout: float,
    cuts: list[float | None],
    seen: tuple[int, int],
    want: tuple[int, int],
    err: Path,
    problems: list[str] | None = None,
) -> None:
    problems = list(problems or [])
    if not all(c is not None and 0.5 * timeout < c < 1.25 * timeout + 3 for c in cuts):
        problems.append(f"reset after {cuts} s of not reading")
    if seen != want:
        problems.append(f"a new client got {seen[0]} meanwhile and {seen[1]} after (wanted {want})")
    if "Traceback" in err.read_text(errors="replace"):
        problems.append("a traceback on stderr")
    if problems:
        r.failures.append(f"{cid} ({what}): {'; '.join(problems)}")


def run_all(r: Any, n: int) -> None:
    """Both classes: ``max(1, n // 4)`` variants per surface (a server each)."""
    http_surfaces(r, max(1, n // 4))
    websocket(r, max(1, n // 4))
