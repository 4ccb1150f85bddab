"""A policy server's or model provider's text never reaches an error, a run file, the CLI or an MCP result (hostile
round 5, F1/F2/F8): the transport libraries' exceptions that quote a reply (h11's bad header line, websockets'
``Upgrade`` header), reply contents a decoder used to quote (a dtype, the keys, a reset reply, a batch status) and a
provider's error body are named by rollbench's own words: exception class, status, size, which field, its JSON type.

Real parts: a raw TCP server on loopback that answers what the case says (tests/hostile_peers.py ``raw_http_server``),
the real websocket server of ``hostile_ws_server``, rollbench's own clients (``make_policy``, ``ChatClient``), and for
the end-to-end rows the CLI (in process), ``grade --json`` and a real ``rollbench mcp`` server. Every hostile reply
echoes the ``Authorization`` header the client sent, as the round's servers did; the expected texts are written out
by hand, with sizes counted from what the server sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from hostile_peers import RawRequest, hostile_ws_server, http_reply, json_bytes, raw_http_server
from rollbench.core.contracts import ConfigError, EpisodeError, InfrastructureError, Observation
from rollbench.core.registry import make_policy, resolve_tasks

TOKEN = "ZQ-wireleak-SECRET-7781"
BEARER = f"Bearer {TOKEN}"
REACH = resolve_tasks("scripted/reach")[0]
STATE = np.array([0.1, 0.1, 0.5, 0.1], np.float32)
NOT_SHOWN = "(not shown: a server's text is never quoted)"
UNSHOWN = "(its text is not shown: it may quote the server's reply)"
JSON_DTYPES = "bool, uint8, int8, int16, int32, int64, float16, float32, float64"
SERVE_HINT = "is `rollbench serve-policy --protocol http` or your /act server running there?"
WS_HINT = "is `rollbench serve-policy` or your openpi server running there?"
OPTIONS = {"retries": 0, "connect_timeout_s": 3, "timeout_s": 20}


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLBENCH_SERVER_TOKEN", TOKEN)


def bad_header(auth: str) -> bytes:
    """A reply whose second line is no header at all: h11 quotes it in RemoteProtocolError."""
    return f"HTTP/1.1 200 OK\r\nbadline-{auth}-SERVERBODY\r\n\r\n".encode()


def ok(doc: Any) -> bytes:
    return http_reply(200, json_bytes(doc))


def http_peer(stage: str, hostile: Callable[[str], bytes], reset: bool = False) -> Callable[[RawRequest], bytes]:
    """A JSON /act server that answers ``hostile(the Authorization it received)`` at ``stage`` ("ready", "reset"
    or "act") and correctly before it."""

    def answer(req: RawRequest) -> bytes:
        auth = req.headers.get("authorization", "")
        if req.method == "GET":
            meta = {"needs_images": False, "reset": reset}
            return hostile(auth) if stage == "ready" else ok({"ready": True, "metadata": meta})
        msg = json.loads(req.body)
        if "close" in msg:
            return ok({"closed": True})
        if "reset" in msg:
            return hostile(auth) if stage == "reset" else ok({"reset": True})
        return hostile(auth)

    return answer


# label -> (stage, the server's hostile answer, the expected error with {url} for the client's URL)
HTTP_CASES: dict[str, tuple[str, Callable[[str], bytes], str]] = {
    "h11 bad header line, readiness": (
        "ready",
        bad_header,
        f"cannot reach the policy server {{url}} (RemoteProtocolError {UNSHOWN}); {SERVE_HINT}",
    ),
    "h11 bad header line, act": (
        "act",
        bad_header,
        f"lost the connection to {{url}} and 0 retries failed (RemoteProtocolError {UNSHOWN})",
    ),
    "dtype echoing the token": (
        "act",
        lambda a: ok({"actions": {"dtype": f"echo {a}", "shape": [1, 2], "data": "AAAAAAAAAAA="}}),
        f"malformed reply from {{url}}: 'actions' unsupported dtype (a string of {len('echo ' + BEARER)} characters); "
        f"supported: {JSON_DTYPES}",
    ),
    "keys echoing the token": (
        "act",
        lambda a: ok({a: 1, "x": 2}),
        "malformed reply from {url}: no 'actions' (got an object of 2 keys)",
    ),
    "string actions": (
        "act",
        lambda a: ok({"actions": [[a, "x"]]}),
        f"malformed reply from {{url}}: 'actions' is not numeric (its dtype is <U{len(BEARER)})",
    ),
    "reset answered with the token": (
        "reset",
        lambda a: ok({"reset": a}),
        f"malformed reply from {{url}} to reset: expected {{{{\"reset\": true}}}}, got 'reset' is a string of "
        f"{len(BEARER)} characters",
    ),
    "reset answered with a list": (
        "reset",
        lambda a: ok([a]),
        'malformed reply from {url} to reset: expected {{"reset": true}}, got a list of 1 item',
    ),
    "body not UTF-8": (
        "act",
        lambda a: http_reply(200, b"\xff" + a.encode()),
        f"malformed reply from {{url}}: not JSON (its bytes are not UTF-8) (HTTP 200, {1 + len(BEARER)} bytes)",
    ),
    "error body echoing the token": (
        "act",
        lambda a: http_reply(500, json_bytes({"error": a})),
        f"server error from {{url}}: HTTP 500, a reply of {len(json_bytes({'error': BEARER}))} bytes {NOT_SHOWN}",
    ),
}


def drive(url: str) -> None:
    """Construct the client, run one reset and one act, close it."""
    client = make_policy(url, OPTIONS)
    try:
        client.reset(REACH, 0)
        client.act(Observation(state=STATE), REACH.instruction)
    finally:
        client.close()


@pytest.mark.parametrize("label", list(HTTP_CASES))
def test_an_http_servers_hostile_reply_is_named_in_rollbenchs_words_never_quoted(label: str) -> None:
    stage, hostile, expected = HTTP_CASES[label]
    with (
        raw_http_server(http_peer(stage, hostile, reset=stage == "reset")) as base,
        pytest.raises((ConfigError, EpisodeError)) as caught,
    ):
        drive(base)
    assert str(caught.value) == expected.format(url=f"{base}/act")
    assert TOKEN not in str(caught.value) and "SERVERBODY" not in str(caught.value)


def upgrade(auth: str) -> bytes:
    """A 101 whose Upgrade header is the echoed token (one word, as the round sent it): websockets quotes it in
    InvalidUpgrade."""
    return f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: {auth.replace(' ', '_')}-SERVERBODY\r\nConnection: Upgrade\r\n\r\n".encode()


# label -> (the raw handshake answer, the expected error with {url})
WS_HANDSHAKES: dict[str, tuple[Callable[[str], bytes], str]] = {
    "Upgrade header echoing the token": (
        upgrade,
        f"cannot reach the policy server {{url}} within 3 s (InvalidUpgrade {UNSHOWN}); {WS_HINT}",
    ),
    "bad header line in the handshake": (
        bad_header,
        f"cannot reach the policy server {{url}} within 3 s (InvalidMessage {UNSHOWN}); {WS_HINT}",
    ),
}


@pytest.mark.parametrize("label", list(WS_HANDSHAKES))
def test_a_websocket_handshake_quoting_the_token_is_named_by_its_exception_class(label: str) -> None:
    hostile, expected = WS_HANDSHAKES[label]
    with raw_http_server(lambda req: hostile(req.headers.get("authorization", ""))) as base:
        url = base.replace("http://", "ws://")
        with pytest.raises(ConfigError) as caught:
            drive(url)
    assert str(caught.value) == expected.format(url=url)
    assert TOKEN not in str(caught.value)


def ndarray(dtype: str) -> dict[bytes, Any]:
    return {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": dtype, b"shape": [1, 2]}


# label -> (metadata says reset, the reply to every request, the expected error with {url})
WS_REPLIES: dict[str, tuple[bool, Any, str]] = {
    "dtype echoing the token": (
        False,
        {"actions": ndarray(f"echo {BEARER}")},
        f"malformed reply from {{url}} (its reply): unsupported array dtype (a string of {len('echo ' + BEARER)} "
        "characters): only bool, int8-64, uint8-64 and float16-64 arrays are accepted",
    ),
    "keys echoing the token": (False, {BEARER: 1}, "malformed reply from {url}: no 'actions' (got an object of 1 key)"),
    "reset answered with the token": (
        True,
        {"reset": BEARER},
        f'malformed reply from {{url}} to reset: expected {{{{"reset": true}}}}, got \'reset\' is a string of '
        f"{len(BEARER)} characters",
    ),
    "error text frame": (False, f"Traceback: {BEARER}", f"server error from {{url}}: an error text frame, a reply of "
                         f"{len('Traceback: ' + BEARER)} characters {NOT_SHOWN}"),
}  # fmt: skip


@pytest.mark.parametrize("label", list(WS_REPLIES))
def test_a_websocket_servers_hostile_reply_is_named_in_rollbenchs_words_never_quoted(label: str) -> None:
    reset, reply, expected = WS_REPLIES[label]
    frame = reply if isinstance(reply, str) else msgpack.packb(reply)
    meta = {"needs_images": False, "reset": reset}
    with hostile_ws_server(lambda i: frame, meta) as url, pytest.raises(EpisodeError) as caught:
        drive(url)
    assert str(caught.value) == expected.format(url=url)
    assert TOKEN not in str(caught.value)


def test_a_batch_reply_names_each_entrys_status_and_size_never_its_text() -> None:
    replies = iter(
        [
            lambda a: ok({"batch": [{"error": a, "status": a}, {"error": a, "status": 503}]}),
            lambda a: ok({"batch": {a: 1}}),
        ]
    )

    def answer(req: RawRequest) -> bytes:
        if req.method == "GET":
            return ok({"ready": True, "metadata": {"needs_images": False, "max_batch": 2}})
        return next(replies)(req.headers.get("authorization", ""))

    with raw_http_server(answer) as base:
        client = make_policy(base, OPTIONS)
        batch = client.batched(2)
        assert batch is not None
        for slot in (0, 1):
            batch.reset_slot(slot, REACH, slot)
        obs = [Observation(state=STATE)] * 2
        first = batch.act_batch([0, 1], obs, [REACH.instruction] * 2)
        second = batch.act_batch([0, 1], obs, [REACH.instruction] * 2)
    url = f"{base}/act"
    said = f"a reply of {len(BEARER)} characters {NOT_SHOWN}"
    assert [(type(a).__name__, str(a)) for a in first] == [
        ("EpisodeError", f"server error from {url}: an error entry, {said}"),  # its status was the token
        ("InfrastructureError", f"server error from {url}: HTTP 503, {said}"),
    ]
    assert [str(a) for a in second] == [
        f"malformed reply from {url} to a batch request: no 'batch' list (got an object of 1 key)"
    ] * 2


KEY = "sk-wireleak-KEY-0123456789abcdef"


def provider_body(auth: str, kind: str) -> bytes:
    """An OpenAI-style error body carrying the key transformed (reversed, upper-cased), which no redaction finds."""
    return json_bytes({"error": {"message": f"no. {auth[::-1]} / {auth.upper()}", "type": kind}})


def chat(base: str, retries: int = 0) -> Any:
    from rollbench.policies.agent.client import ChatClient

    return ChatClient(f"{base}/v1", KEY, timeout_s=30, connect_timeout_s=3, retries=retries, backoff_s=0.01)


BIG = 16 * 2**20  # the agent client's reply cap (docs/agents.md), written out
# label -> (retries, the provider's answer to a chat completion, the expected InfrastructureError with {url})
AGENT_CASES: dict[str, tuple[int, Callable[[str], bytes], str]] = {
    "400 of a known error type": (
        0,
        lambda a: http_reply(400, provider_body(a, "invalid_request_error")),
        "the model API {url} answered HTTP 400 (invalid_request_error), a reply of {size} bytes " + NOT_SHOWN,
    ),
    "400 whose error type is the key": (
        0,
        lambda a: http_reply(400, provider_body(a, a)),
        "the model API {url} answered HTTP 400, a reply of {size} bytes " + NOT_SHOWN,
    ),
    "200 that is not JSON": (
        0,
        lambda a: http_reply(200, f"<html>{a}</html>".encode()),
        "the model API {url} sent a body that is not a JSON object (HTTP 200, {size} bytes)",
    ),
    "429 every time": (
        1,
        lambda a: http_reply(429, provider_body(a, "rate_limit_error"), "Retry-After: 0"),
        "the model API {url} failed 2 times (last: HTTP 429 (rate_limit_error), a reply of {size} bytes "
        + NOT_SHOWN
        + "); gave up after 1 retries with backoff (turn 1)",
    ),
    "h11 bad header line": (
        0,
        bad_header,
        f"the model API {{url}} failed 1 times (last: RemoteProtocolError {UNSHOWN}); gave up after 0 retries with "
        "backoff (turn 1)",
    ),
    "reply over the size cap": (
        0,
        lambda a: http_reply(200, b" " * (BIG + 1)),
        f"the model API {{url}} sent a reply larger than {BIG} bytes",
    ),
}


@pytest.mark.parametrize("label", list(AGENT_CASES))
def test_a_providers_error_reply_is_named_by_status_size_and_known_type_never_its_body(label: str) -> None:
    retries, hostile, expected = AGENT_CASES[label]
    sent: list[int] = []

    def answer(req: RawRequest) -> bytes:
        reply = hostile(req.headers.get("authorization", ""))
        sent.append(len(reply.partition(b"\r\n\r\n")[2]))
        return reply

    with raw_http_server(answer) as base:
        client = chat(base, retries)
        try:
            with pytest.raises(InfrastructureError) as caught:
                client.complete({"model": "m", "messages": []}, 1)
        finally:
            client.close()
    said = str(caught.value)
    assert said == expected.format(url=f"{base}/v1/chat/completions", size=sent[-1])
    assert KEY not in said and KEY[::-1] not in said and KEY.upper() not in said


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            lambda a: http_reply(401, provider_body(a, "authentication_error")),
            "the model API at {base}/v1 refused the API key: HTTP 401 (authentication_error), a reply of {size} bytes "
            + NOT_SHOWN,
        ),
        (bad_header, f"cannot reach the model API at {{base}}/v1 (RemoteProtocolError {UNSHOWN})"),
    ],
    ids=["401 echoing the key", "h11 bad header line"],
)
def test_a_providers_answer_to_the_key_check_is_named_never_quoted(
    answer: Callable[[str], bytes], expected: str
) -> None:
    size = len(provider_body(f"Bearer {KEY}", "authentication_error"))
    with raw_http_server(lambda req: answer(req.headers.get("authorization", ""))) as base:
        client = chat(base)
        try:
            with pytest.raises(ConfigError) as caught:
                client.probe("m")
        finally:
            client.close()
    assert str(caught.value) == expected.format(base=base, size=size)
    assert KEY[::-1] not in str(caught.value) and KEY.upper() not in str(caught.value)


@pytest.mark.parametrize(
    ("retry_after", "wait_s"),
    [
        ("nan", 1.0), ("NaN", 1.0), ("inf", 1.0), ("-inf", 1.0), ("-1", 1.0), ("1e999", 1.0), ("soon", 1.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 1.0), (None, 1.0), ("0", 0.0), ("2.5", 2.5), ("1e308", 60.0),
    ],
)  # fmt: skip
def test_retry_after_that_is_not_a_finite_non_negative_number_falls_back_to_the_backoff(
    retry_after: str | None, wait_s: float
) -> None:
    from rollbench.policies.agent.client import ChatClient

    client = ChatClient("http://127.0.0.1:9/v1", None, timeout_s=1, connect_timeout_s=1, retries=0, backoff_s=0.5)
    try:
        assert client._backoff(1, retry_after) == wait_s  # backoff_s * 2**1 = 1.0 s; at most 60 s
    finally:
        client.close()


def test_a_429_with_retry_after_nan_is_retried_after_the_backoff_and_the_call_succeeds() -> None:
    done = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
    replies = iter([http_reply(429, b"{}", "Retry-After: nan"), ok(done)])
    with raw_http_server(lambda req: next(replies)) as base:
        client = chat(base, retries=1)
        try:
            reply, attempts = client.complete({"model": "m", "messages": []}, 1)
        finally:
            client.close()
    assert reply == done
    assert [(a["status"], a["waited_s"]) for a in attempts] == [(429, 0.0), (200, 0.01)]  # backoff_s * 2**0


def _recorded_text(run: Path) -> str:
    """Every byte of the run's files, and the parquet tables decoded (their pages may be compressed)."""
    import pyarrow.parquet as pq

    parts = [p.read_bytes().decode("latin-1") for p in sorted(run.rglob("*")) if p.is_file()]
    parts += [json.dumps(pq.read_table(p).to_pylist(), default=str) for p in sorted(run.rglob("*.parquet"))]
    return "\n".join(parts)


