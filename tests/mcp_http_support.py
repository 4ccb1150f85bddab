"""Test helper: the real ``rollbench mcp --transport http`` on a free 127.0.0.1 port, and a bare httpx client of it
(initialize, ping, tool calls answered as event streams). Which sessions and calls are alive is seen only from the
server's answers."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from mcp_support import server_env
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
def mcp_http(root: Path, *extra: str) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """``rollbench mcp --transport http`` with ``extra`` options on a free port: (its /mcp URL, its stderr file, the
    process). Stopped (SIGTERM, then SIGKILL after 30 s) on the way out unless it has ended."""
    port, err = free_port(), root.parent / "mcp.stderr"
    cmd = [sys.executable, "-m", "rollbench", "mcp", "--transport", "http", "--root", str(root), "--port", str(port)]
    env = {k: v for k, v in server_env().items() if k != "ROLLBENCH_MCP_TOKEN"}
    with err.open("wb") as stderr:
        proc = subprocess.Popen([*cmd, *extra], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        wait_listening(proc, port, 60, lambda: f"the server did not start: {err.read_text()}")
        yield f"http://127.0.0.1:{port}/mcp", err, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
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


def tool_request(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def answer_of(response: httpx.Response, request_id: int) -> dict[str, Any]:
    """The JSON-RPC answer to ``request_id`` in the event stream ``response`` (read until it comes)."""
    for line in response.iter_lines():
        if line.startswith("data: ") and (message := json.loads(line[6:])).get("id") == request_id:
            return dict(message)
    raise AssertionError(f"the stream ended with no answer to request {request_id}")


def call(client: httpx.Client, url: str, session: dict[str, str], name: str, arguments: dict[str, Any]) -> Any:
    """``name(arguments)``'s JSON-RPC answer (a dict with ``result`` or ``error``)."""
    with client.stream("POST", url, json=tool_request(11, name, arguments), headers=session) as response:
        assert response.status_code == 200, response.read()
        return answer_of(response, 11)


def tool_text(answer: dict[str, Any]) -> str:
    """The text of a tool result (``isError`` or not)."""
    return " ".join(c.get("text", "") for c in answer["result"]["content"])


def poll(what: Callable[[], Any], timeout: float, describe: str) -> Any:
    """``what()``'s first truthy value, asked every 0.1 s; AssertionError naming ``describe`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := what()):
        assert time.monotonic() < deadline, f"{describe}: not within {timeout} s"
        time.sleep(0.1)
    return value
