"""``rollbench serve-policy`` under hostile and heavy traffic: real server subprocesses on 127.0.0.1, raw peers.

A bad frame or body must get an error reply to that peer only (the server never crashes), sessions never share a
policy instance, and oversized or slow requests are refused with bounded memory. The peers are real websocket and
HTTP connections (websockets, httpx, raw sockets); fuzz cases come from tests/hostile_peers.py (seeded, bounded).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from hostile_peers import http_bodies, ws_cases
from rollbench.api import evaluate
from rollbench.wire.decode import DEFAULT_MAX_REQUEST_BYTES, unpack_msgpack
from served_policy import dropped_after, served

OBJECT_SEED = {b"__ndarray__": True, b"data": b"\x01" * 8, b"dtype": "|O", b"shape": [1]}
STATE = np.array([0.1, 0.1, 0.5, 0.1], np.float32)  # a scripted/reach state
REACH_ACT = {"observation/state": STATE, "prompt": "move the point to the goal"}


def exchange(url: str, frames: list[Any], timeout: float = 10) -> tuple[list[Any], tuple[int, str] | None]:
    """Send ``frames`` on a fresh connection, one reply each until the server closes: (replies, (code, reason))."""
    from openpi_client import msgpack_numpy

    replies: list[Any] = []
    with connect(url, max_size=None, compression=None, open_timeout=timeout) as ws:
        unpack_msgpack(ws.recv(timeout=timeout))  # metadata
        try:
            for frame in frames:
                ws.send(frame if isinstance(frame, bytes | str) else msgpack_numpy.packb(frame))
                replies.append(ws.recv(timeout=timeout))
            if isinstance(replies[-1], str):  # an error text: the server closes next
                ws.recv(timeout=timeout)
            ws.close()
        except ConnectionClosed as exc:
            return replies, (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd else (-1, "no close frame")
    return replies, None


def assert_still_serves(url: str, tmp: Path) -> None:
    result = evaluate(env="scripted/reach", policy=url, episodes=1, out=tmp / f"after-{time.monotonic_ns()}")
    assert result.status == "OK", result.reasons


def vm_hwm_kb(pid: int) -> int:
    """Peak resident memory of a process (kB), from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


# ----------------------------------------------------------------------------------------- safe decoding


def test_an_object_dtype_seed_gets_an_error_reply_and_the_ws_server_keeps_serving(tmp_path: Path) -> None:
    """The frame that made numpy read 8 wire bytes as an object pointer and segfault the server (exit 139)."""
    with served(tmp_path, "scripted-expert", "ws") as (url, _, proc):
        replies, closed = exchange(url, [{"reset": {"task": "scripted/reach", "seed": OBJECT_SEED}}])
        assert replies == [
            "ProtocolError: unsupported array dtype '|O': only bool, int8-64, uint8-64 and float16-64 arrays are "
            "accepted"
        ]
        assert closed is not None and closed[0] == 1008 and closed[1] == replies[0]
        replies, _ = exchange(
            url, [{"reset": {"task": "scripted/reach", "seed": {"__ndarray__": True, "dtype": "|O"}}}]
        )
        assert replies == ["ProtocolError: a reset needs a task name (string) and an integer seed, got str and dict"]
        assert proc.poll() is None
        assert_still_serves(url, tmp_path)


@pytest.mark.slow
def test_fuzzed_ws_frames_never_crash_the_server_and_each_gets_a_reply_or_an_error_text(tmp_path: Path) -> None:
    cases = list(ws_cases(seed=0))
    assert len(cases) > 250
    with served(tmp_path, "scripted-expert", "ws") as (url, _, proc):
        for label, frames in cases:
            replies, closed = exchange(url, frames)
            assert proc.poll() is None, f"the server died on {label}"
            last = replies[-1] if len(replies) == len(frames) else None
            if isinstance(last, bytes):  # served: a valid reply
                reply = unpack_msgpack(last)
                assert reply.get("reset") is True or np.asarray(reply["actions"]).shape == (1, 2), label
            else:  # refused: the error text first, then a close whose reason says it too
                assert isinstance(last, str) and last, (label, replies, closed)
                assert closed is not None and closed[0] in (1008, 1011) and closed[1], (label, closed)
        assert_still_serves(url, tmp_path)


