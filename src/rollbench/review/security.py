"""Access control of the dashboard (an HTTP middleware) and the binding rule.

* Binding: 127.0.0.1 by default; :func:`check_binding` refuses a non-loopback ``--host`` without ``--token``.
* Token (when set): every request must carry it, as ``Authorization: Bearer TOKEN`` or the ``rollbench_token``
  cookie; ``GET ...?token=TOKEN`` sets that cookie (HttpOnly, SameSite=Strict) and redirects to the same URL
  without the token. Compared with :func:`hmac.compare_digest` (constant time). Wrong or missing: 401.
* State-changing requests (anything but GET/HEAD/OPTIONS) from a browser must be same-origin: an ``Origin``
  header, when present, must equal the request's own origin, and ``Sec-Fetch-Site``, when present, must be
  ``same-origin`` or ``none`` (403 otherwise). Without a token, a non-browser client (no ``Origin``) may write: the
  server is then reachable from this machine only. They also need ``Content-Type: application/json`` (415), which
  an HTML form cannot send, and bodies are capped at 64 kB (413).
* Without a token, the ``Host`` header must name a loopback address (``127.0.0.1``, ``localhost``, ``[::1]``),
  which stops DNS-rebinding pages from reaching the server through a name they control (421).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from rollbench.core.types import ConfigError
from rollbench.wire.guard import is_loopback

COOKIE = "rollbench_token"
MAX_BODY_BYTES = 64 * 1024
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def check_binding(host: str, token: str | None) -> None:
    """Raise ConfigError when ``host`` is not loopback and no token is set."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"--host {host} makes the dashboard reachable from other machines; give --token TOKEN as well "
            "(clients send it as 'Authorization: Bearer TOKEN' or open the page once with ?token=TOKEN)"
        )


def _deny(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _token_ok(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def make_guard(token: str | None) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    """The middleware function enforcing the rules of the module docstring."""

    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        method = request.method.upper()
        host_header = request.headers.get("host", "")
        hostname = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        if not token and not is_loopback(hostname):
            return _deny(421, f"Host {host_header!r} is not a loopback name; this dashboard serves 127.0.0.1 only")
        if token:
            query_token = request.query_params.get("token")
            if query_token is not None and method in ("GET", "HEAD"):
                if not _token_ok(query_token, token):
                    return _deny(401, "wrong token")
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + ("?" + urlencode(rest) if rest else "")
                resp = RedirectResponse(target, status_code=303)
                resp.set_cookie(COOKIE, token, httponly=True, samesite="strict")
                return resp
            auth = request.headers.get("authorization", "")
            bearer = auth[7:] if auth.lower().startswith("bearer ") else None
            if not (_token_ok(bearer, token) or _token_ok(request.cookies.get(COOKIE), token)):
                return _deny(401, "this dashboard needs its token (Authorization: Bearer TOKEN, or open ?token=TOKEN)")
        if method not in _SAFE_METHODS:
            origin = request.headers.get("origin")
            own = f"{request.url.scheme}://{host_header}"
            if origin is not None and origin != own:
                return _deny(403, f"cross-origin request from {origin} refused")
            if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
                return _deny(403, "cross-site request refused")
            length = request.headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
                return _deny(413, f"request body over {MAX_BODY_BYTES} bytes")
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return _deny(415, "send the body as Content-Type: application/json")
        return await call_next(request)

    return guard
