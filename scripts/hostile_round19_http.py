"""Hostile round 19's HTTP server classes (attacker b, F3) for ``scripts/hostile_inputs.py`` (its :class:`Runner`
``r``; seeded by ``r.rng``; each variant holds on main and fails before the fix, when the dashboard and MCP servers
had no request deadline and no connection cap, and MCP died of the file descriptors they held). Every class runs
against each of ``serve-policy --protocol http``, ``dashboard`` and ``mcp --transport http`` (``SURFACE`` in the ids):

* ``r19h-stall-SURFACE-i``: a request cut at a random byte of its headers (nothing at all, inside the request line,
  inside a header, all but the blank line), sent at once or dripped a byte every 0.2 s, to a server with a random
  ``--request-timeout-s`` (1 to 2 s): closed with nothing answered, after the deadline and within 3 s of it;
* ``r19h-body-SURFACE-i``: complete headers declaring a random JSON body (10 B to 60 kB) and a random part of it, at
  once or dripped: answered 408 ``{"error": "the request body did not arrive within S s"}`` and closed, within 3 s of
  the deadline;
* ``r19h-cap-SURFACE-i``: a random ``--max-connections`` (1 to 6) held by as many connections with random half
  requests: one more is answered 503 (``Retry-After``, the cap named) within a second; a held one that completes
  its request is answered 200, and so is a new one once they closed;
* ``r19h-fds-SURFACE-i``: a server under a random open-file limit (56 to 96) given a burst of 2 to 3 times as many
  connections with half requests, held a random 0.5 to 2 s: it keeps running and answers 200 afterwards, printing
  no traceback and at most one ``out of file descriptors`` line.
"""

from __future__ import annotations

import json
import resource
import select
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

