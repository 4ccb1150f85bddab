"""The one guard of every network surface: serve-policy (HTTP and websocket), the dashboard, MCP over HTTP.

Framework-neutral checks (:class:`Guard`), with a thin adapter per server: :func:`asgi_guard` (ASGI middleware:
serve-policy's FastAPI app and the MCP app), :mod:`rollbench.dashboard.security` (the dashboard, which adds its
``?token=`` login cookie) and serve-policy's websocket handshake hook (:mod:`rollbench.serve.server`).

Binding (:meth:`Guard.for_binding`, checked before a port opens; ConfigError otherwise):

* loopback (``127.0.0.0/8``, ``::1``, ``localhost``) by default; any other address needs a token;
* a token is at least :data:`MIN_TOKEN` characters, on every surface;
* a wildcard address (``0.0.0.0``, ``::``) needs ``--allow-host NAME``: the names clients use cannot be guessed.

Every request (:meth:`Guard.check`, in this order; the first failing rule answers):

1. Exactly one ``Host``, well-formed (:func:`parse_host`, ``urllib.parse.urlsplit``: no userinfo, path or
   whitespace, a port 0..65535), and each header the guard reads at most once (400, RFC 9112 3.2); its host must
   be one of the bound names: the loopback names on loopback, else the bound address, plus each ``--allow-host``
   (421). This stops DNS rebinding (a page on a name the attacker controls that resolves to 127.0.0.1);
   ``127.0.0.1:PORT@evil.com`` names ``evil.com`` and is refused.
2. With a token: ``Authorization: Bearer TOKEN`` (RFC 6750), openpi's ``Authorization: Api-Key TOKEN``, or the
   surface's cookie, compared in constant time (``hmac.compare_digest``) (401).
3. Cross-origin: an ``Origin`` header, when present (browsers send it on every websocket handshake, every
   cross-origin fetch and every POST), must be ``http(s)://`` + the request's own ``Host`` (403; ``null`` is
   refused too); a state-changing request's ``Sec-Fetch-Site``, when present, must be ``same-origin`` or ``none``
   (403).
4. A request carrying a body (POST, PUT, PATCH, or any method with a non-empty body) must declare
   ``Content-Type: application/json``, in UTF-8 if a charset is named (415): an HTML form or a ``text/plain`` fetch, the two cross-site requests
   a browser sends without asking, can never be accepted.

A refusal is ``(status, message)``; adapters answer it as ``{"error": message}`` (websocket: the HTTP status of
the refused handshake).
"""

from __future__ import annotations

import email.message
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from rollbench.core.contracts import ConfigError

MIN_TOKEN = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("0.0.0.0", "::")
TOKEN_ENV = "ROLLBENCH_SERVER_TOKEN"  # what rollbench's ws:// and http:// policy clients send as their bearer token
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_BODY_METHODS = ("POST", "PUT", "PATCH")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_host(header: str) -> str | None:
    """The host of a ``Host`` header (RFC 9110 7.2: ``uri-host [":" port]``), lower case, an IPv6 address in
    brackets: ``127.0.0.1:8000`` -> ``127.0.0.1``, ``[::1]:80`` -> ``[::1]``. Parsed by ``urllib.parse.urlsplit``
    as the authority of ``//HEADER``; None for a value that is not one: empty, with userinfo
    (``127.0.0.1:8000@evil.com``, whose host is ``evil.com``), a path, query or fragment, whitespace or control
    characters, or a port that is not an integer 0..65535."""
    value = header.strip()
    if not value or not value.isascii() or any(c in value for c in "@/?#\\") or not value.isprintable():
        return None
    if any(c.isspace() for c in value):
        return None
    try:
        parts = urlsplit("//" + value)
        port = parts.port  # ValueError for a port that is not an integer in range
    except ValueError:
        return None
    if parts.username is not None or parts.password is not None or parts.path or not parts.hostname:
        return None
    del port  # any valid port (or none, or an empty one: RFC 3986 3.2.3) is accepted
    host = parts.hostname
    return f"[{host}]" if ":" in host else host


def host_name(header: str) -> str:
    """:func:`parse_host`, or ``""`` (a name no server answers to) for a malformed value."""
    return parse_host(header) or ""


