"""A TEST DOUBLE of an OpenAI-compatible chat-completions provider, served for real (uvicorn) on loopback.

No LLM provider is reachable from the test machines, so this FastAPI app stands in for one. It speaks the same
wire protocol (``GET /v1/models``, ``POST /v1/chat/completions`` with ``tools``, ``tool_calls`` in the reply,
``usage``), checks the ``Authorization: Bearer`` key, and returns *scripted* tool calls chosen by the request's
``model``:

* ``solver``: reads ``point at x=.., y=..`` / ``goal at x=.., y=..`` from the latest message (scripted/* tasks) and
  calls ``move_to`` the goal; ``done`` once the point is within 1 cm of it.
* ``arm``: MetaWorld: ``move_delta(0, 0, 0.05)``, ``gripper("close")``, ``take_picture``, ``done``.
* ``giver``: ``move_delta(0.1, 0)`` then ``give_up("cannot see the goal")``.
* ``flaky``: like ``solver``, but the first attempt of every turn answers HTTP 429 (``Retry-After: 0``) and the
  second HTTP 503 (no ``Retry-After``).
* ``quitter``: ``give_up("no way")`` at its first turn; ``stopper``: ``done`` at its first turn (no step run).
* ``nancost``: like ``giver``, but its ``usage.cost`` is the non-standard JSON constant ``NaN`` (a misbehaving
  provider; Python's ``json`` reads it as a float NaN).
* ``swarm``: every reply holds 12 ``move_delta(0, 0)`` calls with ids ``call_N_I`` (``N`` the turn, from 0), the
  4th without an id. ``bigcall``: one tool call of over 20,000 characters. ``chatty``: like ``giver`` with a hold
  move, each reply's text 20,000 characters (``"ab"`` repeated).
* ``always429``: always HTTP 429. ``slow``: sleeps 3 s before answering. ``badjson``: a tool call whose arguments
  are not JSON. ``texty``: plain text, never a tool call.

Usage is deterministic: ``prompt_tokens = 10 * len(messages)``, ``completion_tokens = 5``, ``cost = 0.001``.
``Double.usage_text``, ``Double.reply_text`` and ``Double.models_text``, when a test sets them, replace every reply's ``usage``, every whole reply and the
``/models`` answer with that raw JSON text (a hostile or broken provider).
Every answered request is appended to ``Double.log`` (model, status, number of messages, usage returned).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

KEY = "sk-test-ROLLBENCHdoubleKEY0123456789abcdefXYZ"
_NUM = r"(-?\d+(?:\.\d+)?)"


@dataclass
class Double:
    url: str = ""
    log: list[dict[str, Any]] = field(default_factory=list)
    turns: dict[str, int] = field(default_factory=dict)
    usage_text: str | None = None  # when set: the raw JSON text every reply's ``usage`` is (a hostile provider)
    reply_text: str | None = None  # when set: the raw text of every chat completion reply
    models_text: str | None = None  # when set: the raw text of the ``/models`` answer


def _text_of(message: dict[str, Any]) -> str:
    c = message.get("content")
    if isinstance(c, list):
        return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
    return str(c or "")


def _call(name: str, args: dict[str, Any] | str, n: int) -> dict[str, Any]:
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


def _script(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message for ``model`` given the conversation so far."""
    n = sum(1 for m in messages if m.get("role") == "assistant")
    if model in ("solver", "flaky"):
        text = " ".join(_text_of(m) for m in messages[-3:])
        point = re.findall(rf"point at x={_NUM}, y={_NUM}", text)
        goal = re.findall(rf"goal at x={_NUM}, y={_NUM}", text)
        (px, py), (gx, gy) = map(float, point[-1]), map(float, goal[-1])
        if abs(px - gx) < 0.01 and abs(py - gy) < 0.01:
            return {"role": "assistant", "content": None, "tool_calls": [_call("done", {}, n)]}
        return {"role": "assistant", "content": "moving", "tool_calls": [_call("move_to", {"x": gx, "y": gy}, n)]}
    if model == "arm":
        plan = [
            ("move_delta", {"dx": 0.0, "dy": 0.0, "dz": 0.05}),
            ("gripper", {"command": "close"}),
            ("take_picture", {}),
            ("done", {}),
        ]
        name, args = plan[min(n, len(plan) - 1)]
        return {"role": "assistant", "content": None, "tool_calls": [_call(name, args, n)]}
    if model == "quitter":
        return {"role": "assistant", "content": None, "tool_calls": [_call("give_up", {"reason": "no way"}, n)]}
    if model == "stopper":
        return {"role": "assistant", "content": None, "tool_calls": [_call("done", {}, n)]}
    if model in ("giver", "nancost"):
        name, args = [("move_delta", {"dx": 0.1, "dy": 0.0}), ("give_up", {"reason": "cannot see the goal"})][min(n, 1)]
        return {"role": "assistant", "content": None, "tool_calls": [_call(name, args, n)]}
    if model == "swarm":  # 12 calls per reply; the 4th has no id
        calls = [_call("move_delta", {"dx": 0.0, "dy": 0.0}, n) for _ in range(12)]
        calls = [{**c, "id": f"call_{n}_{i}"} for i, c in enumerate(calls)]
        del calls[3]["id"]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if model == "bigcall":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("move_delta", {"dx": 0, "pad": "x" * 20000}, n)],
        }
    if model == "chatty":
        name, args = [("move_delta", {"dx": 0.0, "dy": 0.0}), ("give_up", {"reason": "tired"})][min(n, 1)]
        return {"role": "assistant", "content": "ab" * 10000, "tool_calls": [_call(name, args, n)]}
    if model == "badjson":
        return {"role": "assistant", "content": None, "tool_calls": [_call("move_to", "{x: 1,", n)]}
    return {"role": "assistant", "content": "I think I should move left."}


