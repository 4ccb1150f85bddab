"""The ws:// and http:// policy clients against hostile servers, and the wire decoders under a seeded fuzz.

The servers are real (websockets / FastAPI on uvicorn, 127.0.0.1) and answer the way a broken or malicious policy
server would (tests/hostile_peers.py); the clients are rollbench's own, driven through ``rollbench eval`` or their
Policy interface. A bad reply must end that episode as an error with the reason, never crash the evaluation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from cli_in_process import invoke
from hostile_peers import hostile_http_server, hostile_ws_server, http_bodies, http_replies, ws_cases
from rollbench.core.contracts import EpisodeError, InfrastructureError, Observation
from rollbench.core.registry import make_policy, resolve_tasks
from rollbench.wire.decode import ProtocolError, decode_array, loads_json, unpack_msgpack
from served_policy import ROLLBENCH, served

REACH = resolve_tasks("scripted/reach")[0]
STATE = np.array([0.1, 0.1, 0.5, 0.1], np.float32)
OBJECT_ACTIONS = msgpack.packb(
    {"actions": {b"__ndarray__": True, b"data": b"\x01" * 16, b"dtype": "|O", b"shape": [1, 2]}}
)


def eval_json(policy: str, out: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """``rollbench eval`` of one scripted episode, run in this process (``cli_in_process.invoke``; the hostile
    server is a thread here): (exit code, its --json document or {}, stderr)."""
    cmd = ["eval", "--env", "scripted/reach", "--policy", policy, "--episodes", "1", "--json"]
    proc = invoke(*cmd, "--out", out, *extra)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def test_an_object_dtype_reply_ends_the_episode_as_an_error_and_the_evaluation_goes_on(tmp_path: Path) -> None:
    meta = {"needs_images": False}
    with hostile_ws_server(lambda i: OBJECT_ACTIONS, meta) as url:
        code, result, stderr = eval_json(url, tmp_path / "ws", "--policy-options", '{"retries": 0}')
    assert code == 1, stderr
    (episode,) = result["episodes"]
    assert episode["termination_reason"] == "error"
    assert episode["error"] == (
        f"EpisodeError: malformed reply from {url} (its reply): unsupported array dtype '|O': only bool, int8-64, "
        "uint8-64 and float16-64 arrays are accepted"
    )
    with hostile_http_server() as base:
        code, result, stderr = eval_json(f"{base}/object", tmp_path / "http")
    assert code == 1, stderr
    assert result["episodes"][0]["error"] == (
        f"EpisodeError: malformed reply from {base}/object: 'actions' unsupported dtype 'object'; supported: bool, "
        "uint8, int8, int16, int32, int64, float16, float32, float64"
    )


def test_fuzzed_replies_end_each_call_as_an_episode_error_or_a_valid_chunk_never_a_crash() -> None:
    """Every fuzz frame of tests/hostile_peers.py (binary ones) is the server's reply to one act call."""
    frames = [f[-1] for _, f in ws_cases(seed=1, random_cases=60) if isinstance(f[-1], bytes)]
    replies = [msgpack.packb({"actions": f}) if f[:1] != b"\x82" else f for f in frames]
    outcomes = {"chunk": 0, "error": 0}
    with hostile_ws_server(lambda i: replies[i % len(replies)], {"needs_images": False}) as url:
        client = make_policy(url, {"retries": 0})
        try:
            client.reset(REACH, 0)
            for _ in replies:
                try:
                    chunk = client.act(Observation(state=STATE), REACH.instruction)
                    assert chunk.dtype.kind == "f" and chunk.shape[-1] == 2  # the server's float dtype, kept
                    outcomes["chunk"] += 1
                except EpisodeError as exc:
                    assert str(exc) and exc.fault in ("policy", "infrastructure")
                    outcomes["error"] += 1
        finally:
            client.close()
    assert outcomes["error"] > 100 and sum(outcomes.values()) == len(replies)


@pytest.mark.slow
def test_fuzzed_http_replies_end_each_call_as_an_episode_error_or_a_valid_chunk_never_a_crash() -> None:
    n = len(list(http_replies()))
    outcomes = {"chunk": 0, "error": 0}
    with hostile_http_server() as base:
        client = make_policy(base + "/fuzz", {"retries": 0})
        try:
            client.reset(REACH, 0)
            for _ in range(n):
                try:
                    chunk = client.act(Observation(state=STATE), REACH.instruction)
                    assert chunk.dtype.kind == "f" and chunk.shape[-1] == 2  # the server's float dtype, kept
                    outcomes["chunk"] += 1
                except EpisodeError as exc:
                    assert str(exc) and exc.fault in ("policy", "infrastructure")
                    outcomes["error"] += 1
        finally:
            client.close()
    assert outcomes["chunk"] >= 1 and outcomes["error"] > 80 and sum(outcomes.values()) == n


def test_http_client_names_an_error_reply_by_status_and_size_only_and_refuses_nan_json(tmp_path: Path) -> None:
    with hostile_http_server() as base:
        errors = {}
        for path in ("/detail", "/plain", "/nan"):
            client = make_policy(base + path, {"retries": 0})
            try:
                client.reset(REACH, 0)
                with pytest.raises(EpisodeError) as err:
                    client.act(Observation(state=STATE), REACH.instruction)
                errors[path] = str(err.value)
            finally:
                client.close()
    # no reply body is ever echoed, FastAPI's {"detail": ...} included: its status and size only
    shown = r" \(not shown: a server's text is never quoted\)"
    assert re.fullmatch(
        rf"server error from {re.escape(base)}/detail: HTTP 422, a reply of \d+ bytes{shown}", errors["/detail"]
    )
    assert (
        errors["/plain"]
        == f"server error from {base}/plain: HTTP 500, a reply of 17 bytes (not shown: a server's text is never quoted)"
    )
    assert errors["/nan"].startswith(f"malformed reply from {base}/nan: NaN is not JSON (RFC 8259)")