def header_values(headers: Any, name: str) -> list[str]:
    """Every value of header ``name`` in ``headers``: a websockets ``Headers`` (``get_all``), a Starlette
    ``Headers`` (``getlist``), :class:`MultiHeaders`, or a plain mapping (one value at most)."""
    for attr in ("get_all", "getlist"):
        many = getattr(headers, attr, None)
        if callable(many):
            return list(many(name))
    value = headers.get(name)
    return [] if value is None else [value]


class MultiHeaders(dict[str, str]):
    """Lower-case header name -> its first value, keeping every value (``get_all``): what :func:`asgi_guard`
    builds from an ASGI scope's header list so that a repeated header is seen."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self._all: dict[str, list[str]] = {}
        for k, v in pairs:
            self._all.setdefault(k.lower(), []).append(v)
            self.setdefault(k.lower(), v)

    def get_all(self, name: str) -> list[str]:
        return list(self._all.get(name.lower(), []))


GUARDED_HEADERS = ("host", "authorization", "origin", "sec-fetch-site", "content-type", "content-length", "cookie")
"""The headers the guard decides on: each must appear at most once (a second Host is RFC 9112's 400)."""


def client_headers() -> dict[str, str]:
    """What rollbench's ``ws://`` / ``http://`` policy clients add to every request: ``Authorization: Bearer``
    with ``$ROLLBENCH_SERVER_TOKEN`` when it is set (never recorded in run.json), else nothing."""
    import os

    token = os.environ.get(TOKEN_ENV)
    return {"Authorization": f"Bearer {token}"} if token else {}


def check_token(token: str | None) -> None:
    """ConfigError for a token shorter than :data:`MIN_TOKEN` characters."""
    if token is not None and len(token) < MIN_TOKEN:
        raise ConfigError(f"--token must be at least {MIN_TOKEN} characters long (a random secret)")


@dataclass(frozen=True)
class Guard:
    """The checks of one server: ``names`` its ``Host`` may be (lower case, no port), its ``token`` (None: none),
    and the ``cookie`` that may carry the token (the dashboard's)."""

    names: tuple[str, ...]
    token: str | None = None
    cookie: str | None = None

    @classmethod
    def for_binding(
        cls,
        host: str,
        token: str | None,
        allow_hosts: Sequence[str] = (),
        *,
        what: str,
        token_option: str = "--token",
        cookie: str | None = None,
    ) -> Guard:
        """The guard of a server bound to ``host``; ConfigError for an unsafe or unusable combination (see the
        module docstring). ``what`` says what a stranger could do (``run policies``), ``token_option`` how the
        token is given, in the error."""
        check_token(token)
        loopback = is_loopback(host)
        if not loopback and token is None:
            raise ConfigError(
                f"--host {host} is not a loopback address: anyone who can reach it could {what}. Give {token_option}, "
                f"a secret of at least {MIN_TOKEN} characters that clients send as 'Authorization: Bearer TOKEN', or "
                "bind 127.0.0.1"
            )
        names = [n.strip().lower() for n in allow_hosts if n.strip()]
        if loopback:
            names += LOOPBACK_NAMES
        elif host not in WILDCARDS:
            names.append(f"[{host}]" if ":" in host else host.lower())
        elif not names:
            raise ConfigError(
                f"--host {host} listens on every interface: name the host names clients use to reach this server "
                "with --allow-host NAME (repeatable); requests for other names are refused (DNS-rebinding protection)"
            )
        return cls(tuple(dict.fromkeys(names)), token, cookie)

    def _token_ok(self, headers: Mapping[str, str], cookies: Mapping[str, str] | None) -> bool:
        assert self.token is not None
        expected = self.token.encode()
        auth = headers.get("authorization") or ""
        scheme, _, given = auth.partition(" ")
        if scheme.lower() in ("bearer", "api-key") and hmac.compare_digest(given.strip().encode(), expected):
            return True
        got = (cookies or {}).get(self.cookie) if self.cookie else None
        return got is not None and hmac.compare_digest(got.encode(), expected)

    def check_host(self, headers: Any) -> tuple[int, str] | None:
        """None when ``headers`` hold each guarded header at most once and exactly one well-formed ``Host`` naming
        this server; else 400 (missing, repeated or malformed: RFC 9112 3.2) or 421 (another name)."""
        for header in GUARDED_HEADERS:
            if len(header_values(headers, header)) > 1:
                return 400, f"more than one {header.title()} header; send it once"
        values = header_values(headers, "host")
        if not values:
            return 400, "no Host header"
        name = parse_host(values[0])
        if name is None:
            return 400, f"Host {values[0]!r} is not host[:port] (no user info, path or spaces)"
        if name not in self.names:
            return 421, f"Host {values[0]!r} is not a name this server answers to ({', '.join(self.names)})"
        return None

    def check(
        self,
        method: str,
        headers: Any,
        cookies: Mapping[str, str] | None = None,
        websocket: bool = False,
    ) -> tuple[int, str] | None:
        """None when the request may proceed, else ``(HTTP status, message)``. ``headers``: case-insensitive or
        lower-case keys; a multi-valued kind (see :func:`header_values`) lets repeated headers be refused."""
        method = method.upper()
        refused = self.check_host(headers)
        if refused is not None:
            return refused
        host = headers.get("host") or ""
        if self.token is not None and not self._token_ok(headers, cookies):
            return 401, "unauthorized: send the server's token as 'Authorization: Bearer TOKEN'"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in (f"http://{host.lower()}", f"https://{host.lower()}"):
            return 403, f"cross-origin request from {origin} refused"
        if (websocket or method not in _SAFE_METHODS) and headers.get("sec-fetch-site", "none") not in (
            "same-origin",
            "none",
        ):
            return 403, "cross-site request refused"
        length = headers.get("content-length")
        has_body = method in _BODY_METHODS or (length not in (None, "0")) or "transfer-encoding" in headers
        if has_body and not websocket and (why := not_json_media(headers.get("content-type"))):
            return 415, why
        return None


def not_json_media(value: str | None) -> str | None:
    """Why a request's ``Content-Type`` header ``value`` is not JSON in UTF-8 (one line), or None: the media type must
    be ``application/json`` and a ``charset`` parameter, when given, ``utf-8`` (``charset=utf-7`` is refused: RFC 8259
    JSON is UTF-8; hostile8 F8); a parameter named twice (``charset=utf-8; charset=utf-7``: which one holds is up to
    the reader) is refused too (hostile round 15, F6). Parsed by the standard library's MIME header parser
    (:class:`email.message.Message`, which lowers parameter names), not by splitting."""
    msg = email.message.Message()
    msg["content-type"] = value or ""
    if not value or msg.get_content_type() != "application/json":
        return "send the body as Content-Type: application/json"
    names = [name for name, _ in (msg.get_params() or [])[1:]]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        return f"send the body as Content-Type: application/json with each parameter once ({twice[0]} is repeated)"
    charset = msg.get_param("charset")
    if charset is not None and str(charset).strip().lower() not in ("utf-8", "utf8"):
        return "send the body as Content-Type: application/json in UTF-8 (no other charset)"
    return None


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def lower_case_names(scope: dict[str, Any]) -> dict[str, Any]:
    """``scope`` with its ``Host`` and ``Origin`` values in lower case: scheme and host names are case-insensitive
    (RFC 9110 4.2.3, RFC 3986 3.1/3.2.2), and a check behind the guard that compares them as exact strings (the MCP
    SDK's ``TransportSecuritySettings``) then agrees with the guard, which has already accepted them (hostile
    round 13 F13: ``Host: LOCALHOST:PORT`` got the SDK's 421)."""
    names = (b"host", b"origin")
    headers = [(k, v.lower() if k.lower() in names else v) for k, v in scope.get("headers") or []]
    return {**scope, "headers": headers}


def asgi_guard(app: ASGIApp, guard: Guard) -> ASGIApp:
    """ASGI middleware applying ``guard`` to every HTTP request and websocket handshake of ``app``; a refusal is
    ``{"error": message}`` with its status (401 adds ``WWW-Authenticate: Bearer``), a refused websocket is closed
    before it is accepted (the server answers 403). ``app`` sees an accepted request's ``Host`` and ``Origin`` in
    lower case (:func:`lower_case_names`)."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        headers = MultiHeaders([(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers") or []])
        websocket = scope["type"] == "websocket"
        refused = guard.check(scope.get("method", "GET"), headers, websocket=websocket)
        if refused is None:
            await app(lower_case_names(scope), receive, send)
        elif websocket:
            await send({"type": "websocket.close", "code": 1008})
        else:
            body = json.dumps({"error": refused[1]}).encode()
            extra = [(b"www-authenticate", b"Bearer")] if refused[0] == 401 else []
            await send(
                {
                    "type": "http.response.start",
                    "status": refused[0],
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                        *extra,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

    return guarded
