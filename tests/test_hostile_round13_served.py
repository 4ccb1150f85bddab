"""Hostile round 13, what a network peer sends: real servers on loopback.

F7: serve-policy takes a reset's instruction within the same 4,096 characters as an act's (one check), over http
(400 JSON) and websocket (an error text); nothing of a refused instruction is logged. F11: a policy server
advertising a chunk_size/replan_every that is not an int within rollbench's bounds is refused at connection with
exit 2, naming the URL and the field. F13: ``mcp --transport http`` answers ``Host: LOCALHOST:PORT`` (host names are
case-insensitive, RFC 9110 4.2.3) as it answers ``localhost``; other names still get the guard's 421.
"""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from rollbench.core.contracts import ConfigError
from rollbench.wire.guard import lower_case_names
from served_policy import free_port, served, wait_listening

TOO_LONG = "the instruction is 4,097 characters; at most 4,096 are taken"


@pytest.mark.slow
def test_serve_policy_refuses_a_reset_instruction_longer_than_an_act_s_over_http_and_logs_none_of_it(
    tmp_path: Path,
) -> None:
    def reset(url: str, instruction: Any) -> httpx.Response:
        body = {"session": "s", "reset": {"task": "scripted/reach", "seed": 0, "instruction": instruction}}
        return httpx.post(url, json=body, timeout=60)

    with served(tmp_path, "zero", "http") as (url, log, _):
        longest, longer, number = reset(url, "x" * 4096), reset(url, "y" * 4097), reset(url, 5)
    assert longest.status_code == 200, longest.text
    assert (longer.status_code, number.status_code) == (400, 400)
    assert TOO_LONG in longer.json()["error"]
    assert 'a reset\'s "instruction" must be a string, got int' in number.json()["error"]
    assert "y" * 100 not in log.read_text() and "x" * 4096 in log.read_text()


@pytest.mark.slow
def test_serve_policy_refuses_a_reset_instruction_longer_than_an_act_s_over_websocket(tmp_path: Path) -> None:
    from openpi_client import msgpack_numpy
    from websockets.sync.client import connect

    reset = {"reset": {"task": "scripted/reach", "seed": 0, "instruction": "y" * 4097}}
    with served(tmp_path, "zero", "ws") as (url, log, _), connect(url, max_size=None, open_timeout=60) as ws:
        ws.recv(timeout=60)  # the server's metadata
        ws.send(msgpack_numpy.packb(reset))
        reply = ws.recv(timeout=60)
    assert reply == f"ProtocolError: {TOO_LONG}"
    assert "y" * 100 not in log.read_text()


@contextmanager
def metadata_server(metadata: dict[str, Any]) -> Iterator[str]:
    """A plain /act server on loopback whose GET answers ready with ``metadata``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps({"ready": True, "metadata": {"needs_images": False, **metadata}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = socketserver.TCPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/act"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ({"replan_every": 10**29}, "replan_every is an integer of 30 digits; replan_every must be an integer from 1 to 1,000,000"),
        ({"chunk_size": 1001}, "chunk_size is 1001; chunk_size must be an integer from 1 to 1,000"),
        ({"replan_every": 0}, "replan_every is 0; replan_every must be an integer from 1 to 1,000,000"),
        ({"replan_steps": -3}, "replan_steps is -3; replan_steps must be an integer from 1 to 1,000,000"),
        ({"action_horizon": 1.5}, "action_horizon is 1.5; action_horizon must be an integer from 1 to 1,000"),
        ({"replan_every": "3"}, "replan_every is a string of 1 character; replan_every must be an integer from 1 to 1,000,000"),
        ({"chunk_size": True}, "chunk_size is true; chunk_size must be an integer from 1 to 1,000"),
    ],
    ids=["huge", "chunk-1001", "zero", "negative", "float", "string", "bool"],
)  # fmt: skip
def test_a_server_advertising_an_out_of_range_or_mistyped_chunk_field_is_refused_at_connection(
    metadata: dict[str, Any], why: str
) -> None:
    from rollbench.policies.remote.http import HttpPolicy

    with metadata_server(metadata) as url, pytest.raises(ConfigError) as caught:
        HttpPolicy(url, {})
    assert str(caught.value) == f"the policy server {url} advertises metadata whose {why}"


def test_a_server_advertising_fields_in_range_is_taken_at_its_word() -> None:
    from rollbench.policies.remote.http import HttpPolicy

    with metadata_server({"replan_every": 1_000_000, "chunk_size": 1000, "replan_steps": None}) as url:
        info = HttpPolicy(url, {}).info
    assert (info.replan_every, info.chunk_size, info.chunk_size_known) == (1_000_000, 1000, True)


@pytest.mark.slow
def test_eval_against_a_server_advertising_replan_every_10_to_29_exits_2_naming_url_and_field(tmp_path: Path) -> None:
    from conftest import run_cli

    with metadata_server({"replan_every": 10**29}) as url:
        proc = run_cli("eval", "--env", "scripted/reach", "--policy", url, "--episodes", "1", "--out", tmp_path / "r")
    assert proc.returncode == 2, proc.stderr
    assert " ".join(proc.stderr.split()) == (
        f"error: the policy server {url} advertises metadata whose replan_every is an integer of 30 digits; "
        "replan_every must be an integer from 1 to 1,000,000"
    )
    assert not (tmp_path / "r").exists()


def test_the_guard_hands_the_app_host_and_origin_in_lower_case_and_other_headers_as_sent() -> None:
    scope = {
        "type": "http",
        "headers": [(b"host", b"LOCALHOST:80"), (b"Origin", b"HTTP://LocalHost:80"), (b"x-a", b"B")],
    }
    assert lower_case_names(scope)["headers"] == [(b"host", b"localhost:80"), (b"Origin", b"http://localhost:80"), (b"x-a", b"B")]  # fmt: skip


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


@pytest.mark.slow
def test_mcp_http_answers_a_host_name_in_any_letter_case_and_still_refuses_other_names(tmp_path: Path) -> None:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "rollbench",
        "mcp",
        "--transport",
        "http",
        "--root",
        str(tmp_path),
        "--port",
        str(port),
    ]
    env = {k: v for k, v in os.environ.items() if k != "ROLLBENCH_MCP_TOKEN"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    accept = {"accept": "application/json, text/event-stream"}

    def initialize(host: str, origin: str | None = None) -> httpx.Response:
        headers = {**accept, "host": host, **({"origin": origin} if origin else {})}
        return httpx.post(url, json=INITIALIZE, headers=headers, timeout=60)

    try:
        wait_listening(proc, port, 60, "the http server did not start")
        lower = initialize(f"localhost:{port}")
        upper = initialize(f"LOCALHOST:{port}", f"http://LOCALHOST:{port}")
        mixed = initialize(f"LocalHost:{port}", f"HTTP://localhost:{port}")
        other = initialize(f"EVIL.example:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert [r.status_code for r in (lower, upper, mixed)] == [200, 200, 200], upper.text
    assert other.status_code == 421
    assert other.json() == {
        "error": f"Host 'EVIL.example:{port}' is not a name this server answers to (127.0.0.1, localhost, [::1])"
    }