@pytest.mark.slow
def test_fuzzed_http_bodies_never_crash_the_server_and_errors_have_one_shape(tmp_path: Path) -> None:
    cases = list(http_bodies(seed=0))
    assert len(cases) > 100
    with served(tmp_path, "scripted-expert", "http") as (url, _, proc), httpx.Client(timeout=10) as client:
        reset = {"session": "fuzz", "reset": {"task": "scripted/reach", "seed": 0}}
        assert client.post(url, json=reset).json() == {"reset": True}
        statuses = set()
        for label, body in cases:
            r = client.post(url, content=body, headers={"content-type": "application/json"})
            assert proc.poll() is None, f"the server died on {label}"
            statuses.add(r.status_code)
            if r.status_code == 200:
                assert "actions" in r.json(), label
            else:
                assert r.status_code in (400, 500), (label, r.status_code, r.text)
                assert set(r.json()) == {"error"} and r.json()["error"], (label, r.text)
        assert {200, 400} <= statuses  # both served and refused bodies were among the cases
        assert_still_serves(url, tmp_path)


def test_an_undecodable_frame_gets_the_error_text_before_a_close_with_a_reason(tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", "ws") as (url, _, _):
        replies, closed = exchange(url, [b"\xc1"])
        assert replies == ["ProtocolError: not a msgpack message (FormatError)"]
        assert closed == (1008, replies[0])
        replies, closed = exchange(url, ["a text frame"])
        assert replies == ["ProtocolError: expected a binary msgpack frame, got a str frame"]
        assert closed == (1008, replies[0])


@pytest.mark.parametrize("protocol", ["ws", "http"])
@pytest.mark.slow
def test_nan_in_an_observation_gets_an_error_reply_not_nan_actions(protocol: str, tmp_path: Path) -> None:
    from rollbench.core.contracts import EpisodeError, Observation
    from rollbench.core.registry import make_policy, resolve_tasks

    task = resolve_tasks("scripted/reach")[0]
    with served(tmp_path, "scripted-expert", protocol) as (url, _, _):
        client = make_policy(url, {"retries": 0})
        try:
            client.reset(task, 0)
            bad = Observation(state=np.array([0.1, np.nan, 0.5, np.inf], np.float32))
            with pytest.raises(EpisodeError) as err:
                client.act(bad, task.instruction)
        finally:
            client.close()
    # refused with an error reply (named by its status and size only: a server's text is never quoted), no actions
    why = "HTTP 400, a reply of" if protocol == "http" else "an error text frame, a reply of"
    assert err.value.fault == "policy" and why in str(err.value) and "not shown" in str(err.value)


@pytest.mark.slow
def test_limits_are_recorded_in_the_metadata_and_configurable(tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", "ws") as (url, _, _), connect(url) as ws:
        assert unpack_msgpack(ws.recv(timeout=10))["limits"] == {
            "max_request_bytes": DEFAULT_MAX_REQUEST_BYTES,
            "max_sessions": 64,
            "session_idle_s": 60.0,
            "request_timeout_s": 30.0,
        }
    assert DEFAULT_MAX_REQUEST_BYTES == 16 * 2**20
    extra = ("--max-request-mb", "2", "--max-sessions", "3", "--session-idle-s", "9", "--request-timeout-s", "4")
    with served(tmp_path, "scripted-expert", "http", *extra) as (url, _, _):
        limits = httpx.get(url).json()["metadata"]["limits"]
    assert limits == {
        "max_request_bytes": 2 * 2**20,
        "max_sessions": 3,
        "session_idle_s": 9.0,
        "request_timeout_s": 4.0,
    }


# ----------------------------------------------------------------------------------------- sessions


@pytest.mark.slow
def test_an_evicted_or_unknown_http_session_gets_410_never_a_reset_to_env(tmp_path: Path) -> None:
    extra = ("--env", "scripted/reach", "--max-sessions", "2", "--session-idle-s", "0.3")
    act = {"instruction": "x", "state": {"dtype": "float32", "shape": [4], "data": STATE.tolist()}}
    with served(tmp_path, "scripted-expert", "http", *extra) as (url, log, _), httpx.Client(timeout=10) as c:
        r = c.post(url, json={"session": "never-reset", **act})
        assert r.status_code == 410
        assert r.json()["error"].startswith("SessionGone: unknown session 'never-reset': a session is started by")
        # requests without a session id share one session, reset to --env (plain clients), never evicted
        assert c.post(url, json=act).json()["actions"]["shape"] == [1, 2]
        assert c.post(url, json={"session": "A", "reset": {"task": "scripted/reach", "seed": 0}}).status_code == 200
        time.sleep(0.5)  # A is now idle for longer than --session-idle-s
        assert c.post(url, json={"session": "B", "reset": {"task": "scripted/reach", "seed": 1}}).status_code == 200
        r = c.post(url, json={"session": "A", **act})  # B needed room: A, idle, was evicted
        assert r.status_code == 410
        assert r.json() == {
            "error": "SessionGone: session 'A' expired: idle more than 0.3 s, it was evicted to make room for another "
            "client; its episode cannot continue"
        }
        d = c.post(url, json={"session": "C", "reset": {"task": "scripted/reach", "seed": 2}})
        assert d.status_code == 503  # B is not idle long enough to be evicted, the shared session never is
        assert d.json()["error"].startswith("SessionRefused: server busy: 2 sessions are open")
        assert d.headers["retry-after"] == "5"
        assert c.post(url, json=act).status_code == 200
        # a reset starts an evicted id afresh once there is room again
        time.sleep(0.5)
        assert c.post(url, json={"session": "A", "reset": {"task": "scripted/reach", "seed": 3}}).status_code == 200
        assert c.post(url, json={"session": "A", **act}).status_code == 200
    resets = [(r["session"], r["task"]) for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "reset"]
    assert [s for s, _ in resets] == ["default", "id:A", "id:B", "id:A"]  # never-reset was never reset


# ----------------------------------------------------------------------------------------- size and time limits


def _latencies_while(url: str, attack: Any) -> tuple[list[float], Any]:
    """Run ``attack()`` while a second (rollbench) client keeps calling; return its call latencies and the result."""
    from rollbench.core.contracts import Observation
    from rollbench.core.registry import make_policy, resolve_tasks

    task = resolve_tasks("scripted/reach")[0]
    client = make_policy(url, {})
    client.reset(task, 0)
    obs = Observation(state=STATE)
    times: list[float] = []
    stop = threading.Event()

    def calls() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            client.act(obs, task.instruction)
            times.append(time.perf_counter() - t0)
            time.sleep(0.01)

    thread = threading.Thread(target=calls)
    thread.start()
    try:
        time.sleep(0.3)
        result = attack()
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(timeout=30)
        client.close()
    return times, result


@pytest.mark.slow
def test_an_oversized_ws_frame_is_refused_unread_while_another_client_keeps_its_latency(tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", "ws", "--max-request-mb", "1") as (url, _, proc):
        exchange(url, [REACH_ACT])  # warm: imports, first policy instance
        before = vm_hwm_kb(proc.pid)

        def attack() -> tuple[int, str] | None:
            replies, closed = exchange(url, [b"\x00" * (50 * 2**20)])
            assert replies == []
            return closed

        times, closed = _latencies_while(url, attack)
        grown_mb = (vm_hwm_kb(proc.pid) - before) / 1024
        assert proc.poll() is None
    assert closed == (1009, f"frame with {50 * 2**20} bytes exceeds limit of {2**20} bytes")
    assert grown_mb < 20, f"peak memory grew by {grown_mb:.0f} MB for a refused 50 MB frame"
    assert len(times) > 10 and max(times) < 2.0, f"the other client's calls took up to {max(times):.2f} s"


def _post_raw(port: int, head: bytes, body_chunks: Any) -> bytes:
    """Send a request over a raw socket (as a hostile peer would: no waiting for the server); return the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        try:
            for chunk in body_chunks:
                s.sendall(chunk)
        except OSError:
            pass  # the server answered and closed mid-body
        reply = b""
        try:
            while chunk := s.recv(65536):
                reply += chunk
        except OSError:
            pass
    return reply


def test_an_oversized_http_body_is_refused_with_413_while_another_client_keeps_its_latency(tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", "http", "--max-request-mb", "1") as (url, _, proc):
        port = int(url.split(":")[2].split("/")[0])
        httpx.get(url)
        before = vm_hwm_kb(proc.pid)
        declared = (
            f"POST /act HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {100 * 2**20}"
        )
        chunked = (
            "POST /act HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked"
        )
        mb = b"[" + b"1," * (2**19 - 1) + b"1"

        def chunks() -> Any:
            for _ in range(100):
                yield f"{len(mb):x}\r\n".encode() + mb + b"\r\n"

        def attack() -> tuple[bytes, bytes]:
            first = _post_raw(port, (declared + "\r\n\r\n").encode(), (mb for _ in range(100)))
            second = _post_raw(port, (chunked + "\r\n\r\n").encode(), chunks())
            return first, second

        times, (first, second) = _latencies_while(url, attack)
        grown_mb = (vm_hwm_kb(proc.pid) - before) / 1024
        assert proc.poll() is None
    limit = "the request body exceeds this server's limit of 1048576 bytes (serve-policy --max-request-mb)"
    for reply in (first, second):
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), reply[:300]
        assert b"connection: close" in head.lower()
        assert json.loads(body) == {"error": limit}
    assert grown_mb < 20, f"peak memory grew by {grown_mb:.0f} MB for two refused 100 MB bodies"
    assert len(times) > 10 and max(times) < 2.0, f"the other client's calls took up to {max(times):.2f} s"


@pytest.mark.slow
def test_silent_half_sent_and_slow_http_requests_are_closed_after_the_request_timeout(tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", "http", "--request-timeout-s", "1") as (url, _, _):
        port = int(url.split(":")[2].split("/")[0])

        def wait_closed(sent: bytes) -> tuple[float, bytes]:
            with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
                t0 = time.monotonic()
                s.sendall(sent)
                reply = b""
                while chunk := s.recv(65536):
                    reply += chunk
                return time.monotonic() - t0, reply

        silent = wait_closed(b"")
        half_headers = wait_closed(b"POST /act HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-le")
        slow_body = wait_closed(
            b'POST /act HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"sess'
        )
    assert silent[1] == b"" and 0.9 < silent[0] < 10
    assert half_headers[1] == b"" and 0.9 < half_headers[0] < 10
    head, _, body = slow_body[1].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and 0.9 < slow_body[0] < 10
    assert json.loads(body) == {"error": "the request body did not arrive within 1 s"}


# ----------------------------------------------------------------------------------------- clients that stop reading


def _unread_ws(port: int, frame: bytes) -> tuple[socket.socket, float]:
    """A websocket client with a 1 kB receive buffer (and small segments, so the server's send buffer stays small)
    that handshakes, then sends ``frame`` (a masked frame) until the server stops reading, and never reads again:
    (its socket, the time its sends stalled)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
              "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n".encode())  # fmt: skip
    s.settimeout(10)
    assert s.recv(12) == b"HTTP/1.1 101"
    s.setblocking(False)
    stall, pending = None, b""
    while stall is None or time.monotonic() - stall < 0.3:
        try:
            pending = pending or frame * 32
            pending = pending[s.send(pending) :]  # whole frames: a cut one would be a protocol error, closed at once
            stall = None
        except BlockingIOError:
            stall = stall or time.monotonic()
            time.sleep(0.01)
    return s, stall


def _two_clients(url: str) -> list[tuple[int, str] | None]:
    """Two websocket clients connected at once: for each, None if it is served (its first message is the
    metadata), else the close (code, reason) it gets after the error text."""
    out: list[tuple[int, str] | None] = []
    with contextlib.ExitStack() as stack:
        for _ in range(2):
            ws = stack.enter_context(connect(url, compression=None, open_timeout=10))
            if isinstance(ws.recv(timeout=10), bytes):
                out.append(None)
                continue
            try:
                ws.recv(timeout=10)
                out.append((0, "no close"))
            except ConnectionClosed as exc:
                out.append((exc.rcvd.code, exc.rcvd.reason) if exc.rcvd else (-1, "no close frame"))
    return out


def _masked(opcode: int, payload: bytes) -> bytes:
    """A client's websocket frame (FIN, ``opcode``) with a zero mask, so the payload is sent as is."""
    n = len(payload)
    size = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
    return bytes([0x80 | opcode]) + size + b"\0\0\0\0" + payload


@pytest.mark.slow
@pytest.mark.parametrize("sent", ["act requests", "pings"])
def test_a_ws_client_that_never_reads_its_replies_is_closed_at_the_deadline_and_its_session_freed(
    sent: str, tmp_path: Path
) -> None:
    """Hostile round 21, F1: a client that sends act requests (or pings, answered by pongs) and never reads holds
    one of the two sessions until a reply has waited the deadline (meanwhile one client is served, a second refused
    1013); then the server resets the connection, says so in one line on stderr, and two clients are served."""
    from openpi_client import msgpack_numpy

    deadline = 3.0  # room for the meanwhile check (its second client waits 1 s for a session) before the cut
    act = msgpack_numpy.packb(REACH_ACT)
    frame = _masked(2, act) if sent == "act requests" else _masked(9, b"p" * 125)
    extra = ("--env", "scripted/reach", "--max-sessions", "2", "--request-timeout-s", str(deadline))
    with served(tmp_path, "scripted-expert", "ws", *extra) as (url, _, proc):
        s, stall = _unread_ws(int(url.rsplit(":", 1)[1]), frame)
        with s:
            client = f"127.0.0.1:{s.getsockname()[1]}"
            meanwhile = _two_clients(url)
            cut = dropped_after(s, stall)
        after = _two_clients(url)
        replies, closed = exchange(url, [REACH_ACT])
        assert proc.poll() is None
    said = proc.stderr.read() if proc.stderr else ""
    busy = "SessionRefused: server busy: 2 sessions are open (serve-policy --max-sessions); try again later"
    assert meanwhile == [None, (1013, busy)] and after == [None, None]
    # cut a deadline after its reply's send began, about when the server stopped reading it
    assert cut is not None and 0.5 * deadline < cut < deadline + 3, cut
    assert closed is None and unpack_msgpack(replies[0])["actions"].shape == (1, 2)
    lines = [line for line in said.splitlines() if line.strip()]
    assert lines == [
        f"rollbench serve-policy: closed the websocket connection of {client}: it took no reply within 3 s "
        "(--request-timeout-s); its session is released"
    ], said


# ----------------------------------------------------------------------------------------- no cross-talk


DRAWER, OTHER = "metaworld/drawer-open-v3", "metaworld/reach-v3"


@pytest.fixture(scope="module")
def drawer_observations() -> list[Any]:
    """Three real drawer-open-v3 observations (seed 0, expert-driven) and the in-process expert's actions on them."""
    pytest.importorskip("metaworld")
    from rollbench.core.registry import EnvOptions, make_env, make_policy, resolve_tasks

    task = resolve_tasks(DRAWER)[0]
    env, expert = make_env(task, EnvOptions()), make_policy("metaworld-expert")
    expert.reset(task, 0)
    obs, out = env.reset(0), []
    for _ in range(3):
        action = np.asarray(expert.act(obs, task.instruction), np.float32).reshape(-1, task.action_dim)
        out.append((obs, action))
        obs = env.step(action[0]).observation
    env.close()
    return out


def _session_a(url: str) -> Any:
    from rollbench.core.registry import make_policy, resolve_tasks

    client = make_policy(url, {"retries": 0})
    client.reset(resolve_tasks(DRAWER)[0], 0)
    return client


@pytest.mark.sim
def test_66_ws_connections_never_hand_session_a_another_tasks_actions(
    drawer_observations: list[Any], tmp_path: Path
) -> None:
    """Session A (drawer-open) stays whole while 65 more connections arrive: the first 63 fill the limit of 64 and
    reset their own instances to reach-v3, the last 2 are refused with a text frame and close 1013."""
    from openpi_client import msgpack_numpy

    instruction = "open the drawer"
    with served(tmp_path, "metaworld-expert", "ws") as (url, log, proc):
        a = _session_a(url)
        others, refused = [], []
        try:
            np.testing.assert_array_equal(a.act(drawer_observations[0][0], instruction), drawer_observations[0][1])
            for k in range(65):
                ws = connect(url, max_size=None, compression=None, legacy=True)
                others.append(ws)
                first = ws.recv(timeout=10)
                if isinstance(first, str):
                    try:
                        ws.recv(timeout=10)
                    except ConnectionClosed as exc:
                        refused.append((k, first, exc.rcvd.code if exc.rcvd else None))
                    continue
                ws.send(msgpack_numpy.packb({"reset": {"task": OTHER, "seed": k}}))
                assert unpack_msgpack(ws.recv(timeout=10)) == {"reset": True}
            for obs, expected in drawer_observations[1:]:  # A still drives its own drawer-open instance
                np.testing.assert_array_equal(a.act(obs, instruction), expected)
        finally:
            a.close()
            for ws in others:
                ws.close()
        assert proc.poll() is None
    message = "SessionRefused: server busy: 64 sessions are open (serve-policy --max-sessions); try again later"
    assert refused == [(63, message, 1013), (64, message, 1013)]
    acts = [r for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "act"]
    assert len(acts) == 3 and {r["task"] for r in acts} == {DRAWER}


@pytest.mark.sim
def test_a_65th_http_session_id_is_refused_and_session_a_keeps_its_drawer_open_actions(
    drawer_observations: list[Any], tmp_path: Path
) -> None:
    instruction = "open the drawer"
    with served(tmp_path, "metaworld-expert", "http") as (url, log, _), httpx.Client(timeout=10) as c:
        a = _session_a(url)
        try:
            np.testing.assert_array_equal(a.act(drawer_observations[0][0], instruction), drawer_observations[0][1])
            statuses = [c.post(url, json={"session": f"s{k}", "reset": {"task": OTHER, "seed": k}}) for k in range(64)]
            for obs, expected in drawer_observations[1:]:
                np.testing.assert_array_equal(a.act(obs, instruction), expected)
        finally:
            a.close()
    assert [r.status_code for r in statuses] == [200] * 63 + [503]
    assert statuses[-1].json() == {
        "error": "SessionRefused: server busy: 64 sessions are open (serve-policy --max-sessions); try again later"
    }
    acts = [r for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "act"]
    assert len(acts) == 3 and {r["task"] for r in acts} == {DRAWER}