def make_app(double: Double) -> FastAPI:
    app = FastAPI()

    def authorised(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {KEY}"

    @app.get("/v1/models")
    def models(request: Request) -> JSONResponse:
        if not authorised(request):
            return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
        if double.models_text is not None:
            return Response(double.models_text, media_type="application/json")
        return JSONResponse({"object": "list", "data": [{"id": m} for m in ("solver", "arm", "giver", "flaky")]})

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> JSONResponse:
        if not authorised(request):
            return JSONResponse({"error": {"message": "Incorrect API key provided"}}, status_code=401)
        body = await request.json()
        model, messages = body["model"], body["messages"]
        turn_key = f"{model}:{len(messages)}:{json.dumps(messages[-1])[:200]}"
        attempt = double.turns.get(turn_key, 0)
        double.turns[turn_key] = attempt + 1
        if model == "always429" or (model == "flaky" and attempt == 0):
            double.log.append({"model": model, "status": 429, "messages": len(messages)})
            return JSONResponse({"error": {"message": "rate limited"}}, status_code=429, headers={"retry-after": "0"})
        if model == "flaky" and attempt == 1:
            double.log.append({"model": model, "status": 503, "messages": len(messages)})
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        if model == "slow":
            await asyncio.sleep(3)
        usage = {"prompt_tokens": 10 * len(messages), "completion_tokens": 5}
        usage["total_tokens"] = usage["prompt_tokens"] + 5
        double.log.append({"model": model, "status": 200, "messages": len(messages), "usage": usage, "body": body})
        message = _script(model, messages)
        reply = {
            "id": f"chatcmpl-{len(double.log)}",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {**usage, "cost": float("nan") if model == "nancost" else 0.001},
        }
        if double.reply_text is not None:
            return Response(double.reply_text, media_type="application/json")
        if double.usage_text is not None:  # spliced in as text: JSON numbers Python cannot write (1e400)
            reply["usage"] = "USAGE"
            return Response(json.dumps(reply).replace('"USAGE"', double.usage_text), media_type="application/json")
        if model == "nancost":  # JSONResponse refuses NaN: the raw, non-standard text a broken provider sends
            return Response(json.dumps(reply), media_type="application/json")
        return JSONResponse(reply)

    return app


@contextmanager
def serve_double() -> Iterator[Double]:
    """Run the double on ``127.0.0.1`` (a free port) in a thread; yields it with ``url`` = ``http://.../v1``."""
    double = Double()
    server = uvicorn.Server(uvicorn.Config(make_app(double), host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the provider double did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    double.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield double
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_as_provider() -> Iterator[Double]:
    """:func:`serve_double` named as the agent policies' provider: ``ROLLBENCH_AGENT_BASE_URL`` and
    ``ROLLBENCH_AGENT_API_KEY`` (= :data:`KEY`) are set while it runs and restored after."""
    with serve_double() as double, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROLLBENCH_AGENT_BASE_URL", double.url)
        mp.setenv("ROLLBENCH_AGENT_API_KEY", KEY)
        yield double
