"""Nothing that arrives over a wire makes rollbench import a module, and every HTTP surface refuses what a web page
in the user's browser could send (issue 20, items 1 and 2).

A planted module ``planted_marker`` writes a marker file when imported and is importable by every server started
here (its directory is on the server's PYTHONPATH), so an import through ``gym:planted_marker:Foo-v0`` would be
seen. Real servers on loopback: ``rollbench serve-policy`` (HTTP and websocket) and ``rollbench mcp`` as
subprocesses, the dashboard in a thread.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgpack
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

import rollbench

SRC = str(Path(rollbench.__file__).resolve().parents[1])
EVIL = "gym:planted_marker:Foo-v0"
TOKEN = "tok-0123456789abcdef"
http = httpx.Client(timeout=60)  # a first reset imports gymnasium: seconds on a loaded machine


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """(directory holding the planted module, the marker file its import would create)."""
    mod_dir, marker = tmp_path / "planted", tmp_path / "IMPORTED"
    mod_dir.mkdir()
    (mod_dir / "planted_marker.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    return mod_dir, marker


def server_env(mod_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ROLLBENCH_SERVER_TOKEN", "ROLLBENCH_MCP_TOKEN")}
    return {**env, "PYTHONPATH": os.pathsep.join([SRC, str(mod_dir)]), **extra}


@pytest.fixture
def serve(planted: tuple[Path, Path]) -> Iterator[Any]:
    """Start ``rollbench serve-policy --policy random ARGS``; yields a starter returning (url, pid)."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> tuple[str, int]:
        cmd = [sys.executable, "-m", "rollbench", "serve-policy", "--policy", "random", "--port", "0", *args]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env or server_env(planted[0])
        )
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving "), line
        return line.split(" at ", 1)[1].strip(), proc.pid

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=30)


def test_a_reset_naming_a_module_is_refused_over_http_and_nothing_is_imported(serve, planted) -> None:
    url, _ = serve("--protocol", "http")
    r = http.post(url, json={"session": "s1", "reset": {"task": EVIL, "seed": 0}})
    assert r.status_code == 400 and "module" in r.json()["error"]
    # a browser page's request: a text/plain body from another origin (no preflight): refused before it is read
    browser = http.post(
        url,
        content=json.dumps({"session": "s2", "reset": {"task": EVIL, "seed": 0}}),
        headers={"content-type": "text/plain", "origin": "http://evil.example", "sec-fetch-site": "cross-site"},
    )
    assert browser.status_code == 403
    plain = http.post(url, content=b'{"reset": {"task": "gym:planted_marker:Foo-v0", "seed": 0}}')  # no type
    assert plain.status_code == 415
    rebound = http.get(url, headers={"host": "evil.example"})
    assert rebound.status_code == 421
    assert not planted[1].exists()


def test_a_reset_naming_a_module_is_refused_over_websocket_and_a_browser_origin_is_refused(serve, planted) -> None:
    url, _ = serve("--protocol", "ws")
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin="http://evil.example", open_timeout=10)  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    with connect(url, open_timeout=10) as ws:
        msgpack.unpackb(ws.recv(timeout=10))  # metadata
        ws.send(msgpack.packb({"reset": {"task": EVIL, "seed": 0}}))
        text = ws.recv(timeout=10)
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
    assert isinstance(text, str) and "module" in text
    assert ws.close_code == 1008
    assert not planted[1].exists()


def test_a_registered_task_still_resets_over_http(serve) -> None:
    url, _ = serve("--protocol", "http")
    r = http.post(url, json={"session": "s1", "reset": {"task": "scripted/reach", "seed": 0}})
    assert (r.status_code, r.json()) == (200, {"reset": True})


def test_failed_resets_give_their_session_slot_back(serve) -> None:
    url, _ = serve("--protocol", "http", "--max-sessions", "2")
    for i in range(3):
        bad = http.post(url, json={"session": f"bad{i}", "reset": {"task": "scripted/no-such-task", "seed": 0}})
        assert bad.status_code == 400
    good = http.post(url, json={"session": "good", "reset": {"task": "scripted/reach", "seed": 0}})
    assert good.status_code == 200


