"""``rollbench mcp``'s stdio transport: JSON-RPC on the caller's stdout, which nothing else in the process writes."""

from __future__ import annotations

import io

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from rollbench.core.stdio import document_stream
from rollbench.mcp.lines import StrictLines, claim_stdin


def run_stdio(server: MCPServer) -> None:
    """The stdio transport. Every line the client sends passes :class:`~rollbench.mcp.lines.StrictLines` first (a
    request the SDK cannot read is answered with a JSON-RPC error, never left unanswered); descriptor 0 points at the
    null device while the server runs. Where ``rollbench mcp`` reserved the caller's stdout
    (:func:`~rollbench.core.stdio.reserve_stdout`), the JSON-RPC wire is written to that private descriptor and
    descriptor 1 stays stderr after the session too (the SDK's own claim of descriptor 1 ends with the session, and
    a policy's thread or exit handler could then write into the wire); otherwise the SDK claims descriptor 1."""
    stream = document_stream()
    try:
        on_fd1 = stream.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        on_fd1 = True
    out = None
    if not on_fd1:
        wire = io.TextIOWrapper(io.FileIO(stream.fileno(), "w", closefd=False), encoding="utf-8", write_through=True)
        out = anyio.wrap_file(wire)
    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async, with our streams: the SDK takes none there

    async def run() -> None:
        stdin, release = claim_stdin()
        lines = StrictLines(stdin)
        try:
            wire_streams = stdio_server(stdin=lines, stdout=out)  # type: ignore[arg-type]  # any async line iterator
            async with wire_streams as (read_stream, write_stream), anyio.create_task_group() as tg:
                tg.start_soon(lines.send_answers, write_stream)
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
                tg.cancel_scope.cancel()
        finally:
            if release is not None:
                release()

    anyio.run(run)
