"""Test double of an OpenAI-compatible provider for ``optimize-instruction``'s ``llm`` proposer (a real provider
cannot run here): FastAPI on loopback answering ``/v1/chat/completions`` and keeping every request (headers and
body) it received. Its first answers have the HTTP ``statuses`` given (with a body that quotes the caller's
Authorization header, as some providers do), then 200 with ``choices[0].message.content`` = ``content(key)``
(``key``: the bearer token the caller sent), by default two fixed instructions."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI, Request  # module level: FastAPI resolves the handler's annotations here
from fastapi.responses import JSONResponse

REACH_TEXT = "reach the goal with the gripper"


def two_instructions(_key: str) -> Any:
    return f'1. "{REACH_TEXT}"\n2. move the arm\n'


@contextlib.contextmanager
def chat_server(
    statuses: list[int], content: Callable[[str], Any] = two_instructions
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(base_url, requests seen)`` of a running stand-in (see the module docstring)."""
    import uvicorn

    seen: list[dict[str, Any]] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        auth = request.headers.get("authorization") or ""
        seen.append({"auth": auth, "body": await request.json()})
        if statuses:
            said = {"error": {"message": f"no luck for {auth}"}}
            return JSONResponse(said, status_code=statuses.pop(0))
        message = {"role": "assistant", "content": content(auth.removeprefix("Bearer "))}
        return {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)
