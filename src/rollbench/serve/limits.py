"""What a policy server accepts and the ways a request is refused: :class:`Limits`, the session errors, and the
``--inject`` failure injections of ``rollbench serve-policy`` (for tests and drills)."""

from __future__ import annotations

from dataclasses import dataclass

from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.wire.decode import DEFAULT_MAX_REQUEST_BYTES
from rollbench.wire.inbound import DEFAULT_MAX_CONNECTIONS, check_seconds

INJECTIONS = ("wrong-shape", "malformed", "error", "short-batch", "slow:SECONDS", "die-after:N")
DIE_EXIT_CODE = 70
MAX_REQUEST_MB = 1024.0  # upper limit of --max-request-mb (MiB): one frame/body is held in memory whole
MAX_SESSIONS = 1024  # upper limit of --max-sessions: each websocket session is a thread and a policy instance


def request_bytes(max_request_mb: float) -> int:
    """``--max-request-mb`` in bytes; ConfigError unless it is a number from 0.001 to :data:`MAX_REQUEST_MB`."""
    if not 0.001 <= max_request_mb <= MAX_REQUEST_MB:  # False for NaN too
        raise ConfigError(f"--max-request-mb must be between 0.001 and {MAX_REQUEST_MB:g}, got {max_request_mb:g}")
    return int(max_request_mb * 2**20)


class MalformedReply(Exception):
    """Raised by the ``malformed`` injection: the protocol layer then sends bytes that are not a valid reply."""


class SessionRefused(RollbenchError):
    """The server already has ``max_sessions`` live sessions (websocket close 1013, HTTP 503)."""


class SessionGone(RollbenchError):
    """An HTTP session id the server does not know (evicted, or from before a restart) (HTTP 410)."""


@dataclass(frozen=True)
class Limits:
    """What one server accepts; recorded in its metadata under ``"limits"``.

    Attributes:
        max_request_bytes: the largest websocket frame / HTTP body, bytes (default: ``rollbench.wire.decode.DEFAULT_MAX_REQUEST_BYTES``).
        max_sessions: live sessions at once.
        session_idle_s: an HTTP session idle this long (seconds) may be evicted when the server is full.
        request_timeout_s: seconds to receive one HTTP request (headers and body; :mod:`rollbench.wire.inbound`) or
            a websocket handshake, and the longest a client may leave an answer untaken (HTTP: no byte of it taken;
            websocket: a frame not taken in full) before its connection is reset.
    """

    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_sessions: int = 64
    session_idle_s: float = 60.0
    request_timeout_s: float = 30.0  # the dashboard's and MCP's 10 s (wire.inbound), for bodies of images

    def __post_init__(self) -> None:
        if not 1024 <= self.max_request_bytes <= MAX_REQUEST_MB * 2**20:
            raise ConfigError(f"--max-request-mb must be between 0.001 and {MAX_REQUEST_MB:g}")
        if not 1 <= self.max_sessions <= MAX_SESSIONS:
            raise ConfigError(f"--max-sessions must be between 1 and {MAX_SESSIONS}, got {self.max_sessions}")
        check_seconds("--session-idle-s", self.session_idle_s)
        check_seconds("--request-timeout-s", self.request_timeout_s)


def connection_cap(max_sessions: int) -> int:
    """serve-policy's default ``--max-connections`` (HTTP): the shared default, or 4 per session if that is more."""
    return max(DEFAULT_MAX_CONNECTIONS, 4 * max_sessions)


def parse_injection(option: str | None) -> tuple[str, float] | None:
    """``--inject`` (a failure injection) -> ``(kind, number)``; raises ConfigError naming the valid injections."""
    if not option:
        return None
    kind, _, arg = option.partition(":")
    try:
        if kind in ("wrong-shape", "malformed", "error", "short-batch") and not arg:
            return kind, 0.0
        if kind in ("slow", "die-after") and float(arg) >= 0:
            return kind, float(arg)
    except ValueError:
        pass
    raise ConfigError(f"unknown --inject {option!r}; valid injections: {', '.join(INJECTIONS)}")
