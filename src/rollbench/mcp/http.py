"""``rollbench mcp --transport http``: the MCP server over streamable HTTP, with a bearer token and Host/Origin checks.

Anyone who can reach the server can run policies (including ``ws://``/``http://`` URLs it then connects to) and
write under ``--root``, so:

* a ``--host`` that is not a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``) refuses to start without
  ``--token`` (or the ``ROLLBENCH_MCP_TOKEN`` environment variable), a secret of at least :data:`MIN_TOKEN` characters;
* with a token, every HTTP request must carry ``Authorization: Bearer TOKEN`` (compared in constant time,
  ``hmac.compare_digest``), else 401 ``{"error": ...}`` with ``WWW-Authenticate: Bearer`` (RFC 6750);
* the MCP SDK's DNS-rebinding protection (``TransportSecuritySettings``: the ``Host`` header must be an allowed
  name, a browser's ``Origin`` an allowed ``http(s)://`` origin; else 421 / 403) stays on for every host: on
  loopback for the SDK's own loopback names, otherwise for the bound address and the names given with
  ``--allow-host``. Binding a wildcard address (``0.0.0.0``, ``::``) requires ``--allow-host``, since the names
  clients use cannot be guessed.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any

from rollbench.core.types import ConfigError
from rollbench.wire.guard import LOOPBACK_NAMES, MIN_TOKEN, is_loopback

TOKEN_ENV = "ROLLBENCH_MCP_TOKEN"


def allowed_names(host: str, token: str | None, allow_hosts: Sequence[str]) -> list[str]:
    """The host names the server answers to; raises ConfigError for an unsafe or unusable combination."""
    if token is not None and len(token) < MIN_TOKEN:
        raise ConfigError(f"--token must be at least {MIN_TOKEN} characters long")
    loopback = is_loopback(host)
    if not loopback and token is None:
        raise ConfigError(
            f"--host {host} is not a loopback address: anyone who can reach it could run policies and write under "
            f"--root. Give --token (or {TOKEN_ENV}), a secret of at least {MIN_TOKEN} characters that clients send "
            "as 'Authorization: Bearer TOKEN', or bind 127.0.0.1"
        )
    names = [n.strip() for n in allow_hosts if n.strip()]
    if loopback:
        names += LOOPBACK_NAMES
    elif host not in ("0.0.0.0", "::"):
        names.append(f"[{host}]" if ":" in host else host)
    elif not names:
        raise ConfigError(
            f"--host {host} listens on every interface: name the host names clients use to reach this server with "
            "--allow-host NAME (repeatable); requests for other names are refused (DNS-rebinding protection)"
        )
    return list(dict.fromkeys(names))


def security(names: Sequence[str]) -> Any:
    """The MCP SDK's Host/Origin checks for ``names`` (any port)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [h for n in names for h in (n, f"{n}:*")]
    origins = [o for n in names for scheme in ("http", "https") for o in (f"{scheme}://{n}", f"{scheme}://{n}:*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401 (constant-time compare)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                from starlette.responses import JSONResponse

                reply = JSONResponse(
                    {"error": "unauthorized: send the server's token as 'Authorization: Bearer TOKEN'"},
                    status_code=401,
                    headers={"www-authenticate": "Bearer"},
                )
                await reply(scope, receive, send)
                return
        await self.app(scope, receive, send)


def run_http(server: Any, host: str, port: int, token: str | None, allow_hosts: Sequence[str]) -> None:
    """Serve ``server`` (an ``MCPServer``) at ``http://host:port/mcp`` until stopped; checks as in the docstring."""
    import uvicorn

    names = allowed_names(host, token, allow_hosts)
    app: Any = server.streamable_http_app(transport_security=security(names), host=host)
    if token is not None:
        app = BearerToken(app, token)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
