"""The sessions ``rollbench mcp --transport http`` holds: at most ``--max-sessions``, none idle past
``--session-idle-s``, and a new client always let in while some session has no call in progress.

Every ``initialize`` POST opens a streamable-HTTP session in the MCP SDK's ``StreamableHTTPSessionManager`` (a task,
its streams, a few kB), kept until the client deletes it or it has been idle for the idle timeout. The SDK's own
defaults (10,000 sessions, 30 minutes) let one client lock every other out: about 10,000 initializes that are never
used again, sent in under a minute on loopback, and the SDK answered 503 "Too many open sessions" to everyone for
half an hour. Here:

* the SDK's own idle timeout and session cap are set to ``--session-idle-s`` (default
  :data:`DEFAULT_SESSION_IDLE_S`) and ``--max-sessions`` (default :data:`DEFAULT_MAX_SESSIONS`): a session with no
  call in progress (no POST of it being answered; an open standalone event stream does not count,
  :mod:`rollbench.mcp.inflight`) for that long is closed, its event stream with it;
* when a new session would pass the cap, the least recently used session with no call in progress is closed first
  (evicted, by the same means as the idle timeout: its idle scope is cancelled, and it is forgotten at once), so a
  new client gets in and an old idle one is dropped. A request naming a closed or evicted session gets the SDK's
  own 404 ``Session not found``; the client initializes again. A session that is answering a call (a rollout in
  progress, or waiting for a slot) is never evicted;
* only when every session has a call in progress is a new one answered 503 ``{"error": ...}`` naming the limit and
  the option, with ``Retry-After: 1``.

Memory and work stay bounded: at most ``--max-sessions`` sessions, and choosing one to evict looks at each once.
The SDK (pinned, ``mcp==2.3.0``) has no eviction of its own; it is added by replacing one method of the session
manager instance, ``_admit_session`` (the admission decision, made under the manager's creation lock), so the rest
of the SDK's session handling is its own. Each session's ``idle_scope.deadline`` (public; kept by
:class:`~rollbench.mcp.inflight.SessionRequests` to the last use plus the idle timeout while no POST is in flight)
tells when it was last used; the SDK sets it infinite while a request of it comes in.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.wire.inbound import check_seconds

log = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 64
DEFAULT_SESSION_IDLE_S = 600.0
MAX_SESSIONS = 1024  # upper limit of --max-sessions (as serve-policy's): each session is a task and its streams
RETRY_AFTER_S = 1


@dataclass(frozen=True)
class SessionBounds:
    """How many MCP sessions the HTTP server holds and how long an idle one lives.

    Attributes:
        max_sessions: sessions held at once; a new one past it evicts the least recently used idle session (503 if
            every session has a call in progress). From 1 to :data:`MAX_SESSIONS`.
        session_idle_s: seconds a session may go with no call in progress before it is closed. From
            :data:`~rollbench.wire.inbound.MIN_SECONDS` to :data:`~rollbench.wire.inbound.MAX_SECONDS`.

    Raises:
        ConfigError: a value out of range (NaN and infinity included), naming its option.
    """

    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_s: float = DEFAULT_SESSION_IDLE_S

    def __post_init__(self) -> None:
        if isinstance(self.max_sessions, bool) or not 1 <= self.max_sessions <= MAX_SESSIONS:
            raise ConfigError(f"--max-sessions must be between 1 and {MAX_SESSIONS}, got {self.max_sessions}")
        check_seconds("--session-idle-s", self.session_idle_s)


class SessionsBusy(Exception):
    """Every one of the ``max_sessions`` sessions has a call in progress: a new one cannot be admitted (503)."""

    def __init__(self, max_sessions: int) -> None:
        super().__init__(busy(max_sessions))
        self.max_sessions = max_sessions


def busy(max_sessions: int) -> str:
    """The 503 message: every session is busy."""
    return (
        f"this server already holds its limit of {max_sessions} MCP sessions (--max-sessions), each with a call in "
        "progress; try again in a moment"
    )


def app_options(bounds: SessionBounds) -> dict[str, Any]:
    """The keyword arguments of ``MCPServer.streamable_http_app`` that set the SDK's own idle timeout and cap."""
    return {"session_idle_timeout": bounds.session_idle_s, "max_sessions": bounds.max_sessions}


def bound_sessions(app: Any, manager: Any, bounds: SessionBounds) -> Any:
    """Make ``manager`` (the ``StreamableHTTPSessionManager`` of the Starlette ``app``, built with
    :func:`app_options`) evict the least recently used idle session when a new one would pass
    ``bounds.max_sessions``, and ``app`` answer 503 ``{"error": ...}`` when none is idle. Returns the ASGI app to
    serve: ``app`` behind :class:`~rollbench.mcp.inflight.SessionRequests` (only a POST in flight keeps a session
    busy; a closed POST cancels its call). Call before serving."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from rollbench.mcp.inflight import SessionRequests

    requests = SessionRequests(manager, bounds.session_idle_s)
    admit = manager._admit_session  # sync, called under the manager's session creation lock

    def admit_or_evict(requestor: Any) -> Any:
        sessions = manager._server_instances
        while len(sessions) >= bounds.max_sessions:
            victim = least_recent_idle(sessions, requests.posting)
            if victim is None:
                raise SessionsBusy(bounds.max_sessions)
            evict(manager, victim)
        return admit(requestor)

    async def refuse(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, 503, headers={"retry-after": str(RETRY_AFTER_S)})

    manager._admit_session = admit_or_evict
    app.add_exception_handler(SessionsBusy, refuse)
    return requests.app(app)


def least_recent_idle(sessions: dict[str, Any], posting: Callable[[str], bool] = lambda _: False) -> str | None:
    """The id of the session to evict from ``sessions`` (id -> the SDK's transport): one already ending, else the
    one idle longest (its idle countdown started first), else one with no POST in flight whose countdown the SDK has
    not restored yet (its infinite deadline: a request of it was just answered, the SDK's handler not yet returned;
    counted busy, one ``initialize`` right after another with ``--max-sessions 1`` was answered 503); None when
    every session has a POST in flight (``posting``) or has not started its task."""
    chosen, oldest, suspended = None, math.inf, None
    for session_id, transport in sessions.items():
        scope = transport.idle_scope  # None until the session's task has started
        if scope is None:
            continue
        if scope.cancel_called:  # timed out, its task not yet ended: it is going anyway
            return session_id
        if posting(session_id):
            continue
        if scope.deadline < oldest:
            chosen, oldest = session_id, scope.deadline
        elif suspended is None and scope.deadline == math.inf:
            suspended = session_id
    return chosen if chosen is not None else suspended


def evict(manager: Any, session_id: str) -> None:
    """Close the session as the SDK's idle timeout does (its idle scope cancelled: its task ends and terminates the
    transport), forgetting it first, so its id answers 404 from now on and its slot is free at once."""
    transport = manager._server_instances.pop(session_id)
    manager._session_owners.pop(session_id, None)
    if transport.idle_scope is not None:
        transport.idle_scope.cancel()
    log.info("rollbench mcp: session %s evicted (least recently used; --max-sessions)", session_id[:64])
