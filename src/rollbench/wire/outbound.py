"""Every connection rollbench opens to a server someone named: policy servers (``ws://``, ``http://``), model APIs
(``agent:``) and peer dashboards. Two rules hold for all of them (issue 42, "one bad run or peer costs only itself";
hostile round 5, F3 and F4):

**No redirect is followed.** A server that answers ``3xx`` is an error naming that status; its ``Location`` is
neither followed nor quoted. Following one would let a server allowed by ``rollbench mcp --allow-policy URL`` send
the rollout to a server that is not allowed, with run.json naming the first. httpx never follows unless asked;
websockets' sync ``connect`` (17.4, the pinned version) follows up to ten redirects and has no switch to stop it, so
:func:`ws_connect` passes the documented escape hatch ``create_connection``: a
:class:`~websockets.sync.client.ClientConnection` whose handshake turns a 3xx answer into :class:`RedirectRefused`,
an error that websockets' redirect loop does not take for a redirect (tests/test_outbound.py checks that websockets
still follows by itself, and that no client does).
"""

from __future__ import annotations

import functools
from typing import Any


class RedirectRefused(Exception):
    """A server answered a websocket handshake with a redirect (``status``, 3xx), which is never followed."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the handshake was answered HTTP {status}, a redirect (rollbench never follows one)")
        self.status = status


def ws_connect(url: str, **options: Any) -> Any:
    """``websockets.sync.client.connect(url, **options)`` that refuses a redirect: :class:`RedirectRefused` (a
    :class:`websockets.exceptions.InvalidHandshake`) instead of a connection to the ``Location`` it names."""
    from websockets.sync.client import connect

    return connect(url, create_connection=_no_redirect_connection(), **options)


@functools.cache
def _no_redirect_connection() -> type:
    from websockets.exceptions import InvalidHandshake, InvalidStatus
    from websockets.sync.client import ClientConnection

    class Refused(RedirectRefused, InvalidHandshake):
        pass

    class NoRedirect(ClientConnection):
        """A client connection whose handshake answered 3xx raises :class:`RedirectRefused`: websockets follows
        only an ``InvalidStatus`` carrying a redirect, so this one ends the connect."""

        def handshake(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().handshake(*args, **kwargs)
            except InvalidStatus as exc:
                status = exc.response.status_code
                if 300 <= status < 400:
                    raise Refused(status) from None
                raise

    return NoRedirect