E2E = {
    "h11 bad header line": (
        "act",
        bad_header,
        f"InfrastructureError: lost the connection to {{url}} and 0 retries failed (RemoteProtocolError {UNSHOWN})",
    ),
    "dtype echoing the token": (
        "act",
        HTTP_CASES["dtype echoing the token"][1],
        "EpisodeError: " + HTTP_CASES["dtype echoing the token"][2],
    ),
}


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("label", list(E2E))
async def test_a_hostile_reply_reaches_no_run_file_cli_output_grade_json_or_mcp_result(
    label: str, tmp_path: Path
) -> None:
    import anyio

    from cli_in_process import invoke
    from mcp_support import mcp_session, structured

    stage, hostile, expected = E2E[label]
    root = tmp_path / "runs"
    with raw_http_server(http_peer(stage, hostile)) as base:
        url = f"{base}/act"
        made = invoke(
            "eval", "--env", "scripted/reach", "--policy", base, "--episodes", "1", "--max-steps", "3",
            "--policy-options", json.dumps({"retries": 0}), "--out", root / "run",
        )  # fmt: skip
        graded = invoke("grade", root / "run", "--json")
        with anyio.fail_after(120):
            async with mcp_session(root, "--allow-policy", url) as s:
                got = structured(await s.call_tool("get_run", {"run_id": "run"}))
                rollout = await s.call_tool(
                    "run_policy_rollout", {"policy": url, "env": "scripted/reach", "n_episodes": 1, "max_steps": 3}
                )
    assert made.returncode == 1, made.stderr
    (episode,) = json.loads(graded.stdout)["episodes"]
    assert episode["error"] == expected.format(url=url)
    mcp_text = json.dumps(got) + json.dumps(rollout.model_dump(mode="json"))
    for where in (made.stdout + made.stderr, graded.stdout + graded.stderr, mcp_text, _recorded_text(root)):
        assert TOKEN not in where and "SERVERBODY" not in where
    assert expected.format(url=url) in json.dumps(got)


