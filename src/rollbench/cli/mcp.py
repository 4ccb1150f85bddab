"""``rollbench mcp``: the MCP server's command (the server itself is :mod:`rollbench.mcp.server`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rollbench.cli.common import fail
from rollbench.core.contracts import ConfigError
from rollbench.mcp.sessions import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_S
from rollbench.mcp.slots import DEFAULT_MAX_ROLLOUTS
from rollbench.wire.inbound import DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT_S, ConnectionBounds


def mcp_cmd(
    transport: Annotated[
        str, typer.Option(help="stdio (the agent launches this server) or http (streamable HTTP at /mcp).")
    ] = "stdio",
    root: Annotated[Path, typer.Option(help="Directory every run is written under; run names cannot leave it.")] = Path(
        "runs"
    ),
    max_steps_ceiling: Annotated[int, typer.Option(min=1, help="Largest max_steps a client may request.")] = 1000,
    host: Annotated[str, typer.Option(help="http only: interface to bind (loopback unless trusted).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="http only: port.")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="ROLLBENCH_MCP_TOKEN",
            help="http only: secret clients send as 'Authorization: Bearer TOKEN'; required off loopback.",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(help="http only: a host name clients use to reach the server (Host/Origin check); repeatable."),
    ] = None,
    lerobot_policy: Annotated[
        list[str] | None,
        typer.Option(help="A lerobot:PATH_OR_REPO policy clients may run (the only ones they may name); repeatable."),
    ] = None,
    request_timeout_s: Annotated[
        float,
        typer.Option(
            help="http only: seconds to receive one request (headers and body; a late body gets 408); a client that "
            "takes no byte of an answer for that long is cut off."
        ),
    ] = DEFAULT_REQUEST_TIMEOUT_S,
    max_connections: Annotated[
        int, typer.Option(help="http only: connections held at once; one more is answered 503.")
    ] = DEFAULT_MAX_CONNECTIONS,
    max_sessions: Annotated[
        int,
        typer.Option(
            help="http only: MCP sessions held at once; a new one past it closes the least recently used session "
            "with no call in progress (503 if every one has one; an open event stream alone is no call)."
        ),
    ] = DEFAULT_MAX_SESSIONS,
    session_idle_s: Annotated[
        float,
        typer.Option(
            help="http only: a session with no call in progress for this many seconds is closed (an open event "
            "stream alone is no call)."
        ),
    ] = DEFAULT_SESSION_IDLE_S,
    max_rollouts: Annotated[
        int,
        typer.Option(
            help="Rollouts (run_policy_rollout, compare_policies_sequential) run at once, each in its own thread; as "
            "many more wait for a slot, and one more is a tool error."
        ),
    ] = DEFAULT_MAX_ROLLOUTS,
    allow_policy: Annotated[
        list[str] | None,
        typer.Option(
            help="A policy server URL (ws://, wss://, http://, https://) or agent:PROVIDER/MODEL clients may run (the "
            "only ones they may name; default none); repeatable."
        ),
    ] = None,
) -> None:
    """Serve run_policy_rollout and the run tools to LLM agents over the Model Context Protocol (docs/mcp.md)."""
    from rollbench.core.urlcreds import check_url
    from rollbench.mcp.http import HttpBinding
    from rollbench.mcp.server import serve
    from rollbench.mcp.sessions import SessionBounds
    from rollbench.mcp.strict import check_max_steps_ceiling, outside_policy
    from rollbench.record.safe_files import refuse_inside_run

    try:
        if bad := [p for p in lerobot_policy or () if not p.startswith("lerobot:")]:
            raise ConfigError(f"--lerobot-policy {bad[0]!r}: give lerobot:PATH_OR_REPO_ID[@REVISION]")
        if bad := [p for p in allow_policy or () if outside_policy(p) not in ("a policy server", "an agent")]:
            raise ConfigError(
                f"--allow-policy {bad[0]!r}: give a policy server URL (ws://, wss://, http://, https://) or "
                "agent:PROVIDER/MODEL (registered policies need no permission; --lerobot-policy for checkpoints)"
            )
        for p in allow_policy or ():  # the name would be shown to every client and recorded in run.json
            check_url("--allow-policy", p)
        check_max_steps_ceiling(max_steps_ceiling)  # before the root is made
        refuse_inside_run(root, "--root")  # issue 42, item 8
        checkpoints = (*(lerobot_policy or ()), *(allow_policy or ()))
        bounds = ConnectionBounds(request_timeout_s, max_connections)  # rollbench.wire.inbound
        sessions = SessionBounds(max_sessions, session_idle_s)  # rollbench.mcp.sessions
        binding = HttpBinding(host, port, token, tuple(allow_host or ()), bounds, sessions)
        serve(transport, root, max_steps_ceiling, checkpoints, binding, max_rollouts)
    except ConfigError as exc:
        fail(str(exc))
