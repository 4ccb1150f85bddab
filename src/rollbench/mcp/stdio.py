"""``rollbench mcp``'s stdio transport: JSON-RPC on the caller's stdout, which nothing else in the process writes."""

from __future__ import annotations

import io

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from rollbench.core.stdio import document_stream


def run_stdio(server: MCPServer) -> None:
    """The stdio transport. Where ``rollbench mcp`` reserved the caller's stdout
    (:func:`~rollbench.core.stdio.reserve_stdout`), the JSON-RPC wire is written to that private descriptor and
    descriptor 1 stays stderr after the session too (the SDK's own claim of descriptor 1 ends with the session, and
    a policy's thread or exit handler could then write into the wire); otherwise the SDK's own stdio claim."""
    stream = document_stream()
    try:
        on_fd1 = stream.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        on_fd1 = True
    if on_fd1:  # not reserved: the SDK diverts descriptor 1 while it serves
        server.run("stdio")
        return
    wire = io.TextIOWrapper(io.FileIO(stream.fileno(), "w", closefd=False), encoding="utf-8", write_through=True)
    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async, with our stdout: the SDK takes no stream there

    async def run() -> None:
        async with stdio_server(stdout=anyio.wrap_file(wire)) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(run)