SURFACES = ("serve-policy", "dashboard", "mcp")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h19", "version": "1"}},
}
MCP_HEADERS = "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
BODY_PATHS = {"serve-policy": "/act", "dashboard": "/api/label/h/r/n/0", "mcp": "/mcp"}
DRIP_S = 0.2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(
    r: Any, surface: str, d: Path, *extra: object, nofile: int | None = None
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """The surface's command on a free loopback port (under an open-file limit of ``nofile``): process, port and its
    stderr file, once it has answered a first request 200 (port 0: it did not within 60 s). The first answer also
    makes sure the connections that probed the port are gone before a variant counts connections."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "runs").mkdir(exist_ok=True)
    port, err = _free_port(), d / "stderr.txt"
    if surface == "serve-policy":
        cmd = [r.rb, "serve-policy", "--policy", "zero", "--protocol", "http"]
    elif surface == "dashboard":
        cmd = [r.rb, "dashboard", "--root", d / "runs", "--cache-dir", d / "cache", "--labels", d / "labels.json"]
    else:
        cmd = [r.rb, "mcp", "--transport", "http", "--root", d / "runs"]

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [*map(str, cmd), "--port", str(port), *map(str, extra)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=r.env,
            preexec_fn=limit,
        )
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if _answer(_exchange(port, _normal(surface))[1])[0] == 200:
                return proc, port, err
        except OSError:
            pass
        time.sleep(0.2)
    return proc, 0, err


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _normal(surface: str) -> bytes:
    """A request the surface answers 200, closing the connection after."""
    head = "host: 127.0.0.1\r\nconnection: close\r\n"
    if surface == "mcp":
        body = json.dumps(INITIALIZE)
        return f"POST /mcp HTTP/1.1\r\n{head}{MCP_HEADERS}content-length: {len(body)}\r\n\r\n{body}".encode()
    return f"GET {'/act' if surface == 'serve-policy' else '/api/runs'} HTTP/1.1\r\n{head}\r\n".encode()


def _read_all(s: socket.socket) -> bytes:
    reply = b""
    try:
        while chunk := s.recv(65536):
            reply += chunk
    except ConnectionResetError:
        pass
    return reply


def _exchange(port: int, sent: bytes, drip: bool = False) -> tuple[float, bytes]:
    """Send ``sent`` on a new connection (at once, or a byte every ``DRIP_S`` until the server answers or closes)
    and read until the server closes: (seconds from connecting, bytes received)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        t0 = time.monotonic()
        if not drip:
            s.sendall(sent)
        for i in range(len(sent) if drip else 0):
            if select.select([s], [], [], 0)[0]:
                break  # an answer or a close: stop sending
            try:
                s.send(sent[i : i + 1])
            except OSError:
                break
            time.sleep(DRIP_S)
        reply = _read_all(s)
        return time.monotonic() - t0, reply


def _answer(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers in lower case, body) of one HTTP/1.1 answer; status 0 when there is none."""
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return 0, {}, reply
    return status, dict(ln.lower().split(": ", 1) for ln in lines[1:] if ": " in ln), body


def _status_soon(port: int, request: bytes, within_s: float = 10) -> int:
    """The status the server gives ``request``, asked again while it is 503 or absent, until ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            status = _answer(_exchange(port, request)[1])[0]
        except OSError:
            status = 0
        if status not in (0, 503) or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def _cut_headers(rng: Any, surface: str) -> bytes:
    """A request cut at a random byte of its headers (never complete: the blank line is missing)."""
    head = _normal(surface).partition(b"\r\n\r\n")[0] + b"\r\n"
    return head[: rng.randint(0, len(head))]


def _short_body(rng: Any, surface: str) -> tuple[bytes, bool]:
    """Complete headers declaring a JSON body and a random part of it; whether to drip it (only a short part)."""
    declared = rng.randint(10, 60_000)
    part = ('{"x": "' + "a" * declared)[: rng.randint(0, declared - 1)]
    extra = MCP_HEADERS if surface == "mcp" else "content-type: application/json\r\n"
    head = f"POST {BODY_PATHS[surface]} HTTP/1.1\r\nhost: 127.0.0.1\r\n{extra}content-length: {declared}\r\n\r\n"
    return (head + part).encode(), len(part) <= 8 and rng.random() < 0.5


def deadlines(r: Any, n: int) -> None:
    """r19h-stall and r19h-body: ``n`` variants of each per surface, all at once against one server each."""
    for surface in SURFACES:
        timeout = round(r.rng.uniform(1.0, 2.0), 1)
        stalls = [(f"r19h-stall-{surface}-{i}", _cut_headers(r.rng, surface), r.rng.random() < 0.5) for i in range(n)]
        bodies = [(f"r19h-body-{surface}-{i}", *_short_body(r.rng, surface)) for i in range(n)]
        cases = [c for c in stalls + bodies if r.pattern in c[0]]
        if not cases:
            continue
        proc, port, err = _start(r, surface, r.work / "r19h" / f"deadline-{surface}", "--request-timeout-s", timeout)
        try:
            if not port:
                r.failures.append(f"r19h-{surface}: the server did not start: {err.read_text()[-400:]!r}")
                continue
            with ThreadPoolExecutor(len(cases)) as pool:
                results = list(pool.map(lambda c, p=port: _exchange(p, c[1], c[2]), cases))
        finally:
            _stop(proc)
        for (cid, sent, drip), (took, reply) in zip(cases, results, strict=True):
            r.count += 1
            _judge(r, cid, timeout, took, reply, f"sent {sent[:60]!r}{' dripped' if drip else ''}")


def _judge(r: Any, cid: str, timeout: float, took: float, reply: bytes, what: str) -> None:
    problems = []
    if not timeout - 0.2 < took < timeout + 3:
        problems.append(f"closed after {took:.1f} s")
    if "-stall-" in cid and reply:
        problems.append(f"answered {reply[:80]!r}")
    if "-body-" in cid:
        status, headers, body = _answer(reply)
        want = {"error": f"the request body did not arrive within {timeout:g} s"}
        if (status, headers.get("connection")) != (408, "close") or _json(body) != want:
            problems.append(f"answered {reply[:160]!r}")
    if problems:
        r.failures.append(f"{cid} ({what}; --request-timeout-s {timeout:g}): {'; '.join(problems)}")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def caps(r: Any, n: int) -> None:
    """r19h-cap: ``n`` variants per surface against one server with a random ``--max-connections``."""
    for surface in SURFACES:
        cap = r.rng.randint(1, 6)
        cids = [f"r19h-cap-{surface}-{i}" for i in range(n)]
        if not any(r.pattern in c for c in cids):
            continue
        d = r.work / "r19h" / f"cap-{surface}"
        proc, port, err = _start(r, surface, d, "--max-connections", cap, "--request-timeout-s", 30)
        try:
            if not port:
                r.failures.append(f"r19h-cap-{surface}: the server did not start: {err.read_text()[-400:]!r}")
                continue
            for cid in cids:
                cuts = [r.rng.randint(1, 20) for _ in range(cap)]
                if r.pattern in cid:
                    r.count += 1
                    _over_cap(r, cid, surface, port, cap, cuts)
        finally:
            _stop(proc)


def _over_cap(r: Any, cid: str, surface: str, port: int, cap: int, cuts: list[int]) -> None:
    request = _normal(surface)
    held = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(cap)]
    try:
        for s, cut in zip(held, cuts, strict=True):
            s.sendall(request[:cut])
        time.sleep(0.1)
        took, reply = _exchange(port, request)
        status, headers, body = _answer(reply)
        held[0].sendall(request[cuts[0] :])
        first = _answer(_read_all(held[0]))[0]
    finally:
        for s in held:
            s.close()
    later = _status_soon(port, request)
    want = f"this server already holds its limit of {cap} connections (--max-connections); try again in a moment"
    problems = []
    if (status, headers.get("retry-after"), _json(body)) != (503, "1", {"error": want}) or took > 1.0:
        problems.append(f"the extra connection got {reply[:160]!r} after {took:.1f} s")
    if (first, later) != (200, 200):
        problems.append(f"a held connection got {first}, a later one {later}")
    if problems:
        r.failures.append(f"{cid} (--max-connections {cap}, held cut at {cuts}): {'; '.join(problems)}")


