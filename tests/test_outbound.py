"""Every client rollbench opens to a named server follows no redirect and ends each exchange by a total deadline
(issue 42, "one bad run or peer costs only itself"; hostile round 5, F3 and F4; :mod:`rollbench.wire.outbound`).

Servers are real loopback sockets (tests/raw_servers.py): one answering every request with a redirect to a second
that records what reaches it (the oracle for "followed": it must see nothing), and one that sends a status line and
then one byte every half second (without a total deadline a request would wait for hours)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from raw_servers import raw_server, redirect
from rollbench.core.contracts import ConfigError, InfrastructureError
from rollbench.core.registry import make_policy
from rollbench.dashboard.peers import Peer, PeerError
from rollbench.policies.agent.client import ChatClient

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
    return f"{probed} / {str(err.value).split(': ', 1)[0]}"


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
        "HTTP {status}",
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
