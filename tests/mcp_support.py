"""Test helper: an MCP client session (the official SDK's ``stdio_client`` + ``ClientSession``) with a real
``python -m rollbench mcp --root ROOT`` subprocess, and readers of a tool result's structured content or error text.

The server runs the code under test: the same interpreter, this process's environment, and the directory this process
imported ``rollbench`` from first on its PYTHONPATH (else a worktree's tests would start the venv's installed copy).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult


def server_env() -> dict[str, str]:
    """The server's environment: this one's, with the source tree of the imported ``rollbench`` first on PYTHONPATH."""
    import rollbench

    src = str(Path(rollbench.__file__).resolve().parent.parent)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    return {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONPATH": os.pathsep.join([src, *rest])}


@asynccontextmanager
async def mcp_session(root: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rollbench", "mcp", "--root", str(root), *extra],
        env=server_env(),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def structured(res: CallToolResult) -> dict[str, Any]:
    assert not res.is_error, res.content
    assert isinstance(res.structured_content, dict)
    return res.structured_content


def error_text(res: CallToolResult) -> str:
    assert res.is_error, res.structured_content
    return " ".join(getattr(c, "text", "") for c in res.content)
