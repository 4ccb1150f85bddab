"""Requests that name sessions, on top of :mod:`rollbench.serve.sessions`: batch requests (both protocols) and the
websocket connection's message handling (see :mod:`rollbench.serve.batch` for the batch wire format)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rollbench.core.contracts import Observation
from rollbench.serve.batch import item_error, session_key
from rollbench.serve.limits import MalformedReply
from rollbench.serve.sessions import PolicyHost, Session
from rollbench.wire.act_request import check_for_task
from rollbench.wire.decode import ProtocolError

Locate = Callable[[Any], tuple[Session, Any]]  # batch item -> (its session, its observation request)


def handle_batch(host: PolicyHost, batch: Any, locate: Locate, decode: Any) -> dict[str, Any]:
    """Serve one batch request: ``{"batch": [entry, ...]}``, one entry per item, in order, each ``{"actions":
    float32 (k, action_dim)}`` or ``{"error", "status"}``. Raises ProtocolError for a batch that breaks the protocol
    (not a non-empty list, more items than ``--max-batch``, a session named twice)."""
    limit = host.batching.max_batch
    if not isinstance(batch, list) or not batch:
        raise ProtocolError('"batch" must be a non-empty list of act requests')
    if len(batch) > limit:
        raise ProtocolError(
            f"a batch of {len(batch)} observations exceeds this server's --max-batch {limit}; "
            f"send at most {limit} per request"
        )
    entries: list[dict[str, Any] | None] = [None] * len(batch)
    located: list[tuple[int, Session, Any]] = []
    for index, item in enumerate(batch):
        try:
            if not isinstance(item, Mapping):
                raise ProtocolError(f"a batch item must be a map, got {type(item).__name__}")
            located.append((index, *locate(item)))
        except Exception as exc:
            entries[index] = item_error(exc)
    keys = [s.key for _, s, _ in located]
    if len(set(keys)) != len(keys):
        raise ProtocolError("a batch names one session more than once; each item must be for its own session")
    calls: list[tuple[int, Session, Observation, str, dict[str, Any]]] = []
    for index, session, request in located:
        try:
            task = session.ensure_reset()
            obs_map = host.obs_map_for(task)
            obs, instruction = decode(request, obs_map)
            check_for_task(obs, task, obs_map, instruction)
        except Exception as exc:
            entries[index] = item_error(exc)
            continue
        record = host.act_record(session, task, obs, instruction)
        calls.append((index, session, obs, instruction, {**record, "batch": len(batch)}))
    t0 = time.perf_counter()
    try:
        answers = host.act_many([(s, o, i) for _, s, o, i, _ in calls]) if calls else []
    except MalformedReply:
        for *_, record in calls:
            host.log(**record, outcome="malformed reply (injected)")
        raise
    for (index, *_, record), answer in zip(calls, answers, strict=True):
        if isinstance(answer, BaseException):
            host.log(**record, outcome=f"{type(answer).__name__}: {answer}")
            entries[index] = item_error(answer)
        else:
            host.log(**record, outcome=f"actions {list(answer.shape)}")
            entries[index] = {"actions": answer}
    if host.injection and host.injection[0] == "short-batch" and len(entries) > 1:
        entries = entries[:-1]  # --inject short-batch: a server that loses one answer of a batch
    return {"batch": entries, "server_timing": {"infer_ms": 1e3 * (time.perf_counter() - t0)}}


def http_locate(host: PolicyHost) -> Locate:
    """A JSON /act batch item's session (by its ``session`` id, which a reset must have started)."""

    def locate(item: Mapping[str, Any]) -> tuple[Session, Any]:
        return host.get_session(session_key(item.get("session"), "every batch item: ")), item

    return locate


def slot_key(host: PolicyHost, connection: str, slot: Any) -> str:
    """The session key of websocket slot ``slot`` of ``connection``; ProtocolError unless ``0 <= slot <
    --max-sessions``."""
    if type(slot) is not int or not 0 <= slot < host.limits.max_sessions:
        raise ProtocolError(f'"slot" must be an integer from 0 to {host.limits.max_sessions - 1}')
    return f"{connection}/slot-{slot}"


class WsConnection:
    """The sessions of one websocket connection: its own (opened on connect; what openpi clients use) and its batch
    slots' (``{"slot": i, ...}``). A connection whose first slot reset arrives before any plain request gives its own
    session's instance back, so a batch client of B slots holds B sessions, not B + 1."""

    def __init__(self, host: PolicyHost, key: str) -> None:
        self.host, self.key = host, key
        self.session: Session | None = None
        self.slots: set[str] = set()

    def handle(self, request: Any) -> dict[str, Any]:
        """Serve one decoded message: a batch, a slot reset, or a plain (openpi) request on the connection's own
        session. Raises as :meth:`PolicyHost.handle` does."""
        from rollbench.wire.act_request import decode_openpi

        host = self.host
        if isinstance(request, Mapping) and "batch" in request:

            def locate(item: Mapping[str, Any]) -> tuple[Session, Any]:
                observation = item.get("observation")
                if not isinstance(observation, Mapping):
                    raise ProtocolError('every batch item needs "slot" and "observation" (a map)')
                return host.get_session(slot_key(host, self.key, item.get("slot"))), observation

            return handle_batch(host, request["batch"], locate, decode_openpi)
        if isinstance(request, Mapping) and "slot" in request:
            if "reset" not in request:
                raise ProtocolError('a message with "slot" must be a reset; send observations of slots in a "batch"')
            key = slot_key(host, self.key, request["slot"])
            if self.session is not None and self.session.task is None:  # a batch client: its own one is unused
                host.end_session(self.key)
                self.session = None
            slot_session = host.open_session(key, evictable=False)
            self.slots.add(key)
            return host.handle(slot_session, {"reset": request["reset"]}, decode_openpi)
        if self.session is None:
            self.session = host.open_session(self.key, evictable=False)
        return host.handle(self.session, request, decode_openpi)

    def close(self) -> None:
        """End every session of this connection (their instances return to the idle pool)."""
        self.host.end_session(self.key)
        for key in self.slots:
            self.host.end_session(key)
