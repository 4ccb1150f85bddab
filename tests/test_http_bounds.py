"""Every rollbench HTTP server holds its peers to the bounds of ``rollbench.wire.inbound`` (hostile round 19, F3):
``serve-policy --protocol http``, ``rollbench dashboard`` and ``rollbench mcp --transport http``, each a real
subprocess on 127.0.0.1 started by its command with ``--request-timeout-s`` and ``--max-connections``, driven with
raw sockets. A request whose headers or body stop arriving is closed (408 for the body) at the deadline; a connection
over the cap is answered 503 while the others are held, and the server answers once they close; a burst of
connections past the process's open-file limit leaves it serving, with one plain line on stderr. A client that
stops reading its answers (hostile round 21, F2) is cut off once it has taken no byte for the deadline, and its
slot given back; a slow video download that keeps reading and an MCP event stream outlast the deadline."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from dashboard_support import ServerThread, free_port, record_run
from rollbench.wire.inbound import ConnectionBounds
from served_policy import dropped_after, wait_listening

SURFACES = ("serve-policy", "dashboard", "mcp")
DEADLINE = 1.5  # --request-timeout-s of these servers
CAP = 3  # --max-connections of these servers
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
MCP_HEADERS = "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"


def command(surface: str, d: Path, port: int) -> list[str]:
    rb = [sys.executable, "-m", "rollbench"]
    if surface == "serve-policy":
        return [*rb, "serve-policy", "--policy", "zero", "--protocol", "http", "--port", str(port)]
    (d / "runs").mkdir(exist_ok=True)
    if surface == "dashboard":
        return [*rb, "dashboard", "--root", str(d / "runs"), "--port", str(port), "--cache-dir", str(d / "cache")]
    return [*rb, "mcp", "--transport", "http", "--root", str(d / "runs"), "--port", str(port)]


def normal_request(surface: str) -> bytes:
    """A request the surface answers 200, closing the connection after."""
    head = "host: 127.0.0.1\r\nconnection: close\r\n"
    if surface == "mcp":
        body = json.dumps(INITIALIZE)
        return f"POST /mcp HTTP/1.1\r\n{head}{MCP_HEADERS}content-length: {len(body)}\r\n\r\n{body}".encode()
    path = "/act" if surface == "serve-policy" else "/api/runs"
    return f"GET {path} HTTP/1.1\r\n{head}\r\n".encode()


def short_body(surface: str) -> bytes:
    """Headers declaring a 100-byte JSON body, and 6 bytes of it, to a path whose app reads the body."""
    path = {"serve-policy": "/act", "dashboard": "/api/label/h/r/n/0", "mcp": "/mcp"}[surface]
    extra = MCP_HEADERS if surface == "mcp" else "content-type: application/json\r\n"
    return f'POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n{extra}content-length: 100\r\n\r\n{{"sess'.encode()


@contextmanager
def started(
    surface: str, d: Path, *extra: str, preexec: Callable[[], None] | None = None
) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    """The surface's command on a free port with ``extra`` options; yields (port, process, its stderr file) once it
    has answered a first request (so the connections that probed the port are gone when a test counts them)."""
    d.mkdir(parents=True, exist_ok=True)
    port, err = free_port(), d / f"{surface}.stderr"
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [*command(surface, d, port), *extra], stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=preexec
        )
    try:
        wait_listening(proc, port, 60, lambda: f"{surface} did not start: {err.read_text()}")
        assert status_soon(port, normal_request(surface)) == 200, err.read_text()
        yield port, proc, err
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def exchange(port: int, sent: bytes, timeout: float = 15) -> tuple[float, bytes]:
    """Send ``sent`` on a new connection and read until the server closes: (seconds taken, bytes received)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        t0 = time.monotonic()
        s.sendall(sent)
        reply = read_all(s)
        return time.monotonic() - t0, reply


def read_all(s: socket.socket) -> bytes:
    reply = b""
    while chunk := s.recv(65536):
        reply += chunk
    return reply


def answer(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers in lower case, body) of one HTTP/1.1 answer."""
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def status_soon(port: int, request: bytes, within_s: float = 10) -> int:
    """The status the server gives ``request``, asked until it is not 503 (connections closing) or time is up."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            status = answer(exchange(port, request)[1])[0]
        except (OSError, ValueError, IndexError):
            status = 0
        if status not in (0, 503) or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


@pytest.fixture(scope="module", params=SURFACES)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    d = tmp_path_factory.mktemp(request.param)
    bounds = ("--request-timeout-s", str(DEADLINE), "--max-connections", str(CAP))
    with started(request.param, d, *bounds) as (port, _, _):
        yield request.param, port


@pytest.mark.slow
@pytest.mark.parametrize("sent", [b"", b"POST /act HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-le"], ids=["silent", "half"])
def test_a_request_whose_headers_stop_arriving_is_closed_at_the_deadline(server: tuple[str, int], sent: bytes) -> None:
    took, reply = exchange(server[1], sent)
    assert reply == b""
    assert DEADLINE - 0.1 < took < DEADLINE + 3


