"""The dashboard's adapter of the network guard (:mod:`rollbench.wire.guard`, the rules every surface shares), plus
what only the dashboard has:

* Binding and every request: :class:`rollbench.wire.guard.Guard` (loopback by default; a non-loopback ``--host``
  needs ``--token`` of at least 16 characters; ``Host`` must be a bound name, 421; token, 401; cross-origin, 403;
  a body must be ``application/json``, 415).
* Token login for browsers: ``GET ...?token=TOKEN`` sets the ``rollbench_token`` cookie (HttpOnly,
  SameSite=Strict) and redirects to the same URL without the token; the cookie then carries the token.
* Bodies are capped at 64 kB (413).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from rollbench.core.format import is_decimal
from rollbench.wire.guard import Guard

COOKIE = "rollbench_token"
MAX_BODY_BYTES = 64 * 1024
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def dashboard_guard(host: str, token: str | None, allow_hosts: Sequence[str] = ()) -> Guard:
    """The dashboard's :class:`~rollbench.wire.guard.Guard`; ConfigError for an unsafe binding."""
    return Guard.for_binding(host, token, allow_hosts, what="read every run and write labels", cookie=COOKIE)


def check_binding(host: str, token: str | None, allow_hosts: Sequence[str] = ()) -> None:
    """Raise ConfigError when the dashboard may not bind ``host`` with ``token`` (see the module docstring)."""
    dashboard_guard(host, token, allow_hosts)


def _deny(status: int, message: str) -> Response:
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def make_guard(guard: Guard) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    """The Starlette middleware function enforcing ``guard`` and the dashboard's own rules (module docstring)."""

    async def middleware(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        method = request.method.upper()
        refused_host = guard.check_host(request.headers)  # one well-formed Host naming this dashboard
        if refused_host is not None:
            return _deny(*refused_host)
        query_token = request.query_params.get("token")
        if guard.token and query_token is not None and method in ("GET", "HEAD"):
            if not hmac.compare_digest(query_token.encode(), guard.token.encode()):
                return _deny(401, "wrong token")
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            resp = RedirectResponse(request.url.path + ("?" + urlencode(rest) if rest else ""), status_code=303)
            resp.set_cookie(COOKIE, guard.token, httponly=True, samesite="strict")
            return resp
        refused = guard.check(method, request.headers, request.cookies)
        if refused is not None:
            return _deny(*refused)
        length = request.headers.get("content-length")
        if (
            method not in _SAFE_METHODS
            and length is not None
            and (not is_decimal(length) or int(length) > MAX_BODY_BYTES)
        ):
            return _deny(413, f"request body over {MAX_BODY_BYTES} bytes")
        return await call_next(request)

    return middleware