def descriptors(r: Any, n: int) -> None:
    """r19h-fds: ``n`` variants per surface, each its own server under a random open-file limit."""
    for surface in SURFACES:
        for i in range(n):
            cid, nofile = f"r19h-fds-{surface}-{i}", r.rng.randint(56, 96)
            burst, hold_s = nofile * r.rng.randint(2, 3), round(r.rng.uniform(0.5, 2.0), 1)
            if r.pattern not in cid:
                continue
            r.count += 1
            proc, port, err = _start(r, surface, r.work / "r19h" / cid, "--request-timeout-s", 1, nofile=nofile)
            try:
                opened = _burst(port, burst, hold_s) if port else 0
                status = _status_soon(port, _normal(surface), within_s=20) if port else 0
                alive = proc.poll() is None
            finally:
                _stop(proc)
            said = err.read_text(errors="replace")
            problems = [] if (status, alive) == (200, True) else [f"answered {status} after, alive {alive}"]
            if "Traceback" in said:
                problems.append("a traceback on stderr")
            if sum("out of file descriptors" in ln for ln in said.splitlines()) > 1:
                problems.append("more than one 'out of file descriptors' line")
            if problems:
                what = f"limit {nofile}, {opened} connections held {hold_s} s"
                r.failures.append(f"{cid} ({what}): {'; '.join(problems)}; stderr {said[-400:]!r}")


def _burst(port: int, count: int, hold_s: float) -> int:
    """Open up to ``count`` connections, each with half a request line, hold them ``hold_s`` s, close them."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            held.append(s)
            s.sendall(b"GET / HTTP/1.1\r\n")
    except OSError:  # the listen backlog is full: enough
        pass
    time.sleep(hold_s)
    for s in held:
        s.close()
    return len(held)


def run_all(r: Any, n: int) -> None:
    """Every class above: ``n`` variants of the deadline classes and of the cap class per surface (one server each),
    ``max(1, n // 4)`` of the file-descriptor class per surface (a server each)."""
    deadlines(r, n)
    caps(r, n)
    descriptors(r, max(1, n // 4))