@pytest.mark.slow
def test_a_request_whose_body_stops_arriving_is_answered_408_at_the_deadline(server: tuple[str, int]) -> None:
    took, reply = exchange(server[1], short_body(server[0]))
    status, headers, body = answer(reply)
    assert (status, headers["connection"], headers["content-type"]) == (408, "close", "application/json")
    assert json.loads(body) == {"error": "the request body did not arrive within 1.5 s"}
    assert DEADLINE - 0.1 < took < DEADLINE + 3


@pytest.mark.slow
def test_a_connection_over_the_cap_is_answered_503_and_the_held_ones_and_later_ones_are_served(
    server: tuple[str, int],
) -> None:
    surface, port = server
    request = normal_request(surface)
    held = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(CAP)]
    try:
        for s in held:
            s.sendall(request[:4])  # each has begun a request
        took, reply = exchange(port, request)
        status, headers, body = answer(reply)
        held[0].sendall(request[4:])
        first = answer(read_all(held[0]))[0]
    finally:
        for s in held:
            s.close()
    assert (status, headers["retry-after"], headers["connection"]) == (503, "1", "close") and took < DEADLINE
    assert json.loads(body) == {
        "error": f"this server already holds its limit of {CAP} connections (--max-connections); try again in a moment"
    }
    assert first == 200  # a held connection is served
    assert status_soon(port, request) == 200  # and a new one, once they closed


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


@pytest.mark.slow
@pytest.mark.parametrize("surface", SURFACES)
def test_the_server_survives_a_burst_of_connections_past_its_open_file_limit(surface: str, tmp_path: Path) -> None:
    with started(surface, tmp_path, "--request-timeout-s", "1", preexec=_limit_open_files) as (port, proc, err):
        burst = []
        try:
            for _ in range(150):  # past the 64 files the process may open
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                burst.append(s)
                s.sendall(b"GET / HTTP/1.1\r\n")
        except OSError:  # the backlog is full: enough
            pass
        time.sleep(1.5)
        for s in burst:
            s.close()
        status = status_soon(port, normal_request(surface), within_s=20)
        alive = proc.poll() is None
    said = err.read_text()
    assert len(burst) > 64 and (status, alive) == (200, True), said
    assert "Traceback" not in said
    lines = [line for line in said.splitlines() if "out of file descriptors" in line]
    assert len(lines) == 1 and lines[0].startswith(f"rollbench {surface}: out of file descriptors (Too many open"), said
    assert lines[0].endswith("; the limit is 64, `ulimit -n`): new connections wait until some close")


