"""Hostile servers of issue 42 ("one bad run or peer costs only itself"; hostile round 5, F3 and F4), run by
``scripts/hostile_inputs.py`` on its :class:`Runner` (variants drawn from the runner's RNG):

* a policy server (``ws://`` or ``http://``) that answers every request with a redirect (301/302/303/307/308) to
  another loopback server, on another port or the same one: ``eval`` exits 2 in one line naming the status, the
  other server sees nothing, the ``Location`` is never quoted;
* a policy server or model API that sends a status line and then one byte every half second (hours of headers):
  ``eval`` ends by the client's own timeout, the readiness probe and the agent probe with exit 2, an act call as an
  episode ``error`` of the ``infrastructure`` (exit 1), never a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

STATUSES = (301, 302, 303, 307, 308)


@contextlib.contextmanager
def _server(answer: Callable[[socket.socket, bytes], None]) -> Iterator[tuple[int, list[bytes]]]:
    """A loopback TCP server calling ``answer(conn, request)`` per connection; yields (port, requests seen)."""
    seen: list[bytes] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            data = conn.recv(65536)
            seen.append(data)
            answer(conn, data)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=one, args=(srv.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield srv.getsockname()[1], seen
    finally:
        with contextlib.suppress(OSError):
            srv.shutdown(socket.SHUT_RDWR)
        srv.close()


def _drip(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    end = time.monotonic() + 300
    while time.monotonic() < end:
        conn.sendall(b"X")
        time.sleep(0.5)


def _drip_when(when: Callable[[bytes], bool], reply: Any) -> Callable[[socket.socket, bytes], None]:
    """Answer ``reply`` (JSON) on one keep-alive connection until a request for which ``when`` holds: drip that."""

    def whole(conn: socket.socket, data: bytes) -> bytes:  # the body too (it may come in a later segment)
        if not data:
            return data
        head, _, body = data.partition(b"\r\n\r\n")
        sizes = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
        while len(body) < sum(sizes):
            body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def answer(conn: socket.socket, data: bytes) -> None:
        data = whole(conn, data)
        while data and not when(data):
            body = json.dumps(reply).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip
            data = whole(conn, conn.recv(65536))
        if data:
            _drip(conn)

    return answer


def _eval(r: Any, policy: str, out: str, env: dict[str, str] | None = None, *extra: str) -> tuple[int, str, str]:
    cmd = [r.rb, "eval", "--env", "scripted/reach", "--policy", policy, "--episodes", "1", "--max-steps", "3",
           "--out", str(r.work / "net" / out), *extra]  # fmt: skip
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**r.env, **(env or {})},
                           stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        return -999, "", "HANG"
    return p.returncode, p.stdout, p.stderr


def _check(r: Any, cid: str, code: int, stderr: str, exits: set[int], words: str) -> None:
    r.count += 1
    problems = []
    if code == -999:
        problems.append("hung")
    if "Traceback" in stderr:
        problems.append("traceback")
    if code not in exits:
        problems.append(f"exit {code} not in {sorted(exits)}")
    if code == 2 and len(stderr.strip().splitlines()) != 1:
        problems.append("a refusal of more than one line")
    if words not in " ".join(stderr.split()):
        problems.append(f"{words!r} not said")
    if problems:
        r.failures.append(f"{cid}: {', '.join(problems)}; stderr {stderr.strip()[-300:]!r}")


def redirects(r: Any, n: int) -> None:
    for i in range(n):
        status, scheme = r.rng.choice(STATUSES), r.rng.choice(["ws", "http"])
        same = r.rng.random() < 0.3
        cid = f"net-redirect-{scheme}-{status}-{'same' if same else 'other'}-{i}"
        if r.pattern not in cid:
            continue
        with _server(lambda conn, _: None) as (other, reached):
            where = [""]

            def moved(conn: socket.socket, _: bytes, status: int = status, where: list[str] = where) -> None:
                conn.sendall(f"HTTP/1.1 {status} Moved\r\nLocation: {where[0]}\r\nConnection: close\r\n"
                             "Content-Length: 0\r\n\r\n".encode())  # fmt: skip

            with _server(moved) as (port, _asked):
                where[0] = f"{scheme}://127.0.0.1:{port if same else other}/hostile-elsewhere"
                url = f"{scheme}://127.0.0.1:{port}" + ("/act" if scheme == "http" else "")
                code, _, err = _eval(r, url, cid)
        _check(r, cid, code, err, {2}, f"HTTP {status}")
        if reached or "hostile-elsewhere" in err:
            r.failures.append(f"{cid}: the redirect was followed or its Location quoted ({len(reached)} requests)")


def trickles(r: Any) -> None:
    ready = {"ready": True, "metadata": {"needs_images": False}}
    cases: list[tuple[str, Callable[[socket.socket, bytes], None], str, dict[str, str], set[int], str]] = [
        ("net-trickle-http-ready", lambda c, _: _drip(c), "http://127.0.0.1:{port}/act", {}, {2}, "ReadTimeout"),
        ("net-trickle-http-act", _drip_when(lambda d: b'"instruction"' in d, ready), "http://127.0.0.1:{port}/act",
         {}, {1}, ""),
        ("net-trickle-agent-probe", lambda c, _: _drip(c), "agent:local/m",
         {"ROLLBENCH_AGENT_BASE_URL": "http://127.0.0.1:{port}/v1", "ROLLBENCH_AGENT_API_KEY": "sk-x"}, {2},
         "ReadTimeout"),
    ]  # fmt: skip
    for cid, answer, policy, env, exits, words in cases:
        if r.pattern not in cid:
            continue
        with _server(answer) as (port, _):
            opts = '{"timeout_s": 2, "connect_timeout_s": 2, "retries": 0}'
            code, out, err = _eval(r, policy.format(port=port), cid, {k: v.format(port=port) for k, v in env.items()},
                                   "--policy-options", opts, "--json")  # fmt: skip
        _check(r, cid, code, err, exits, words)
        if cid.endswith("act") and code == 1:
            faults = [e.get("error_fault") for e in json.loads(out or "{}").get("episodes", [])]
            if faults != ["infrastructure"]:
                r.failures.append(f"{cid}: faults {faults}, not ['infrastructure']")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised one."""
    os.makedirs(r.work / "net", exist_ok=True)
    redirects(r, n)
    trickles(r)
