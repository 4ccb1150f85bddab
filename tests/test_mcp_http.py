"""``rollbench mcp --transport http``: a non-loopback host needs a token; the token and the SDK's Host/Origin checks
hold on a real server subprocess (127.0.0.1 only: the non-loopback cases are refused before anything binds)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from served_policy import wait_listening

TOKEN = "s3cret-token-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


def mcp(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rollbench", "mcp", "--transport", "http", "--root", str(root), *args]
    env = {k: v for k, v in os.environ.items() if k != "ROLLBENCH_MCP_TOKEN"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
@pytest.mark.slow
def test_a_non_loopback_host_without_a_token_refuses_to_start_and_creates_nothing(host: str, tmp_path: Path) -> None:
    proc = mcp(tmp_path / "root", "--host", host)
    assert proc.returncode == 2
    assert proc.stderr.strip().replace("\n", " ") == (
        f"error: --host {host} is not a loopback address: anyone who can reach it could run policies and write "
        "under --root. Give --token (or ROLLBENCH_MCP_TOKEN), a secret of at least 16 characters that clients "
        "send as 'Authorization: Bearer TOKEN', or bind 127.0.0.1"
    )
    assert not (tmp_path / "root").exists()


@pytest.mark.slow
def test_a_wildcard_host_needs_allowed_names_and_a_token_needs_16_characters(tmp_path: Path) -> None:
    proc = mcp(tmp_path / "root", "--host", "0.0.0.0", "--token", TOKEN)
    assert proc.returncode == 2 and "name the host names clients use to reach this server with --allow-host" in (
        proc.stderr.replace("\n", " ")
    )
    proc = mcp(tmp_path / "root", "--token", "short")
    assert proc.returncode == 2 and "--token must be at least 16 characters long" in proc.stderr
    assert not (tmp_path / "root").exists()


@pytest.mark.slow
def test_with_a_token_a_request_without_it_gets_401_and_an_unknown_host_name_421(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "rollbench", "mcp", "--transport", "http", "--root", str(tmp_path)]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--token", TOKEN], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {TOKEN}"}
    try:
        wait_listening(proc, port, 60, "the http server did not start")
        anonymous = httpx.post(url, json=INITIALIZE, headers={"accept": headers["accept"]})
        wrong = httpx.post(url, json=INITIALIZE, headers={**headers, "authorization": f"Bearer {TOKEN}x"})
        rebound = httpx.post(url, json=INITIALIZE, headers={**headers, "host": "evil.example"})
        foreign = httpx.post(url, json=INITIALIZE, headers={**headers, "origin": "http://evil.example"})
        ok = httpx.post(url, json=INITIALIZE, headers=headers)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert anonymous.json() == {"error": "unauthorized: send the server's token as 'Authorization: Bearer TOKEN'"}
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert (rebound.status_code, foreign.status_code) == (421, 403)  # the SDK's DNS-rebinding checks are on
    assert ok.status_code == 200 and "rollbench" in ok.text


@pytest.mark.slow
def test_a_body_the_server_cannot_read_is_answered_with_a_parse_error_and_the_session_goes_on(tmp_path: Path) -> None:
    """Hostile round 12, F7 over HTTP: each POST gets its own answer, so no request waits; the SDK's own JSON reader
    (strict about lone surrogates, UTF-8 and depth) answers 400 with JSON-RPC -32700, id null (JSON-RPC 2.0 §5.1)."""
    rollout = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_policy_rollout","arguments":'
    bad = {
        "lone_surrogate": rollout + b'{"policy":"zero","env":"scripted/reach","n_episodes":1,"max_steps":3,'
        b'"instruction":"\\ud800"}}}',
        "truncated": b'{"jsonrpc":"2.0","id":6,',
        "not_utf8": b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":"\xff"}}',
        "deep": b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"x":' + b"[" * 10**5 + b"]" * 10**5 + b"}}",
    }
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "rollbench", "mcp", "--transport", "http", "--root", str(tmp_path)]
    proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    try:
        wait_listening(proc, port, 60, "the http server did not start")
        init = httpx.post(url, json=INITIALIZE, headers=headers, timeout=60)
        session = {**headers, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        answers = {name: httpx.post(url, content=body, headers=session, timeout=60) for name, body in bad.items()}
        good = httpx.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=session, timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for name, answer in answers.items():
        assert answer.status_code == 400, name
        body = answer.json()
        assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", None, -32700), name
    assert good.status_code == 200 and '"id":9,"result":{}' in good.text
