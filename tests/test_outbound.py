"""Every client rollbench opens to a named server follows no redirect and ends each exchange by a total deadline
(issue 42, "one bad run or peer costs only itself"; hostile round 5, F3 and F4; :mod:`rollbench.wire.outbound`).

Servers are real loopback sockets (tests/raw_servers.py): one answering every request with a redirect to a second
that records what reaches it (the oracle for "followed": it must see nothing), and one that sends a status line and
then one byte every half second (without a total deadline a request would wait for hours)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli_in_process import invoke
from raw_servers import Handler, deaf_websocket, raw_server, redirect, trickle, trickling
from rollbench.core.contracts import ConfigError, InfrastructureError, Observation
from rollbench.core.registry import make_policy, resolve_tasks
from rollbench.dashboard.peers import Peer, PeerError
from rollbench.policies.agent.client import ChatClient
from rollbench.wire.outbound import http_client

REACH = resolve_tasks("scripted/reach")[0]

OPTIONS = {"connect_timeout_s": 5, "timeout_s": 5, "retries": 0}


def _ws_policy(url: str) -> str:
    with pytest.raises(ConfigError) as err:
        make_policy(url, OPTIONS)
    return str(err.value)


def _http_policy(url: str) -> str:
    with pytest.raises(ConfigError) as err:
        make_policy(url + "/act", OPTIONS)
    return str(err.value)


def _agent(url: str) -> str:
    client = ChatClient(url, "sk-x", timeout_s=5, connect_timeout_s=5, retries=0, backoff_s=0)
    try:
        probed = client.probe("m")
        with pytest.raises(InfrastructureError) as err:
            client.complete({"model": "m", "messages": []}, 0)
    finally:
        client.close()
    return f"{probed} / {str(err.value).split(' (not shown', 1)[0]}"


def _peer(url: str) -> str:
    with pytest.raises(PeerError) as err:
        Peer(url, "peer-token").get_json("/api/runs")
    return f"{err.value} ({err.value.status})"


CLIENTS: dict[str, tuple[Callable[[str], str], str, str]] = {
    # client: (what it does against URL, its Location scheme, what it says)
    "ws policy": (
        _ws_policy,
        "ws",
        "{url} answered the websocket handshake with HTTP {status}, a redirect, which rollbench never follows: name "
        "the server that serves the policy itself",
    ),
    "http policy": (_http_policy, "http", "the policy server {url}/act is not ready (GET {url}/act answered HTTP {status})"),
    "agent": (
        _agent,
        "http",
        "{{'models_endpoint_status': {status}, 'model_listed': None}} / the model API {url}/chat/completions answered "
        "HTTP {status}, a reply of 0 bytes",
    ),
    "peer dashboard": (_peer, "http", "it answered HTTP {status}, a redirect, which is never followed (502)"),
}  # fmt: skip
REDIRECTS = [(c, s, "another port") for c in CLIENTS for s in (301, 302, 303, 307, 308)] + [
    (c, 307, "the same server") for c in CLIENTS
]


@pytest.mark.parametrize(("client", "status", "where"), REDIRECTS, ids=["-".join(map(str, r)) for r in REDIRECTS])
def test_no_client_follows_a_redirect_and_the_error_names_the_status(client: str, status: int, where: str) -> None:
    use, scheme, says = CLIENTS[client]
    location = [""]
    with raw_server(lambda conn, _: None) as (other, reached):
        with raw_server(redirect(status, lambda: location[0])) as (first, _asked):
            port = other if where == "another port" else first  # the same server, another path: not followed either
            location[0] = f"{scheme}://127.0.0.1:{port}/elsewhere"
            url = f"{scheme}://127.0.0.1:{first}"
            said = use(url)
        assert reached == []
    assert said == says.format(url=url, status=status)
    assert "elsewhere" not in said  # the Location is never quoted


def test_websockets_still_follows_redirects_by_itself_so_the_guard_is_needed() -> None:
    """The reason for :func:`rollbench.wire.outbound.ws_connect`: websockets' own connect follows a 307 to another
    port. If a websockets release stops doing so, this fails and the guard can be revisited."""
    from websockets.sync.client import connect

    def accept_ws(conn: Any, data: bytes) -> None:
        conn.sendall(b"HTTP/1.1 400 No\r\nContent-Length: 0\r\n\r\n")

    from websockets.exceptions import InvalidStatus

    with raw_server(accept_ws) as (other, reached):
        with raw_server(redirect(307, lambda: f"ws://127.0.0.1:{other}/")) as (first, _), pytest.raises(InvalidStatus):
            connect(f"ws://127.0.0.1:{first}", open_timeout=5)  # the second server answers 400
        assert len(reached) == 1


# ------------------------------------------------------------------------------------------------- total deadlines
READY = {"ready": True, "metadata": {"needs_images": False}}


def _is_act(request: bytes) -> bool:
    return b'"instruction"' in request


def _is_completion(request: bytes) -> bool:
    return request.startswith(b"POST")


def _http_ready(url: str) -> str:
    with pytest.raises(ConfigError) as err:
        make_policy(url, {"connect_timeout_s": 1, "retries": 0})
    return str(err.value)


def _http_act(url: str) -> str:
    client = make_policy(url + "/act", {"timeout_s": 1, "retries": 0})
    try:
        client.reset(REACH, 0)
        with pytest.raises(InfrastructureError) as err:
            client.act(Observation(state=np.zeros(4, np.float32)), REACH.instruction)
    finally:
        client.close()
    return str(err.value)


def _agent_probe(url: str) -> str:
    client = ChatClient(url, "sk-x", timeout_s=1, connect_timeout_s=1, retries=0, backoff_s=0)
    with pytest.raises(ConfigError) as err:
        client.probe("m")
    client.close()
    return str(err.value)


def _agent_call(url: str) -> str:
    client = ChatClient(url, "sk-x", timeout_s=1, connect_timeout_s=1, retries=0, backoff_s=0)
    try:
        assert client.probe("m") == {"models_endpoint_status": 200, "model_listed": True}
        with pytest.raises(InfrastructureError) as err:
            client.complete({"model": "m", "messages": []}, 3)
    finally:
        client.close()
    return str(err.value)


def _peer_fetch(url: str) -> str:
    with pytest.raises(PeerError) as err:
        Peer(url, None).fetch("/api/runs", lambda chunk: None, 2**20, total_s=1)
    return f"{err.value} ({err.value.status})"


def _ws_handshake(url: str) -> str:
    with pytest.raises(ConfigError) as err:
        make_policy(url.replace("http://", "ws://"), {"connect_timeout_s": 1, "retries": 0})
    return str(err.value)


def _ws_trickle(conn: Any, _: bytes) -> None:
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\n")
    trickle(conn)


TRICKLES: dict[str, tuple[Handler, Callable[[str], str], str]] = {
    # case: (the server, what the client does against its URL, what the client says)
    "http readiness": (
        trickling(lambda r: True),
        _http_ready,
        "cannot reach the policy server {url}/act (ReadTimeout: no answer within the deadline); is `rollbench serve-policy --protocol http` or your /act server running there?",
    ),
    "http act": (trickling(_is_act, lambda r: READY), _http_act, "no reply from {url}/act within timeout_s=1 s"),
    "agent probe": (
        trickling(lambda r: True),
        _agent_probe,
        "cannot reach the model API at {url} (ReadTimeout: no answer within the deadline)",
    ),
    "agent call": (
        trickling(_is_completion, lambda r: {"data": [{"id": "m"}]}),
        _agent_call,
        "no reply from the model API {url}/chat/completions within timeout_s=1 s (turn 3)",
    ),
    "peer dashboard": (trickling(lambda r: True), _peer_fetch, "its answer took over 1 s (504)"),
    "ws handshake": (
        _ws_trickle,
        _ws_handshake,
        "cannot reach the policy server {ws} within 1 s (TimeoutError: no answer within the deadline); is `rollbench serve-policy` or your openpi server running there?",
    ),
}


@pytest.mark.parametrize("case", list(TRICKLES))
def test_a_server_trickling_its_headers_is_cut_off_at_the_total_deadline(case: str) -> None:
    """A status line, then one header byte every 0.5 s (each read well inside the per-read timeout): the call ends
    at its total deadline with the timeout as its reason; without one it would wait until the server gives up after
    120 s and fail with another reason."""
    handler, use, says = TRICKLES[case]
    with raw_server(handler) as (port, seen):
        url = f"http://127.0.0.1:{port}"
        said = use(url)
    assert seen
    assert said == says.format(url=url, ws=url.replace("http://", "ws://"))


@pytest.mark.slow
def test_eval_against_a_trickling_policy_server_ends_the_episode_as_an_infrastructure_error(tmp_path: Path) -> None:
    """Hostile round 5, F4 end to end: ``eval --policy http://...`` whose server trickles every act reply returns
    (in the time of its ``timeout_s``, not the server's), the episode an error of the infrastructure (docs/status.md:
    a served call that timed out), the run recorded."""
    with raw_server(trickling(_is_act, lambda r: READY)) as (port, _):
        url = f"http://127.0.0.1:{port}/act"
        proc = invoke(
            "eval", "--env", "scripted/reach", "--policy", url, "--episodes", "2", "--max-steps", "3", "--json",
            "--policy-options", '{"timeout_s": 2, "retries": 0}', "--out", tmp_path / "run",
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    episodes = json.loads(proc.stdout)["episodes"]
    assert [(e["termination_reason"], e["error_fault"], e["error"]) for e in episodes] == [
        ("error", "infrastructure", f"InfrastructureError: no reply from {url} within timeout_s=2 s")
    ] * 2


def test_the_deadline_is_installed_in_every_pool_of_a_client_even_with_a_proxy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """:func:`rollbench.wire.outbound.http_client` reaches into httpx's private pools (no public hook): this fails
    when httpx or httpcore move them, before any request goes out unbounded."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    client = http_client()
    try:
        pools = [client._transport, *client._mounts.values()]
        assert len(pools) == 2
        assert {type(t._pool._network_backend).__name__ for t in pools} == {"DeadlineBackend"}  # type: ignore[attr-defined]
    finally:
        client.close()


