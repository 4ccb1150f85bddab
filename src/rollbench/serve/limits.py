"""What a policy server accepts and the ways a request is refused: :class:`Limits`, the session errors, and the
``--fault`` injections of ``rollbench serve-policy`` (for tests and drills)."""

from __future__ import annotations

from dataclasses import dataclass

from rollbench.core.types import ConfigError, RollbenchError
from rollbench.wire.decode import DEFAULT_MAX_REQUEST_BYTES

FAULTS = ("wrong-shape", "malformed", "error", "short-batch", "slow:SECONDS", "die-after:N")
DIE_EXIT_CODE = 70


class MalformedReply(Exception):
    """Raised by the ``malformed`` fault: the protocol layer then sends bytes that are not a valid reply."""


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
        request_timeout_s: seconds to receive one HTTP request (headers and body) or a websocket handshake.
    """

    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_sessions: int = 64
    session_idle_s: float = 60.0
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1024 or self.max_sessions < 1:
            raise ConfigError("--max-request-mb must be at least 0.001 and --max-sessions at least 1")
        if self.session_idle_s <= 0 or self.request_timeout_s <= 0:
            raise ConfigError("--session-idle-s and --request-timeout-s must be positive")


def parse_fault(fault: str | None) -> tuple[str, float] | None:
    """``--fault`` -> ``(kind, number)``; raises ConfigError naming the valid faults."""
    if not fault:
        return None
    kind, _, arg = fault.partition(":")
    try:
        if kind in ("wrong-shape", "malformed", "error", "short-batch") and not arg:
            return kind, 0.0
        if kind in ("slow", "die-after") and float(arg) >= 0:
            return kind, float(arg)
    except ValueError:
        pass
    raise ConfigError(f"unknown --fault {fault!r}; valid faults: {', '.join(FAULTS)}")
