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
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

import rollbench
from rollbench.core.spec import build_spec
from served_policy import wait_listening

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


def _start_server(procs: list[subprocess.Popen[str]], args: tuple[str, ...], env: dict[str, str]) -> tuple[str, int]:
    """Start ``rollbench serve-policy --policy random ARGS`` (appended to ``procs``); (its url, its pid)."""
    cmd = [sys.executable, "-m", "rollbench", "serve-policy", "--policy", "random", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    procs.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving "), line
    return line.split(" at ", 1)[1].strip(), proc.pid


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        p.terminate()
        p.wait(timeout=30)


@pytest.fixture
def serve(planted: tuple[Path, Path]) -> Iterator[Any]:
    """Start ``rollbench serve-policy --policy random ARGS``; yields a starter returning (url, pid)."""
    procs: list[subprocess.Popen[str]] = []
    yield lambda *args, env=None: _start_server(procs, args, env or server_env(planted[0]))
    _stop(procs)


@pytest.fixture(scope="module")
def served_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The url of one ``serve-policy --protocol http`` shared by the observation checks below: each case resets
    its session before it acts, so the cases share the process and nothing else."""
    procs: list[subprocess.Popen[str]] = []
    yield _start_server(procs, ("--protocol", "http"), server_env(tmp_path_factory.mktemp("nothing-planted")))[0]
    _stop(procs)


@pytest.mark.slow
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
    body = b'{"session": "s3", "reset": {"task": "gym:planted_marker:Foo-v0", "seed": 0}}'
    utf7 = http.post(url, content=body, headers={"content-type": "application/json; charset=utf-7"})  # hostile8 F8
    assert utf7.status_code == 415 and "UTF-8" in utf7.json()["error"]
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


@pytest.mark.slow
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
        utf7 = http.post(
            url, content=b'{"label": "failed"}', headers={"content-type": "application/json;charset=utf-7"}
        )
        repeated = http.post(
            url,
            content=b'{"label": "failed"}',
            headers={"content-type": "application/json; charset=utf-8; charset=utf-7"},
        )
        deep = http.post(url, content=b"[" * 30000 + b"]" * 30000, headers={"content-type": "application/json"})
        rebound = http.get(srv.url + "/api/runs", headers={"host": "evil.example"})
    finally:
        srv.stop()
    assert (foreign.status_code, text.status_code, utf7.status_code, rebound.status_code) == (403, 415, 415, 421)
    assert repeated.status_code == 415
    assert repeated.json()["error"] == (
        "send the body as Content-Type: application/json with each parameter once (charset is repeated)"
    )
    assert deep.status_code in (400, 413) and "error" in deep.json()
    assert not (tmp_path / "labels.json").exists()


# ---- issue 30, items 13-17: Host by a URL parser, one of each guarded header, served observations, no load ------

HOSTS = [  # Host header -> the host it names (None: not a Host value at all), by RFC 9110 7.2 / RFC 3986 3.2
    ("127.0.0.1:8000", "127.0.0.1"),
    ("LOCALHOST", "localhost"),
    ("[::1]:80", "[::1]"),
    ("[::1]", "[::1]"),
    ("127.0.0.1:", "127.0.0.1"),  # an empty port is allowed (RFC 3986 3.2.3)
    ("127.0.0.1:8000@evil.com", None),  # item 15: userinfo; a URL parser reads the host as evil.com
    ("user@127.0.0.1", None),
    ("127.0.0.1:8000@127.0.0.1", None),
    ("127.0.0.1:99999", None),  # port out of range
    ("127.0.0.1:80:80", None),
    ("127.0.0.1:x", None),
    ("127.0.0.1:-1", None),
    ("::1", None),  # an IPv6 address must be bracketed
    ("[::1", None),
    ("127.0.0.1/x", None),
    ("127.0.0.1?x", None),
    ("127.0.0.1#x", None),
    ("127.0.0.1\\evil.com", None),
    ("127.0.0.1 evil.com", None),
    ("127.0.0.1\x00", None),
    ("\uff4cocalhost", None),  # a fullwidth confusable
    ("", None),
]


@pytest.mark.parametrize(("header", "host"), HOSTS)
def test_a_host_header_names_the_host_a_url_parser_reads_or_is_malformed(header: str, host: str | None) -> None:
    from rollbench.wire.guard import parse_host

    assert parse_host(header) == host


def _guard_answers(headers: list[tuple[str, str]]) -> int:
    from rollbench.wire.guard import Guard, MultiHeaders

    refused = Guard.for_binding("127.0.0.1", None, what="test").check("GET", MultiHeaders(headers))
    return 200 if refused is None else refused[0]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([("Host", "127.0.0.1:1")], 200),
        ([("Host", "127.0.0.1:1@evil.com")], 400),
        ([("Host", "evil.com")], 421),
        ([("Host", "127.1")], 421),
        ([("Host", "0x7f000001")], 421),
        ([], 400),
        ([("Host", "127.0.0.1:1"), ("Host", "127.0.0.1:1")], 400),  # item 16: the same twice
        ([("Host", "127.0.0.1:1"), ("host", "evil.com")], 400),
        ([("Host", "127.0.0.1:1"), ("Origin", "http://127.0.0.1:1"), ("Origin", "http://evil.com")], 400),
        ([("Host", "127.0.0.1:1"), ("Authorization", "Bearer a"), ("Authorization", "Bearer b")], 400),
        ([("Host", "127.0.0.1:1"), ("Content-Type", "application/json"), ("content-type", "text/plain")], 400),
    ],
)
def test_the_guard_refuses_a_malformed_or_repeated_host_and_repeated_guarded_headers(headers, status) -> None:
    assert _guard_answers(headers) == status


def raw_status(port: int, lines: list[str]) -> int:
    """The HTTP status a server answers to a request written byte for byte (``lines``: request line and headers)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ", 2)[1])


WS_UPGRADE = [
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
]


def hostile_heads(port: int) -> dict[str, list[str]]:
    return {
        "userinfo": [f"Host: 127.0.0.1:{port}@evil.com"],
        "two hosts": [f"Host: 127.0.0.1:{port}", f"Host: 127.0.0.1:{port}"],
        "two hosts, one foreign": [f"Host: 127.0.0.1:{port}", "Host: evil.com"],
        "two origins": [f"Host: 127.0.0.1:{port}", f"Origin: http://127.0.0.1:{port}", "Origin: http://evil.com"],
        "port out of range": ["Host: 127.0.0.1:70000"],
    }


def _all_refused_with_400(port: int, request_line: str, extra: list[str]) -> dict[str, int]:
    return {k: raw_status(port, [request_line, *v, *extra]) for k, v in hostile_heads(port).items()}


def test_serve_policy_websocket_and_http_answer_400_to_bad_or_repeated_hosts(serve) -> None:
    ws_url, _ = serve("--protocol", "ws")
    http_url, _ = serve("--protocol", "http")
    ws_port, http_port = int(ws_url.rsplit(":", 1)[1]), int(http_url.rsplit(":", 1)[1].split("/")[0])
    ws = _all_refused_with_400(ws_port, "GET / HTTP/1.1", WS_UPGRADE)
    plain = _all_refused_with_400(http_port, "GET / HTTP/1.1", [])
    assert set(ws.values()) == {400} and set(plain.values()) == {400}, (ws, plain)
    assert raw_status(ws_port, ["GET / HTTP/1.1", f"Host: 127.0.0.1:{ws_port}", *WS_UPGRADE]) == 101


def test_the_dashboard_answers_400_to_bad_or_repeated_hosts(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from dashboard_support import ServerThread, record_run

    record_run(tmp_path / "root" / "r", "hostA", episodes=1)
    srv = ServerThread([tmp_path / "root"], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        got = _all_refused_with_400(srv.port, "GET /api/runs HTTP/1.1", [])
        ok = raw_status(srv.port, ["GET /api/runs HTTP/1.1", f"Host: 127.0.0.1:{srv.port}"])
    finally:
        srv.stop()
    assert set(got.values()) == {400} and ok == 200, got


def test_mcp_over_http_answers_400_to_bad_or_repeated_hosts(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port, 60, "the mcp http server did not start")
        got = _all_refused_with_400(port, "GET /mcp HTTP/1.1", [])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert set(got.values()) == {400}, got


def _act(url: str, state: dict[str, Any], images: dict[str, Any] | None = None) -> httpx.Response:
    http.post(url, json={"session": "s", "reset": {"task": "scripted/reach", "seed": 0}})
    body: dict[str, Any] = {"session": "s", "instruction": "reach", "state": state}
    if images is not None:
        body["images"] = images
    return http.post(url, json=body)


@pytest.mark.parametrize(
    ("state", "images", "words"),
    [
        ({"dtype": "int64", "shape": [4], "data": [2**63, 0, 0, 0]}, None, "int64 range"),  # item 17
        ({"dtype": "int8", "shape": [4], "data": [128, 0, 0, 0]}, None, "int8 range"),
        ({"dtype": "uint8", "shape": [4], "data": [-1, 0, 0, 0]}, None, "uint8 range"),
        ({"dtype": "int32", "shape": [4], "data": [0.5, 0, 0, 0]}, None, "non-integer"),
        ({"dtype": "bool", "shape": [4], "data": [2, 0, 0, 0]}, None, "bool range"),
        ({"dtype": "float16", "shape": [4], "data": [1e6, 0, 0, 0]}, None, "finite float16"),
        ({"dtype": "float64", "shape": [4], "data": [1e300, 0, 0, 0]}, None, "finite float32"),
        ({"dtype": "float32", "shape": [3], "data": [0, 0, 0]}, None, "has 4 values"),  # item 17
        ({"dtype": "float32", "shape": [5], "data": [0] * 5}, None, "has 4 values"),
        ({"dtype": "float32", "shape": [2, 2], "data": [0] * 4}, None, "vector"),
        (
            {"dtype": "float32", "shape": [4], "data": [0] * 4},
            {"top": {"dtype": "float32", "shape": [2, 2, 3], "data": [0] * 12}},
            "uint8 (H, W, 3)",
        ),
        (
            {"dtype": "float32", "shape": [4], "data": [0] * 4},
            {"top": {"dtype": "uint8", "shape": [2, 2], "data": [0] * 4}},
            "uint8 (H, W, 3)",
        ),
        (
            {"dtype": "float32", "shape": [4], "data": [0] * 4},
            {"no-such-camera": {"dtype": "uint8", "shape": [2, 2, 3], "data": [0] * 12}},
            "no camera",
        ),
    ],
)
def test_served_observations_must_be_what_the_task_declares(served_http, state, images, words) -> None:
    r = _act(served_http, state, images)
    assert r.status_code == 400 and words in r.json()["error"], r.text


def test_a_well_formed_observation_is_answered(served_http) -> None:
    r = _act(served_http, {"dtype": "int64", "shape": [4], "data": [2**62, 0, 0, -(2**63)]})  # exact int64 extremes
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "policy",
    ["lerobot:/etc", "lerobot:someorg/some-model@main", "lerobot:./ckpt", "lerobot:", "lerobot:../../x"],
)
def test_mcp_lerobot_policies_are_only_those_the_server_was_started_with(policy: str) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from rollbench.mcp.strict import ServerBounds, rollout_spec

    allowed = ServerBounds(100, ("lerobot:/srv/allowed",))
    with pytest.raises(ToolError, match="not one of the LeRobot checkpoints this server was started with"):
        rollout_spec(allowed, policy, "scripted/reach", 1, 10, 0, None, False)
    with pytest.raises(ToolError, match="none"):
        rollout_spec(ServerBounds(100), policy, "scripted/reach", 1, 10, 0, None, False)
    spec = rollout_spec(allowed, "lerobot:/srv/allowed", "scripted/reach", 1, 10, 0, None, False)
    assert spec.policy == "lerobot:/srv/allowed"


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small run recorded by a real ``rollbench eval`` process, once per module (each test edits a copy)."""
    run = tmp_path_factory.mktemp("recorded") / "run"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rollbench",
            "eval",
            "--env",
            "scripted/reach",
            "--policy",
            "zero",
            "--episodes",
            "1",
            "--max-steps",
            "2",
            "--out",
            str(run),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return run


def _recorded(source: Path, tmp_path: Path) -> Path:
    """A fresh copy of the module's recorded run under ``tmp_path`` (the test may edit it)."""
    return Path(shutil.copytree(source, tmp_path / "run", symlinks=True))


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("policy", "planted_marker:make", "policy 'planted_marker:make'"),  # item 14
        ("policy", "lerobot:/etc", "policy 'lerobot:/etc'"),
        ("env", "gym:planted_marker:Foo-v0", "env 'gym:planted_marker:Foo-v0'"),
        ("env", "scripted/reach,gym/planted_marker:Foo-v0", "env 'gym/planted_marker:Foo-v0'"),
        ("policy_options", {"python": "/tmp/planted-python"}, "python=/tmp/planted-python"),
    ],
)
@pytest.mark.slow
def test_resuming_a_run_that_names_code_or_a_path_loads_nothing_unasked(
    planted, recorded_run, tmp_path, field, value, words
):
    run = _recorded(recorded_run, tmp_path)
    log = json.loads((run / "run.json").read_text())
    log["spec"][field] = value
    (run / "run.json").write_text(json.dumps(log))
    before = (run / "run.json").read_bytes()
    cmd = [sys.executable, "-m", "rollbench", "eval", "--resume", str(run)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=server_env(planted[0]))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr and "--trust-run" in r.stderr
    assert not planted[1].exists() and (run / "run.json").read_bytes() == before
    other = subprocess.run(
        [*cmd, "--policy", "zero"], capture_output=True, text=True, timeout=120, env=server_env(planted[0])
    )
    assert other.returncode == 2 and not planted[1].exists()