def test_our_http_errors_have_one_shape_and_a_wrong_path_says_where_the_protocol_is(tmp_path: Path) -> None:
    import httpx

    with served(tmp_path, "scripted-expert", "http") as (url, _, _):
        wrong = url.replace("/act", "/nope")
        r = httpx.post(wrong, json={})
        assert (r.status_code, r.json()) == (404, {"error": "Not Found (POST /nope; the protocol is at /act)"})
        r = httpx.put(url, json={})
        assert (r.status_code, r.json()) == (405, {"error": "Method Not Allowed (PUT /act; the protocol is at /act)"})
        code, _, stderr = eval_json(wrong, tmp_path / "r")
    assert code == 2
    assert f"is not ready (GET {wrong} answered HTTP 404)" in stderr.replace("\n", "")


@pytest.mark.slow
def test_http_policy_url_without_a_path_means_act(tmp_path: Path) -> None:
    """`--policy http://HOST:PORT`, the form `rollbench policies` prints, evaluates through /act (issue 15, 10)."""
    with served(tmp_path, "scripted-expert", "http") as (url, log, _):
        base = url.removesuffix("/act")
        code, result, stderr = eval_json(base, tmp_path / "r")
        code_slash, _, _ = eval_json(base + "/", tmp_path / "r2")
    assert (code, code_slash) == (0, 0), stderr
    assert result["status"] == "OK"
    provenance = json.loads((tmp_path / "r" / "run.json").read_text())["plan"]["policy"]["provenance"]
    assert provenance["server"] == url
    assert [r["kind"] for r in map(json.loads, log.read_text().splitlines())][:2] == ["reset", "act"]


@pytest.mark.parametrize("protocol", ["ws", "http"])
@pytest.mark.slow
def test_a_server_at_its_session_limit_refuses_with_the_reason_until_a_client_closes(
    protocol: str, tmp_path: Path
) -> None:
    from rollbench.core.contracts import ConfigError

    with served(tmp_path, "scripted-expert", protocol, "--max-sessions", "1") as (url, _, _):
        first = make_policy(url, {"retries": 0})
        try:
            first.reset(REACH, 0)
            if protocol == "ws":  # a connection is a session: the second client is refused when it connects
                with pytest.raises(ConfigError, match="an error instead of its metadata: an error text frame, a reply"):
                    make_policy(url, {"retries": 0})
            else:  # an id is a session, started by its reset
                second = make_policy(url, {"retries": 0})
                with pytest.raises(InfrastructureError, match=r"HTTP 503, a reply of [0-9]+ bytes \(not shown"):
                    second.reset(REACH, 0)
                second.close()
        finally:
            first.close()
        # a closed client's session is over at once (ws: its connection; http: the client's close message)
        third = make_policy(url, {"retries": 0})
        third.reset(REACH, 0)
        third.close()


@pytest.mark.slow
def test_the_cli_prints_error_reasons_with_brackets_verbatim(tmp_path: Path) -> None:
    """rich markup ate `[[nan, nan]]` (printed `[]`); reasons are escaped now."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    cmd = [ROLLBENCH, "eval", "--env", "scripted/reach", "--policy", "fault_policies:nan_on_seed", "--episodes", "1"]
    cmd += ["--policy-options", '{"bad_seed": 0, "step": 0}', "--out", str(tmp_path / "r")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1
    assert "policy returned a non-finite action (NaN or inf) at step 0: [[nan, nan]]" in proc.stdout
    bad = subprocess.run([ROLLBENCH, "grade", str(tmp_path / "[bold]missing")], capture_output=True, text=True)
    assert bad.returncode == 2 and "[bold]missing" in bad.stderr


# ----------------------------------------------------------------------------------------- pure decoders


def _numeric_only(value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, np.ndarray | np.generic):
            assert v.dtype.kind in "biuf", v.dtype
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def test_the_msgpack_decoder_yields_only_numeric_arrays_or_a_protocol_error() -> None:
    seen = {"ok": 0, "refused": 0}
    for seed in range(3):
        for _, frames in ws_cases(seed=seed):
            for frame in frames:
                try:
                    _numeric_only(unpack_msgpack(frame))
                    seen["ok"] += 1
                except ProtocolError as exc:
                    assert str(exc)
                    seen["refused"] += 1
    assert seen["ok"] > 300 and seen["refused"] > 300


def test_the_json_decoders_yield_only_numeric_arrays_or_a_protocol_error() -> None:
    seen = {"ok": 0, "refused": 0}
    for seed in range(3):
        for _, body in http_bodies(seed=seed):
            try:
                request = loads_json(body)
                for value in (request.get("state"), *(request.get("images") or {}).values()):
                    assert decode_array(value).dtype.kind in "biuf"
                seen["ok"] += 1
            except (ProtocolError, AttributeError, TypeError):
                seen["refused"] += 1
    assert seen["ok"] > 10 and seen["refused"] > 100