def test_off_loopback_serve_policy_needs_a_strong_token(planted) -> None:
    cmd = [sys.executable, "-m", "rollbench", "serve-policy", "--policy", "random", "--port", "0"]
    for extra, expected in (
        (["--host", "10.1.2.3"], "is not a loopback address"),
        (["--token", "short"], "at least 16 characters"),
        (["--host", "0.0.0.0", "--token", TOKEN], "--allow-host"),
    ):
        proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=60, env=server_env(planted[0]))
        assert proc.returncode == 2 and expected in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_with_a_token_serve_policy_refuses_requests_without_it_and_clients_send_it(serve, planted) -> None:
    url, _ = serve("--protocol", "http", env=server_env(planted[0], ROLLBENCH_SERVER_TOKEN=TOKEN))
    assert http.get(url).status_code == 401
    assert http.get(url, headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    ws_url, _ = serve("--protocol", "ws", "--token", TOKEN)
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url, open_timeout=10)
    assert refused.value.response.status_code == 401
    with connect(ws_url, open_timeout=10, additional_headers={"Authorization": f"Api-Key {TOKEN}"}) as ws:
        assert msgpack.unpackb(ws.recv(timeout=10))["policy"] == "random"  # openpi's api_key form


def test_half_open_websocket_handshakes_do_not_pile_up_threads(serve) -> None:
    url, pid = serve("--protocol", "ws", "--max-sessions", "2", "--request-timeout-s", "30")
    host, port = url.removeprefix("ws://").rsplit(":", 1)
    before = len(os.listdir(f"/proc/{pid}/task"))
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(60)]
    try:
        time.sleep(1.5)
        threads = len(os.listdir(f"/proc/{pid}/task"))
        # at most --max-sessions + 16 connections are served, two threads each; the other 42 are answered 503
        assert threads - before <= 2 * (2 + 16), threads - before
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 20
    while True:  # the slots come back when the half-open connections close
        try:
            with connect(url, open_timeout=5) as ws:
                assert msgpack.unpackb(ws.recv(timeout=10))["policy"] == "random"
            break
        except (InvalidStatus, OSError, ConnectionClosed, TimeoutError):
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_mcp_refuses_a_module_task_and_prints_nothing_on_its_protocol_channel(planted, tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rollbench", "mcp", "--root", str(tmp_path / "runs")],
        env=server_env(planted[0]),
    )
    ok = {"policy": "random", "n_episodes": 1, "max_steps": 2}

    async def main() -> list[str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            texts = []
            for env in (
                EVIL,
                "gym/planted_marker:Foo-v0",
                "planted_marker:Foo",
                "scripted/reach,gym:planted_marker:X-v0",
            ):
                res = await s.call_tool("run_policy_rollout", {**ok, "env": env})
                assert res.is_error
                texts.append(" ".join(getattr(c, "text", "") for c in res.content))
            return texts

    texts = anyio.run(main)
    assert not planted[1].exists()
    assert "module" in texts[0] and all(texts)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_dashboard_guard_refuses_cross_origin_writes_and_deep_json(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from dashboard_support import ServerThread, record_run

    record_run(tmp_path / "root" / "r", "hostA", episodes=1)
    srv = ServerThread([tmp_path / "root"], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        url = srv.url + "/api/label/hostA/point/r/0"
        foreign = http.post(url, json={"label": "failed"}, headers={"origin": "http://evil.example"})
        text = http.post(url, content=b'{"label": "failed"}', headers={"content-type": "text/plain"})
        deep = http.post(url, content=b"[" * 30000 + b"]" * 30000, headers={"content-type": "application/json"})
        rebound = http.get(srv.url + "/api/runs", headers={"host": "evil.example"})
    finally:
        srv.stop()
    assert (foreign.status_code, text.status_code, rebound.status_code) == (403, 415, 421)
    assert deep.status_code in (400, 413) and "error" in deep.json()
    assert not (tmp_path / "labels.json").exists()