def test_resuming_with_the_recorded_module_named_again_imports_it(planted, recorded_run, tmp_path) -> None:
    run = _recorded(recorded_run, tmp_path)
    log = json.loads((run / "run.json").read_text())
    log["spec"]["policy"] = "planted_marker:make"
    log["spec_identity"] = build_spec(**log["spec"]).identity()  # consistent: another spec is refused before a build
    (run / "run.json").write_text(json.dumps(log))
    cmd = [sys.executable, "-m", "rollbench", "eval", "--resume", str(run), "--policy", "planted_marker:make"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=server_env(planted[0]))
    assert r.returncode == 2 and "planted_marker" in r.stderr  # imported (the user named it), then has no make
    assert planted[1].exists()


def test_the_mcp_stdio_server_keeps_the_clients_terminal_quiet_and_says_max_steps_is_required(planted, tmp_path):
    """Issue 30, item 22: the SDK's INFO lines (one per request, a block per refused call) no longer reach the
    stderr the client shows; the tool's description says which arguments are required."""
    anyio = pytest.importorskip("anyio")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rollbench", "mcp", "--root", str(tmp_path / "runs")],
        env=server_env(planted[0]),
    )  # fmt: skip
    errlog = (tmp_path / "stderr.txt").open("w")

    async def main() -> str:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = await s.list_tools()
            for env in (EVIL, "nosuch/task"):
                res = await s.call_tool("run_policy_rollout", {"policy": "random", "n_episodes": 1, "max_steps": 2,
                                                               "env": env})  # fmt: skip
                assert res.is_error
            return next(t.description or "" for t in tools.tools if t.name == "run_policy_rollout")

    description = anyio.run(main)
    errlog.close()
    said = (tmp_path / "stderr.txt").read_text()
    assert "INFO" not in said and "Traceback" not in said, said
    assert "max_steps are required" in description


