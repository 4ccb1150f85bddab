"""What one model reply may add to an agent episode's conversation and transcript: stated bounds (hostile round 13,
F18: a provider whose every reply held thousands of tool calls had each answered, recorded and sent back every turn).

* At most :data:`MAX_TOOL_CALLS_KEPT` (8) tool calls of a reply are kept, in the conversation sent back and in the
  transcript: the first is executed (one tool call per turn), the other kept ones are answered once with the short
  result :data:`NOT_EXECUTED`, as providers that require an answer per tool call id need; the rest are dropped from
  the kept message (so no answer is owed) and only counted (the ``call`` line's ``tool_calls_dropped``; the first
  call's result tells the model how many). A kept call other than the first that is not an object with a string
  ``id``, or over :data:`MAX_CALL_CHARS` characters as JSON, is dropped too; a first call over that size ends the
  episode as a malformed tool call (fault ``policy``).
* The reply's text ``content`` is kept up to :data:`MAX_CONTENT_CHARS` characters (as JSON when it is not a
  string), with a note of how many were cut.

So one model call adds at most 11 transcript lines (the call, the assistant message, 8 tool results, one user
message) of at most about 150 KB, and an episode makes at most ``horizon * (max_text_replies + 1)`` model calls.
"""

from __future__ import annotations

import json
from typing import Any

from rollbench.wire.decode import described

MAX_TOOL_CALLS_KEPT = 8
MAX_CALL_CHARS = 16_384
MAX_CONTENT_CHARS = 16_384
NOT_EXECUTED = "not executed: one tool call per turn"


def _size(value: Any) -> int:
    try:
        return len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return MAX_CALL_CHARS + 1  # not plain JSON: never kept


def kept_reply(message: dict[str, Any]) -> tuple[dict[str, Any], list[Any], int]:
    """``(kept, calls, dropped)`` of the assistant ``message``: the message as kept in the conversation and the
    transcript, its kept tool calls (the first first; empty without tool calls) and how many were dropped (see the
    module docstring). A first call over :data:`MAX_CALL_CHARS` is in ``calls`` as it came (``oversized`` says so:
    the episode ends on it) and in ``kept`` by its type and size only."""
    content = message.get("content")
    text = content if isinstance(content, str) else _dumps(content)
    if content is not None and len(text) > MAX_CONTENT_CHARS:
        content = f"{text[:MAX_CONTENT_CHARS]} [cut: {len(text) - MAX_CONTENT_CHARS} more characters]"
    kept: dict[str, Any] = {"role": "assistant", "content": content}
    raw = message.get("tool_calls") or []
    every = raw if isinstance(raw, list) else [raw]
    if not every:
        return kept, [], 0
    first = every[0]
    others = [c for c in every[1:MAX_TOOL_CALLS_KEPT] if _answerable(c)]
    kept["tool_calls"] = [described(first) if oversized(first) else first, *others]
    return kept, [first, *others], len(every) - 1 - len(others)


def oversized(call: Any) -> bool:
    """Whether tool ``call`` is over :data:`MAX_CALL_CHARS` characters as JSON (or not JSON at all)."""
    return _size(call) > MAX_CALL_CHARS


def _answerable(call: Any) -> bool:
    return isinstance(call, dict) and isinstance(call.get("id"), str) and not oversized(call)


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return described(value)


def answers(pending: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """The tool messages answering a kept reply: ``text`` (the executed call's result, with the number of dropped
    calls when any) for the first, :data:`NOT_EXECUTED` for each other kept call."""
    if pending["dropped"]:
        text += f" ({pending['dropped']} more tool calls of your reply were ignored: one tool call per reply)"
    first = {"role": "tool", "tool_call_id": pending["id"], "content": text}
    return [first, *({"role": "tool", "tool_call_id": i, "content": NOT_EXECUTED} for i in pending["skipped"])]