def test_a_providers_error_body_with_the_key_transformed_reaches_no_run_file_or_cli_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli_in_process import invoke

    def answer(req: RawRequest) -> bytes:
        if req.method == "GET":
            return ok({"data": [{"id": "m"}]})
        return http_reply(400, provider_body(req.headers.get("authorization", ""), "invalid_request_error"))

    with raw_http_server(answer) as base:
        monkeypatch.setenv("ROLLBENCH_AGENT_BASE_URL", f"{base}/v1")
        monkeypatch.setenv("ROLLBENCH_AGENT_API_KEY", KEY)
        made = invoke(
            "eval", "--env", "scripted/reach", "--policy", "agent:local/m", "--episodes", "1", "--max-steps", "3",
            "--policy-options", json.dumps({"images": False}), "--out", tmp_path / "run",
        )  # fmt: skip
        graded = invoke("grade", tmp_path / "run", "--json")
    size = len(provider_body(f"Bearer {KEY}", "invalid_request_error"))
    (episode,) = json.loads(graded.stdout)["episodes"]
    assert episode["error"] == (
        f"InfrastructureError: the model API {base}/v1/chat/completions answered HTTP 400 (invalid_request_error), "
        f"a reply of {size} bytes {NOT_SHOWN}"
    )
    for where in (made.stdout + made.stderr, graded.stdout, _recorded_text(tmp_path / "run")):
        for secret in (KEY, KEY[::-1], KEY.upper(), "no. "):
            assert secret not in where


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
