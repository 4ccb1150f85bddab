"""Test helper: an MCP client session (the official SDK's ``stdio_client`` + ``ClientSession``) with a real
``python -m rollbench mcp --root ROOT`` subprocess, and readers of a tool result's structured content or error text.
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


@asynccontextmanager
async def mcp_session(root: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rollbench", "mcp", "--root", str(root), *extra],
        env={"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
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