def test_a_batched_observation_off_the_tasks_shape_is_refused_for_its_item_only(serve) -> None:
    """Item 17 through the batch path: one item's 3-value state (``scripted/reach`` has 4) gets its own 400 entry,
    the other item is answered."""
    url, _ = serve("--protocol", "http", "--max-batch", "4")
    for s in ("a", "b"):
        http.post(url, json={"session": s, "reset": {"task": "scripted/reach", "seed": 0}})
    good = {"dtype": "float32", "shape": [4], "data": [0, 0, 0, 0]}
    bad = {"dtype": "int64", "shape": [3], "data": [0, 0, 0]}
    r = http.post(url, json={"batch": [{"session": "a", "instruction": "x", "state": good},
                                       {"session": "b", "instruction": "x", "state": bad}]})  # fmt: skip
    entries = r.json()["batch"]
    assert r.status_code == 200 and "actions" in entries[0]
    assert entries[1]["status"] == 400 and "has 4 values" in entries[1]["error"]


# scripted/reach declares observation.state float32 (4,): what a served state may hold (docs/serving.md)
REFUSED_STATES = [
    ("float32", [3e38, 0, 0, 0], "magnitude 2**64 or more"),
    ("float32", [0, 0, 0, -3e38], "magnitude 2**64 or more (or outside the finite float32 range), first at index 3"),
    ("float64", [2.0**64, 0, 0, 0], "magnitude 2**64 or more"),
    ("float64", [0, 1e300, 0, 0], "outside the finite float32 range), first at index 1"),
    ("uint64", [2**64 - 1, 0, 0, 0], "1 integer(s) float32 cannot hold exactly, first at index 0"),
    ("int64", [0, 0, 2**24 + 1, -(2**53 + 1)], "2 integer(s) float32 cannot hold exactly, first at index 2"),
    ("int32", [-(2**31) + 1, 0, 0, 0], "float32 cannot hold exactly"),
]
ACCEPTED_STATES = [  # exactly float32 values: powers of two up to 2**63, 2**24, booleans, the largest finite below 2**64
    ("uint64", [2**63, 0, 0, 0]),
    ("int64", [2**62, 0, 0, -(2**63)]),
    ("int32", [2**24, -(2**24), 3, 0]),
    ("bool", [1, 0, 1, 0]),
    ("float32", [float(np.nextafter(np.float32(2.0**64), np.float32(0))), 0.5, 0, 0]),
]


