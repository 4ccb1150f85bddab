"""``rollbench mcp --transport http``: the MCP server over streamable HTTP behind the shared network guard.

Anyone who can reach the server can run policies (including ``ws://``/``http://`` URLs it then connects to) and
write under ``--root``, so every request passes :class:`rollbench.wire.guard.Guard` (the rules serve-policy and the
dashboard share, applied by :func:`rollbench.wire.guard.asgi_guard`):

* a ``--host`` that is not a loopback address refuses to start without ``--token`` (or ``ROLLBENCH_MCP_TOKEN``), a
  secret of at least :data:`~rollbench.wire.guard.MIN_TOKEN` characters; a wildcard address needs ``--allow-host``;
* with a token, every request carries ``Authorization: Bearer TOKEN`` (constant-time compare), else 401
  ``{"error": ...}`` with ``WWW-Authenticate: Bearer`` (RFC 6750);
* ``Host`` must be a bound name (421), a browser's ``Origin`` the server's own (403), a body JSON (415).

The MCP SDK's own DNS-rebinding protection (``TransportSecuritySettings``) stays on as well, for the same names.

The server is :func:`rollbench.wire.inbound_http.bounded_server`, the one of every rollbench HTTP surface
(:mod:`rollbench.wire.inbound`): a request's headers and body must arrive within ``--request-timeout-s`` (else the
connection is closed, or a short body answered 408), a connection over ``--max-connections`` is answered 503, and
running out of file descriptors is one line on stderr, not the end of the process. An answer is timed only by the
client's taking of it: one whose bytes the client stops taking for the deadline is cut off; the event streams the
SDK answers with (``text/event-stream``) last as long as the session needs while the client reads them.

The sessions are bounded by :mod:`rollbench.mcp.sessions`: at most ``--max-sessions``, each closed after
``--session-idle-s`` with no call in progress (an open event stream alone is none), the least recently used idle one
evicted for a new client; a call whose POST closes before its answer is cancelled (:mod:`rollbench.mcp.inflight`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rollbench.mcp.sessions import SessionBounds, app_options, bound_sessions
from rollbench.wire.guard import Guard, asgi_guard
from rollbench.wire.inbound import ConnectionBounds

TOKEN_ENV = "ROLLBENCH_MCP_TOKEN"


@dataclass(frozen=True)
class HttpBinding:
    """Where and to whom ``--transport http`` answers: the bound ``host`` and ``port``, the ``token`` clients must
    send (None: none, loopback only), the other ``allow_hosts`` names, the connections' ``bounds`` and the MCP
    ``sessions``' bounds."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    allow_hosts: tuple[str, ...] = ()
    bounds: ConnectionBounds = field(default_factory=ConnectionBounds)
    sessions: SessionBounds = field(default_factory=SessionBounds)


def mcp_guard(host: str, token: str | None, allow_hosts: Sequence[str]) -> Guard:
    """The server's guard; ConfigError for an unsafe or unusable combination (before anything is created)."""
    return Guard.for_binding(
        host, token, allow_hosts, what="run policies and write under --root", token_option=f"--token (or {TOKEN_ENV})"
    )


def allowed_names(host: str, token: str | None, allow_hosts: Sequence[str]) -> list[str]:
    """The host names the server answers to; raises ConfigError for an unsafe or unusable combination."""
    return list(mcp_guard(host, token, allow_hosts).names)


def security(names: Sequence[str]) -> Any:
    """The MCP SDK's Host/Origin checks for ``names`` (any port)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [h for n in names for h in (n, f"{n}:*")]
    origins = [o for n in names for scheme in ("http", "https") for o in (f"{scheme}://{n}", f"{scheme}://{n}:*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def run_http(server: Any, binding: HttpBinding) -> None:
    """Serve ``server`` (an ``MCPServer``) at ``http://host:port/mcp`` until stopped; checks as in the docstring."""
    from rollbench.wire.inbound_http import bounded_server

    guard = mcp_guard(binding.host, binding.token, binding.allow_hosts)
    options = app_options(binding.sessions)
    app: Any = server.streamable_http_app(transport_security=security(guard.names), host=binding.host, **options)
    app = bound_sessions(app, server.session_manager, binding.sessions)  # (and rollbench.mcp.inflight)
    bounded_server(asgi_guard(app, guard), binding.bounds, "rollbench mcp", binding.host, binding.port).run()