def unread_client(port: int) -> socket.socket:
    """A connection whose client never reads: a 1 kB receive buffer, and small segments so that the server's send
    buffer stays small and fills at once."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.connect(("127.0.0.1", port))
    return s


def pipeline_until_cut(s: socket.socket, request: bytes) -> float | None:
    """Pipeline ``request`` on ``s`` until the server stops reading, read nothing: seconds from then until the
    server drops ``s`` (None: not within 30 s)."""
    s.setblocking(False)
    stall, pending = None, b""
    while stall is None or time.monotonic() - stall < 0.2:
        try:
            pending = pending or request * 50
            pending = pending[s.send(pending) :]  # whole requests: a cut one would be answered 400 and closed
            stall = None
        except BlockingIOError:
            stall = stall or time.monotonic()
            time.sleep(0.01)
    return dropped_after(s, stall)


@pytest.mark.slow
def test_clients_that_pipeline_requests_and_never_read_are_cut_off_and_their_slots_given_back(
    server: tuple[str, int],
) -> None:
    """``--max-connections`` clients that never read their answers lock everyone out (503) only until they have
    taken nothing for the deadline; then the server aborts them and answers again (hostile round 21, F2)."""
    surface, port = server
    clients = [unread_client(port) for _ in range(CAP)]
    try:
        during = answer(exchange(port, normal_request(surface))[1])[0]
        with ThreadPoolExecutor(CAP) as pool:
            cuts = list(
                pool.map(lambda s: pipeline_until_cut(s, b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"), clients)
            )
    finally:
        for s in clients:
            s.close()
    assert during == 503  # the cap is held by the clients that will not read
    # cut a deadline after the server stopped reading them (about when it stopped answering: its answers untaken)
    assert all(cut is not None and 0.5 * DEADLINE < cut < 1.25 * DEADLINE + 3 for cut in cuts), cuts
    assert status_soon(port, normal_request(surface), within_s=3) == 200


def _big_video(tmp_path: Path) -> tuple[Path, bytes]:
    """A recorded run whose video has 4 MiB more bytes: still being sent long after the deadline to a client with a
    4 kB receive buffer."""
    run = record_run(tmp_path / "runs" / "rand", "hostA", episodes=1)
    video = run / "videos/observation.images.top/chunk-000/file-000.mp4"
    with video.open("ab") as f:
        f.write(os.urandom(4 * 2**20))
    return video, video.read_bytes()


VIDEO_REQUEST = (b"GET /media/hostA/point/rand/0/top HTTP/1.1\r\nhost: 127.0.0.1\r\nrange: bytes=0-\r\n"
                 b"connection: close\r\n\r\n")  # fmt: skip


@pytest.mark.slow
def test_a_slow_video_download_that_keeps_reading_outlasts_the_deadline(tmp_path: Path) -> None:
    """A range request's answer is timed only by the client's taking of it: a client that reads 4 kB every third of
    the deadline for twice the deadline (never pausing a whole deadline) gets the whole video, then reads the rest."""
    _, data = _big_video(tmp_path)
    srv = ServerThread(
        [tmp_path / "runs"], tmp_path / "labels.json", ConnectionBounds(DEADLINE), cache_dir=tmp_path / "c"
    )
    srv.start()
    try:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(30)
            s.connect(("127.0.0.1", srv.port))
            s.sendall(VIDEO_REQUEST)
            reply, t0 = b"", time.monotonic()
            while time.monotonic() - t0 < 2 * DEADLINE:
                reply += s.recv(4096)
                time.sleep(DEADLINE / 3)
            reply += read_all(s)
    finally:
        srv.stop()
    status, headers, body = answer(reply)
    assert (status, headers["content-range"]) == (206, f"bytes 0-{len(data) - 1}/{len(data)}")
    assert body == data


@pytest.mark.slow
def test_a_video_download_whose_client_stops_reading_is_cut_at_the_deadline_and_others_are_served(
    tmp_path: Path,
) -> None:
    """The same download, never read: aborted between one and 1.25 deadlines after its answer stopped being taken,
    while another client is served meanwhile; the slot is free after."""
    _big_video(tmp_path)
    srv = ServerThread(
        [tmp_path / "runs"], tmp_path / "labels.json", ConnectionBounds(DEADLINE, 2), cache_dir=tmp_path / "c"
    )
    srv.start()
    try:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", srv.port))
            s.sendall(VIDEO_REQUEST)
            t0 = time.monotonic()
            meanwhile = answer(exchange(srv.port, normal_request("dashboard"))[1])[0]
            cut = dropped_after(s, t0)
        after = [answer(exchange(srv.port, normal_request("dashboard"))[1])[0] for _ in range(2)]
    finally:
        srv.stop()
    assert meanwhile == 200 and after == [200, 200]
    assert cut is not None and DEADLINE - 0.1 < cut < 1.25 * DEADLINE + 1.5, cut


@pytest.mark.slow
def test_an_mcp_event_stream_stays_open_past_the_request_deadline(tmp_path: Path) -> None:
    """MCP's standalone event stream (GET /mcp, text/event-stream) is an answer: open after twice the deadline."""
    with started("mcp", tmp_path, "--request-timeout-s", str(DEADLINE)) as (port, proc, _):
        status, headers, _ = answer(exchange(port, normal_request("mcp"))[1])
        session = headers["mcp-session-id"]
        with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
            s.sendall(f"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\nmcp-session-id: {session}"
                      "\r\nmcp-protocol-version: 2025-06-18\r\n\r\n".encode())  # fmt: skip
            head = s.recv(65536)
            time.sleep(2 * DEADLINE)
            s.settimeout(0.5)
            try:
                later = s.recv(65536)  # b"" only if the server closed it
            except TimeoutError:
                later = b"(still open, nothing sent)"
        ping = answer(exchange(port, normal_request("mcp"))[1])[0]
        alive = proc.poll() is None
    assert status == 200 and head.startswith(b"HTTP/1.1 200 ") and b"text/event-stream" in head
    assert later != b"" and (ping, alive) == (200, True)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["dashboard", "--root", "W", "--request-timeout-s", "0.01"],
         "--request-timeout-s must be between 0.1 and 86400 seconds, got 0.01"),
        (["dashboard", "--root", "W", "--max-connections", "0"], "--max-connections must be between 1 and 65536, got 0"),
        (["mcp", "--transport", "http", "--root", "W/mcp", "--request-timeout-s", "nan"],
         "--request-timeout-s must be between 0.1 and 86400 seconds, got nan"),
        (["mcp", "--transport", "http", "--root", "W/mcp", "--max-connections", "65537"],
         "--max-connections must be between 1 and 65536, got 65537"),
        (["serve-policy", "--policy", "zero", "--protocol", "http", "--max-connections", "-1"],
         "--max-connections must be between 1 and 65536, got -1"),
        (["serve-policy", "--policy", "zero", "--protocol", "http", "--max-connections", "0"],
         "--max-connections must be between 1 and 65536, got 0"),
    ],
)  # fmt: skip
def test_an_out_of_range_bound_is_refused_in_one_line_before_the_server_starts(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    from cli_in_process import invoke

    proc = invoke(*[a.replace("W", str(tmp_path), 1) if a.startswith("W") else a for a in args])
    assert (proc.returncode, proc.stdout + proc.stderr) == (2, f"error: {expected}\n")
    assert list(tmp_path.iterdir()) == []
