"""The stdio wire's line check: every line a client sends that is a request gets exactly one JSON-RPC answer.

The MCP SDK's stdio reader parses each line and, when it cannot (a truncated or not-JSON line, bytes that are not
UTF-8, a string holding a lone surrogate such as ``"\\ud800"``, a line nested too deep), hands the session an
exception that the session only logs: the client waiting on that request's id waited forever (hostile round 12,
F7). :class:`StrictLines` stands in front of that reader. It reads the wire's bytes line by line and passes each
line the SDK will accept on unchanged; every other line it answers itself, through the session's write stream:

* a line longer than :data:`MAX_LINE_BYTES` → ``-32600`` (id null); the rest of the line is read and dropped, never
  held, and the server keeps serving;
* a line that is not UTF-8, not JSON (RFC 8259, as :func:`rollbench.wire.decode.loads_json` reads it: no NaN, no key
  twice) or nested more than :data:`~rollbench.wire.decode.MAX_DEPTH` deep → ``-32700`` parse error (id null);
* a request whose params hold text that is not Unicode (a lone surrogate) → ``-32602`` with its id (``-32600`` when
  the surrogate is elsewhere in the request, id null when it is in the id itself);
* JSON that is not a JSON-RPC message the SDK reads (no ``jsonrpc``, a list...) → ``-32600`` with its id when it
  has a usable one, else id null; a message with a method and an id that is not a string or an integer (null, a
  number with a fraction, a boolean: MCP allows neither), which the SDK would take for a notification, → ``-32600``
  with id null.

A notification (a message with a ``method`` and no ``id``) is never answered: a refused one is only logged. A blank
line is skipped.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from rollbench.mcp.strict import utf8_text
from rollbench.wire.decode import ProtocolError, loads_json

log = logging.getLogger("rollbench.mcp")

MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line (bytes, newline excluded) the stdio server reads: 4 MiB, far above any tool call's arguments."""

_INVALID = "Invalid Request"
_CHUNK = 64 * 1024  # what is read at a time while an over-long line is dropped


class StrictLines:
    """The SDK's ``stdin`` (an async iterator of text lines) made of the checked lines of ``wire`` (the binary stdin);
    the answers to refused lines wait in :attr:`answers` until :meth:`send_answers` hands them to the session."""

    def __init__(self, wire: BinaryIO) -> None:
        self._wire = wire
        self._send: MemoryObjectSendStream[types.JSONRPCError]
        self.answers: MemoryObjectReceiveStream[types.JSONRPCError]
        self._send, self.answers = anyio.create_memory_object_stream[types.JSONRPCError](16)

    def __aiter__(self) -> StrictLines:
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await anyio.to_thread.run_sync(self._wire.readline, MAX_LINE_BYTES + 1)
            if not raw:
                self._send.close()
                raise StopAsyncIteration
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                await anyio.to_thread.run_sync(self._drop_rest)
                too_long = f"{_INVALID}: the line is longer than {MAX_LINE_BYTES} bytes"
                await self._send.send(error(None, types.INVALID_REQUEST, too_long))
                continue
            text, refusal = checked_line(raw)
            if refusal is not None:
                await self._send.send(refusal)
            elif text is not None:
                return text

    def _drop_rest(self) -> None:
        while (chunk := self._wire.readline(_CHUNK)) and not chunk.endswith(b"\n"):
            pass

    async def send_answers(self, write_stream: Any) -> None:
        """Hand every refusal's answer to the session's ``write_stream`` until the wire ends."""
        async with self.answers:
            async for answer in self.answers:
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await write_stream.send(SessionMessage(answer))


def error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    """The JSON-RPC error answer ``{"jsonrpc": "2.0", "id": request_id, "error": {"code", "message"}}``."""
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def checked_line(raw: bytes) -> tuple[str | None, types.JSONRPCError | None]:
    """One line of the wire (bytes, its newline included) -> ``(text, None)`` when the SDK is to read it, ``(None,
    answer)`` when it is refused with an answer, ``(None, None)`` when it is skipped (a blank line, a refused
    notification)."""
    if not raw.strip():
        return None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, error(None, types.PARSE_ERROR, "Parse error: the line is not UTF-8 text")
    try:
        value = loads_json(text)
    except ProtocolError as exc:
        return None, error(None, types.PARSE_ERROR, f"Parse error: {exc}")
    notification = isinstance(value, Mapping) and "method" in value and "id" not in value
    request_id = _usable_id(value)
    if not utf8_text(value):
        if notification:
            log.warning("a notification holding text that is not Unicode (a lone surrogate) was dropped")
            return None, None
        in_params = isinstance(value, Mapping) and not utf8_text(value.get("params"))
        code, what = (types.INVALID_PARAMS, "Invalid params") if in_params else (types.INVALID_REQUEST, _INVALID)
        where = "the params hold" if in_params else "the request holds"
        return None, error(request_id, code, f"{what}: {where} text that is not Unicode (a lone surrogate)")
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)  # what the SDK's reader does next
    except ValueError as exc:
        if notification:
            log.warning("a notification that is not a JSON-RPC message was dropped: %s", _first_error(exc))
            return None, None
        return None, error(request_id, types.INVALID_REQUEST, f"{_INVALID}: {_first_error(exc)}")
    if isinstance(message, types.JSONRPCNotification) and not notification:  # the SDK reads it as a notification
        shown = json.dumps(value.get("id"))[:40]
        return None, error(
            None, types.INVALID_REQUEST, f"{_INVALID}: an id must be a string or an integer, got {shown}"
        )
    return text, None


def _usable_id(value: Any) -> int | str | None:
    """The message's ``id`` when it can be sent back (an integer or Unicode text), else None."""
    request_id = value.get("id") if isinstance(value, Mapping) else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str) or not utf8_text(request_id):
        return None
    return request_id


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "the message"
        return f"not a JSON-RPC 2.0 message ({where}: {first['msg']})"
    return "not a JSON-RPC 2.0 message"


def claim_stdin() -> tuple[BinaryIO, Any]:
    """The wire's binary stdin and its release: descriptor 0 is pointed at the null device while the server runs
    (a policy reading its stdin reads EOF, never the wire), as the SDK's own stdio transport does when it opens
    stdin itself (its claim function, with the pinned SDK's own registry of claimed descriptors)."""
    from mcp.server.stdio import _claim_fd, _open_stdin_diversion

    return _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
