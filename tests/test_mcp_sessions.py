"""``rollbench mcp --transport http`` holds at most ``--max-sessions`` MCP sessions and closes one idle for
``--session-idle-s`` (:mod:`rollbench.mcp.sessions`): a client that opens sessions without end (each ``initialize``
POST opens one) no longer locks every other client out. Each test starts the real command on 127.0.0.1 and drives
it with httpx; which sessions are alive is seen only from the server's answers (200, or the SDK's 404
``Session not found``). Out-of-range bounds are refused in one line here; with ``--transport stdio`` the options
are refused as the other http-only ones are (tests/test_bad_input_table.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cli_in_process import invoke
from served_policy import free_port, wait_listening

VERSION = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
GONE = ("Session not found", "Not Found: Session has been terminated")  # the SDK's 404s (the latter: while it ends)


@contextlib.contextmanager
def mcp_http(root: Path, *extra: str) -> Iterator[tuple[str, Path]]:
    """``rollbench mcp --transport http`` with ``extra`` options on a free port: (its /mcp URL, its stderr file)."""
    port, err = free_port(), root.parent / "mcp.stderr"
    cmd = [sys.executable, "-m", "rollbench", "mcp", "--transport", "http", "--root", str(root), "--port", str(port)]
    env = {k: v for k, v in os.environ.items() if k != "ROLLBENCH_MCP_TOKEN"}
    with err.open("wb") as stderr:
        proc = subprocess.Popen([*cmd, *extra], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        wait_listening(proc, port, 60, lambda: f"the server did not start: {err.read_text()}")
        yield f"http://127.0.0.1:{port}/mcp", err
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def open_session(client: httpx.Client, url: str) -> dict[str, str]:
    """Initialize a session (and say so, as a client does): the headers that name it."""
    answer = client.post(url, json=INITIALIZE, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    session = {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    assert (
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session).status_code
        == 202
    )
    return session


def ping(client: httpx.Client, url: str, session: dict[str, str]) -> int:
    """The status of a ping in ``session`` (200, or 404 once the server no longer holds it)."""
    answer = client.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"}, headers=session)
    assert answer.status_code != 404 or answer.json()["error"]["message"] in GONE, answer.text
    return answer.status_code


@pytest.mark.slow
def test_after_ten_times_the_cap_of_initializes_a_fresh_client_initializes_and_lists_the_tools(tmp_path: Path) -> None:
    with mcp_http(tmp_path / "runs", "--max-sessions", "4") as (url, err), httpx.Client(timeout=30) as client:
        flood = [client.post(url, json=INITIALIZE, headers=HEADERS).status_code for _ in range(40)]
        session = open_session(client, url)
        tools = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
    assert flood == [200] * 40
    assert tools.status_code == 200 and '"name":"run_policy_rollout"' in tools.text
    assert "Traceback" not in err.read_text()


@pytest.mark.slow
def test_a_session_past_the_cap_evicts_the_least_recently_used_one_and_no_other(tmp_path: Path) -> None:
    with mcp_http(tmp_path / "runs", "--max-sessions", "4") as (url, _), httpx.Client(timeout=30) as client:
        a, b, c, d = (open_session(client, url) for _ in range(4))
        assert ping(client, url, a) == 200  # a is now used more recently than b
        e = open_session(client, url)  # the fifth: b, the least recently used, is evicted
        first = [ping(client, url, s) for s in (b, a, c, d, e)]  # the order they were last used now: a, c, d, e
        f = open_session(client, url)  # a is the least recently used now
        second = [ping(client, url, s) for s in (a, b, c, d, e, f)]
    assert first == [404, 200, 200, 200, 200]
    assert second == [404, 404, 200, 200, 200, 200]


@pytest.mark.slow
def test_a_session_idle_for_session_idle_s_is_closed_and_one_in_use_is_not(tmp_path: Path) -> None:
    idle_s = 2.0
    with mcp_http(tmp_path / "runs", "--session-idle-s", str(idle_s)) as (url, _), httpx.Client(timeout=30) as client:
        session = open_session(client, url)
        started, kept = time.monotonic(), []
        while time.monotonic() - started < 1.5 * idle_s:  # used every idle_s / 4: never idle for idle_s
            kept.append(ping(client, url, session))
            time.sleep(idle_s / 4)
        time.sleep(idle_s + 1)  # (a ping while waiting would be a use: it starts the idle time again)
        after = ping(client, url, session)
        fresh = ping(client, url, open_session(client, url))
    assert set(kept) == {200} and len(kept) >= 5
    assert (after, fresh) == (404, 200)


@pytest.mark.slow
def test_with_every_session_answering_a_request_a_new_one_gets_503_naming_the_option(tmp_path: Path) -> None:
    with mcp_http(tmp_path / "runs", "--max-sessions", "2") as (url, _), httpx.Client(timeout=30) as client:
        a, b = open_session(client, url), open_session(client, url)
        with contextlib.ExitStack() as streams:
            for s in (a, b):  # an open event stream is a request in flight: the session is busy
                stream = streams.enter_context(client.stream("GET", url, headers={**s, "accept": "text/event-stream"}))
                assert stream.status_code == 200
            refused = client.post(url, json=INITIALIZE, headers=HEADERS)
        deadline = time.monotonic() + 15  # the streams closed: the server sees them go, and a and b are idle
        while (later := client.post(url, json=INITIALIZE, headers=HEADERS)).status_code == 503:
            assert time.monotonic() < deadline, later.text
            time.sleep(0.2)
        alive = sorted(ping(client, url, s) for s in (a, b))
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json() == {
        "error": "this server already holds its limit of 2 MCP sessions (--max-sessions), each with a request in "
        "flight; try again in a moment"
    }
    assert later.status_code == 200 and alive == [200, 404]  # one of a and b made room


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--max-sessions", "0", "--max-sessions must be between 1 and 1024, got 0"),
        ("--max-sessions", "-1", "--max-sessions must be between 1 and 1024, got -1"),
        ("--max-sessions", "1025", "--max-sessions must be between 1 and 1024, got 1025"),
        ("--max-sessions", "10000000000000000000000", "--max-sessions must be between 1 and 1024, got 10000000000000000000000"),
        ("--max-sessions", "nan", "--max-sessions 'nan': must be a whole number"),
        ("--session-idle-s", "0", "--session-idle-s must be between 0.1 and 86400 seconds, got 0"),
        ("--session-idle-s", "-1", "--session-idle-s must be between 0.1 and 86400 seconds, got -1"),
        ("--session-idle-s", "nan", "--session-idle-s must be between 0.1 and 86400 seconds, got nan"),
        ("--session-idle-s", "inf", "--session-idle-s must be between 0.1 and 86400 seconds, got inf"),
        ("--session-idle-s", "1e9", "--session-idle-s must be between 0.1 and 86400 seconds, got 1e+09"),
    ],
)  # fmt: skip
def test_an_out_of_range_session_bound_is_refused_in_one_line_before_anything_is_created(
    tmp_path: Path, option: str, value: str, expected: str
) -> None:
    proc = invoke("mcp", "--transport", "http", "--root", tmp_path / "mcp", option, value)
    assert (proc.returncode, proc.stdout + proc.stderr) == (2, f"error: {expected}\n")
    assert list(tmp_path.iterdir()) == []