def _ws_state(ws: Any, dtype: str, values: list[float]) -> Any:
    arr = np.array(values, dtype=dtype)
    ws.send(msgpack.packb({"reset": {"task": "scripted/reach", "seed": 0}}))
    msgpack.unpackb(ws.recv(timeout=30))
    state = {b"__ndarray__": True, b"data": arr.tobytes(), b"dtype": arr.dtype.str, b"shape": [4]}
    ws.send(msgpack.packb({"observation/state": state, "prompt": "reach"}))
    return ws.recv(timeout=30)


def test_served_states_follow_the_tasks_declared_float32_vector_over_http_and_websocket(serve) -> None:
    """Issue 30 (h-cli 2): a state reaches the policy only if it is observation.state's float32 (4,) without loss:
    integers exactly representable, magnitudes below 2**64, floats finite; the same rule on both transports."""
    url, _ = serve("--protocol", "http")
    for dtype, values, words in REFUSED_STATES:
        r = _act(url, {"dtype": dtype, "shape": [4], "data": values})
        if dtype == "uint64":  # the JSON /act protocol has no uint64 (its DTYPES)
            words = "unsupported dtype 'uint64'"
        assert r.status_code == 400 and words in r.json()["error"], (dtype, values, r.text)
    for dtype, values in ACCEPTED_STATES:
        if dtype == "uint64":
            continue
        r = _act(url, {"dtype": dtype, "shape": [4], "data": values})
        assert r.status_code == 200 and len(r.json()["actions"]["shape"]) == 2, (dtype, values, r.text)
    ws_url, _ = serve("--protocol", "ws")
    for dtype, values, words in REFUSED_STATES:
        with connect(ws_url, open_timeout=10) as ws:
            msgpack.unpackb(ws.recv(timeout=10))  # metadata
            reply = _ws_state(ws, dtype, values)
        assert isinstance(reply, str) and words in reply, (dtype, values, reply)
    for dtype, values in ACCEPTED_STATES:
        with connect(ws_url, open_timeout=10) as ws:
            msgpack.unpackb(ws.recv(timeout=10))
            reply = _ws_state(ws, dtype, values)
        assert isinstance(reply, bytes) and b"actions" in reply, (dtype, values, reply)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [  # Content-Type values (RFC 9110 8.3: type/subtype, case-insensitive, parameters after ";") -> JSON in UTF-8?
        ("application/json", True),
        ("Application/JSON; charset=UTF-8", True),
        ('application/json;charset="utf-8"', True),
        ("application/json ; charset=utf8", True),
        ("application/json; charset=utf-7", False),  # hostile8 F8: another charset is not RFC 8259 JSON
        ("application/json; charset=latin-1", False),
        ("application/json; charset=utf-8; charset=utf-7", False),  # hostile round 15 F6: which one holds?
        ("application/json; charset=utf-7; charset=utf-8", False),
        ("application/json; charset=utf-8; Charset=utf-8", False),  # parameter names are case-insensitive
        ("application/json; charset=utf-16", False),
        ("application/jsonx", False),
        ("application/json, text/plain", False),
        ("text/plain", False),
        ("multipart/form-data; boundary=x", False),
        ("", False),
        (None, False),
    ],
)
def test_a_body_is_accepted_only_as_json_in_utf8(value: str | None, accepted: bool) -> None:
    from rollbench.wire.guard import not_json_media

    assert (not_json_media(value) is None) is accepted