@pytest.mark.slow
def test_a_websocket_server_that_stops_reading_costs_the_call_its_timeout_not_a_hang() -> None:
    """websockets' ``send`` has no timeout: a request larger than the socket buffers, to a server that never reads,
    is cut off at ``timeout_s`` (the socket is shut down) and ends as the infrastructure's timeout."""
    from openpi_client import msgpack_numpy

    message = {"blob": np.zeros(64 << 20, np.uint8)}  # far more than loopback's socket buffers
    size = len(msgpack_numpy.Packer().pack(message))
    with raw_server(deaf_websocket) as (port, seen):
        url = f"ws://127.0.0.1:{port}"
        client = make_policy(url, {"timeout_s": 1, "retries": 0})
        try:
            with pytest.raises(InfrastructureError) as err:
                client._request(message)  # the transport under the act/reset calls: a message of any size
        finally:
            client.close()
    assert len(seen) == 1
    assert str(err.value) == f"{url} did not take a request of {size} bytes within timeout_s=1 s"


def test_every_outbound_client_is_made_by_rollbench_wire_outbound() -> None:
    """The class, not its instances: no module but wire/outbound.py opens an httpx client or a websocket connection
    itself (each would bypass the redirect refusal and the total deadline)."""
    import re

    import rollbench

    src = Path(rollbench.__file__).parent
    opens = re.compile(r"httpx\.(Client|AsyncClient|stream|get|post|put|request)\(|sync\.client import .*\bconnect\b")
    found = sorted(
        str(p.relative_to(src)) for p in src.rglob("*.py") if opens.search(p.read_text()) and p.name != "outbound.py"
    )
    assert found == []
