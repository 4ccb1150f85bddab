"""A policy name nested in a handed-over run's policy options (``gpu-standin``'s ``inner``) is held to the same rule
as the run's own policy: resuming connects nowhere and spends no key unless the user types the options again or
adds ``--trust-run``; every run/spec refusal comes before a policy is built; a foreign reply body is never echoed
(issue 42, class 1).

``rollbench`` commands, run in the test process (what they refuse and connect to, not the process boundary), on
copies of one recorded ``scripted/reach`` run. The oracle for "connects" is a bare
loopback socket listener started here (a bounded thread that records every byte that arrives: an HTTP request, a
websocket upgrade, an agent's ``GET /v1/models``) that never answers.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from recording_service import SECRET, recording_service
from rollbench.core.spec import build_spec
from rollbench.policies.remote.http import server_said

TOKEN = "tok-nested-inner-0123456789"
KEY = "sk-nested-inner-key-0123456789"


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """(port, what arrived) of a loopback socket that accepts, records up to 64 KiB per connection, never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    arrived: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    arrived.append(conn.recv(65536))
                except OSError:
                    arrived.append(b"(connected)")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], arrived
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()


def rb(*args: object, port: int = 9) -> subprocess.CompletedProcess[str]:
    """``rollbench ARGS`` in the test process (tests/cli_in_process.py), with the token, the key and the provider's
    URL in the environment for the command's duration (the agent policy reads them when it is built)."""
    env = {"ROLLBENCH_SERVER_TOKEN": TOKEN, "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    return invoke(*args, env=env)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("recorded") / "run"
    r = rb("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "2", "--max-steps", "3", "--out", run)
    assert r.returncode == 0, r.stderr
    return run


def with_options(recorded: Path, tmp_path: Path, policy: str, options: dict[str, Any]) -> Path:
    run = Path(shutil.copytree(recorded, tmp_path / "run", symlinks=True))
    log = json.loads((run / "run.json").read_text())
    log["spec"].update(policy=policy, policy_options=options)
    log["spec_identity"] = build_spec(**log["spec"]).identity()  # a consistent hand-over: only trust refuses it
    (run / "run.json").write_text(json.dumps(log))
    return run


def one_line_refusal(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (r.returncode, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    return lines[0]


INNERS = ["ws://127.0.0.1:{port}", "http://127.0.0.1:{port}/act", "agent:openai/gpt-4o"]


@pytest.mark.parametrize("inner", INNERS)
@pytest.mark.parametrize("typed", [(), ("--policy", "gpu-standin")])
@pytest.mark.slow
def test_a_nested_inner_policy_in_a_handed_over_run_connects_nowhere_unasked(
    recorded: Path, tmp_path: Path, listener: tuple[int, list[bytes]], inner: str, typed: tuple[str, ...]
) -> None:
    port, arrived = listener
    name = inner.format(port=port)
    run = with_options(recorded, tmp_path, "gpu-standin", {"latency_ms": 300, "inner": name})
    line = one_line_refusal(rb("eval", "--resume", run, *typed, port=port))
    assert f"names policy_options 'inner={name}', which rollbench would import, run, read, connect to" in line
    assert line.endswith("or add --trust-run")
    assert arrived == []


@pytest.mark.slow
def test_a_policy_name_nested_deeper_in_the_options_is_found_too(
    recorded: Path, tmp_path: Path, listener: tuple[int, list[bytes]]
) -> None:
    port, arrived = listener
    url = f"ws://127.0.0.1:{port}"
    run = with_options(recorded, tmp_path, "gpu-standin", {"inner": "zero", "extra": {"wrapped": [{"inner": url}]}})
    line = one_line_refusal(rb("eval", "--resume", run, "--policy", "gpu-standin", port=port))
    assert f"'extra.wrapped[0].inner={url}'" in line
    assert arrived == []


@pytest.mark.slow
def test_typing_the_options_again_is_the_positive_control_and_reaches_the_inner_server(
    recorded: Path, tmp_path: Path, listener: tuple[int, list[bytes]]
) -> None:
    port, arrived = listener
    options = {"latency_ms": 300, "inner": f"http://127.0.0.1:{port}/act"}
    run = with_options(recorded, tmp_path, "gpu-standin", options)
    typed = ("--policy", "gpu-standin", "--policy-options", json.dumps(options))
    r = rb("eval", "--resume", run, *typed, port=port)
    assert arrived and arrived[0].startswith(b"GET /act ") and f"Bearer {TOKEN}".encode() in arrived[0], r.stderr


@pytest.mark.slow
def test_a_run_of_another_spec_is_refused_before_the_agent_spends_the_key(
    recorded: Path, tmp_path: Path, listener: tuple[int, list[bytes]]
) -> None:
    port, arrived = listener
    run = Path(shutil.copytree(recorded, tmp_path / "run", symlinks=True))
    r = rb(
        "eval", "--env", "scripted/reach", "--policy", "agent:openai/gpt-4o", "--episodes", "2", "--out", run, port=port
    )
    assert "already holds a run of a different spec" in one_line_refusal(r)
    assert arrived == []


@pytest.mark.slow
def test_a_foreign_reply_to_the_readiness_probe_is_never_echoed(tmp_path: Path) -> None:
    with recording_service() as (port, seen):
        url = f"http://127.0.0.1:{port}/act"
        r = rb("eval", "--env", "scripted/reach", "--policy", url, "--episodes", "1", "--out", tmp_path / "new")
    line = one_line_refusal(r)
    assert seen and SECRET not in r.stdout + r.stderr
    assert line.endswith(f'is not ready (GET {url} answered HTTP 200, not {{"ready": true}})')


def test_an_error_body_protocol_or_not_is_summarised_by_its_status_and_size_only() -> None:
    body = b'{"secret": "internal"}'
    assert (
        server_said(500, b"<html>internal secret page</html>")
        == "HTTP 500, a reply of 33 bytes (not shown: a server's text is never quoted)"
    )
    assert (
        server_said(502, body) == f"HTTP 502, a reply of {len(body)} bytes (not shown: a server's text is never quoted)"
    )
    assert (
        server_said(400, b'{"error": "bad dtype"}')
        == "HTTP 400, a reply of 22 bytes (not shown: a server's text is never quoted)"
    )
