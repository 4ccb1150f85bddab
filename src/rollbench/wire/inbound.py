"""What every rollbench HTTP server holds for its peers: ``serve-policy --protocol http``, ``rollbench dashboard``
and ``rollbench mcp --transport http`` (hostile round 19, F3). The record of the bounds and its checks; the server
that applies them is :mod:`rollbench.wire.inbound_http` (imported only to serve: it imports uvicorn).

* **Request deadline** (``--request-timeout-s``, default :data:`DEFAULT_REQUEST_TIMEOUT_S`, 10 s, for the dashboard
  and MCP, whose requests are a few kB of JSON; serve-policy: 30 s, for bodies of camera images): a request's headers
  and body must arrive within that many seconds of the connection opening, or of the previous answer on a kept-alive
  connection. A connection whose headers do not arrive is closed; a request whose declared body does not arrive is
  answered 408 ``{"error": ...}`` and closed.
* **Answer deadline** (the same seconds; hostile round 21, F2): an answer is timed only by the peer's taking of it.
  A connection whose peer takes no byte of what the server has written for that long (it stopped reading) is
  aborted with a reset, and while an answer waits to be taken the server starts no further pipelined request and
  reads at most 64 kB of them. A long answer the peer keeps reading, however slowly (a video download, an MCP event
  stream), takes as long as it takes.
* **Connection cap** (``--max-connections``, default :data:`DEFAULT_MAX_CONNECTIONS`; serve-policy: the larger of
  that and 4 x ``--max-sessions``): a connection opened while that many are held is answered 503
  ``{"error": ...}`` with ``Retry-After`` and closed without being read, so a flood of idle connections, or of
  connections that stop reading their answers, costs the server at most that many sockets for about the deadline.
* **Out of file descriptors** (``ulimit -n``): the server keeps running. It stops accepting for a second (asyncio's
  own pause), says so in one plain line on stderr (at most every :data:`NOTICE_EVERY_S` seconds), and answers again
  once connections close.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rollbench.core.contracts import ConfigError

DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 256
MIN_SECONDS = 0.1  # lower limit of every seconds option of a server (1e-300 s is no bound: issue 42)
MAX_SECONDS = 86_400.0  # upper limit of every seconds option of a server (one day)
MAX_CONNECTIONS = 65_536  # upper limit of --max-connections (far above any file-descriptor limit)
KEEP_ALIVE_S = 5.0  # an idle kept-alive connection is closed after this many seconds (uvicorn's timer)
NOTICE_EVERY_S = 30.0  # the "out of file descriptors" line is printed at most this often


@dataclass(frozen=True)
class ConnectionBounds:
    """How long a request may take to arrive and how many connections a server holds.

    Attributes:
        request_timeout_s: seconds from a connection's opening (or its previous answer) until a request's headers
            and body have all arrived; past it the connection is closed, or a request whose body is short is
            answered 408. Also the longest the peer may take no byte of an answer before the connection is
            aborted. From :data:`MIN_SECONDS` to :data:`MAX_SECONDS`.
        max_connections: connections held at once; one more is answered 503. From 1 to :data:`MAX_CONNECTIONS`.

    Raises:
        ConfigError: a value out of range (NaN included), naming its option.
    """

    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        check_seconds("--request-timeout-s", self.request_timeout_s)
        if isinstance(self.max_connections, bool) or not 1 <= self.max_connections <= MAX_CONNECTIONS:
            raise ConfigError(f"--max-connections must be between 1 and {MAX_CONNECTIONS}, got {self.max_connections}")


def check_seconds(option: str, value: float) -> None:
    """ConfigError naming ``option`` unless ``value`` is from :data:`MIN_SECONDS` to :data:`MAX_SECONDS` seconds."""
    if not MIN_SECONDS <= value <= MAX_SECONDS:  # False for NaN too
        raise ConfigError(f"{option} must be between {MIN_SECONDS:g} and {MAX_SECONDS:g} seconds, got {value:g}")


def body_late(timeout_s: float) -> str:
    """The 408 message: the request's body did not arrive in time."""
    return f"the request body did not arrive within {timeout_s:g} s"


def too_many(max_connections: int) -> str:
    """The 503 message: the server holds its connection cap."""
    return (
        f"this server already holds its limit of {max_connections} connections (--max-connections); "
        "try again in a moment"
    )


def error_reply(status: int, reason: str, message: str, retry_after_s: int | None = None) -> bytes:
    """A complete HTTP/1.1 answer ``{"error": message}`` that closes the connection (written by the server itself,
    outside any app: bytes, ``Content-Length`` set)."""
    body = json.dumps({"error": message}).encode()
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *([f"retry-after: {retry_after_s}"] if retry_after_s is not None else []),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
