"""``rollbench serve-policy``: the command's options and its one error line. What the options build, along the
server's seams: who may connect (:class:`~rollbench.wire.guard.Guard`, the listening socket), the limits of one
request and of the sessions (:class:`~rollbench.serve.limits.Limits`), batching
(:class:`~rollbench.serve.batch.Batching`) and the served policy (:class:`~rollbench.serve.sessions.PolicyHost`);
the server itself, its protocols and its errors are :mod:`rollbench.serve.server`'s.

Bad input (an unknown policy or protocol, a weak token off loopback, a port in use) is one ``error:`` line on
stderr and exit code 2, before the port is opened; Ctrl-C ends the server quietly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rollbench.cli.common import fail
from rollbench.core.contracts import RollbenchError
from rollbench.serve.batch import Batching
from rollbench.serve.limits import INJECTIONS, Limits, connection_cap, request_bytes
from rollbench.serve.server import check_address, listen, load_protocol, serve
from rollbench.serve.sessions import PolicyHost, ServedPolicy
from rollbench.wire.decode import DEFAULT_MAX_REQUEST_BYTES
from rollbench.wire.guard import TOKEN_ENV, Guard
from rollbench.wire.inbound import ConnectionBounds
from rollbench.wire.obs_map import load_policy_options

# who may connect, and where
Port = Annotated[int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one (the URL is printed).")]
Host = Annotated[str, typer.Option(help="Interface to listen on; non-loopback needs --token.")]
Token = Annotated[
    str | None,
    typer.Option(
        envvar=TOKEN_ENV, help=f"Require this token (16+ characters) as 'Authorization: Bearer'; default ${TOKEN_ENV}."
    ),
]
AllowHost = Annotated[
    list[str] | None, typer.Option(help="Another Host name clients use (repeatable; needed for 0.0.0.0).")
]
Protocol = Annotated[str, typer.Option(help="ws (openpi websocket, msgpack) or http (JSON /act).")]
UrlPath = Annotated[str, typer.Option(help="URL path of the http protocol.")]
# the served policy
PolicyName = Annotated[str, typer.Option(help="Policy to serve (see `rollbench policies`).")]
DefaultEnv = Annotated[
    str | None, typer.Option(help="Task the policy is reset to when a client sends no reset (plain openpi clients).")
]
PolicyOptions = Annotated[str | None, typer.Option(help="Options of the served policy: a JSON object or a JSON file.")]
ObsMap = Annotated[
    str | None, typer.Option(help="Override of the observation mapping (see rollbench.wire.obs_map), JSON or file.")
]
LogRequests = Annotated[
    Path | None, typer.Option(help="Append one JSON line per request (task, seed, instruction, shapes).")
]
Injection = Annotated[
    str | None, typer.Option("--inject", help="Inject a failure (tests, drills): " + ", ".join(INJECTIONS) + ".")
]
# --inject's name before issue 29 ("fault" names only the category of an error): still accepted, with a warning
OldInjection = Annotated[str | None, typer.Option("--fault", hidden=True, help="Deprecated: use --inject.")]
# limits of a request and of the sessions
MaxRequestMb = Annotated[
    float, typer.Option(help="Largest websocket frame / HTTP body in MiB; larger ones are refused (1009 / 413).")
]
MaxSessions = Annotated[
    int, typer.Option(help="Live sessions at once; past it new ones are refused (ws close 1013 / HTTP 503).")
]
SessionIdle = Annotated[
    float, typer.Option(help="http: a session idle this many seconds may be evicted when the server is full.")
]
RequestTimeout = Annotated[
    float,
    typer.Option(
        help="Seconds to receive one HTTP request (headers and body) or a websocket handshake; also the longest a "
        "client may leave an answer untaken (HTTP: no byte of it; websocket: a reply) before it is cut off."
    ),
]
MaxConnections = Annotated[
    int | None,
    typer.Option(
        help="http: connections held at once; one more is answered 503 (default: 256, or 4 x --max-sessions if more)."
    ),
]
# batching
MaxBatch = Annotated[
    int,
    typer.Option(
        help="Most observations in one request and in one policy call. Above 1, acts arriving from all clients "
        "within --batch-window-ms are gathered into one call of the policy's batched form (a policy without one "
        "is called in turn); rollbench clients with --batch-size then send one batch request per step. "
        "1: no batching."
    ),
]
BatchWindow = Annotated[
    float,
    typer.Option(
        help="With --max-batch > 1: milliseconds a call waits, after its oldest observation arrived, for more "
        "(it goes at once when --max-batch are waiting or every started session has one waiting)."
    ),
]


def serve_policy_cmd(
    policy: PolicyName,
    port: Port = 8000,
    host: Host = "127.0.0.1",
    token: Token = None,
    allow_host: AllowHost = None,
    protocol: Protocol = "ws",
    path: UrlPath = "/act",
    env: DefaultEnv = None,
    policy_options: PolicyOptions = None,
    obs_map: ObsMap = None,
    log_requests: LogRequests = None,
    inject: Injection = None,
    max_request_mb: MaxRequestMb = DEFAULT_MAX_REQUEST_BYTES / 2**20,
    max_sessions: MaxSessions = 64,
    session_idle_s: SessionIdle = 60.0,
    request_timeout_s: RequestTimeout = 30.0,
    max_connections: MaxConnections = None,
    max_batch: MaxBatch = 1,
    batch_window_ms: BatchWindow = 5.0,
    fault: OldInjection = None,
) -> None:
    """Serve a rollbench policy over the openpi websocket protocol or JSON /act, for `--policy ws://` or `http://`."""
    if fault is not None:
        if inject is not None:
            fail("--fault is the deprecated name of --inject: give --inject only")
        inject = fault
    from rollbench.core.urlcreds import check_spec_urls

    try:
        if log_requests is not None:
            from rollbench.record.safe_files import refuse_inside_run, refuse_own_input

            refuse_inside_run(log_requests, "--log-requests")  # issue 42, item 8
            inputs = {"--policy-options": [policy_options], "--obs-map": [obs_map]}
            refuse_own_input(log_requests, "--log-requests", inputs)  # hostile round 18, b F1
        guard = _access(host, token, allow_host or [], protocol, path)
        limits = Limits(request_bytes(max_request_mb), max_sessions, session_idle_s, request_timeout_s)
        cap = connection_cap(max_sessions) if max_connections is None else max_connections  # 0 is refused, not 256
        bounds = ConnectionBounds(request_timeout_s, cap)
        batching = Batching(max_batch, batch_window_ms)
        options, overrides = load_policy_options(policy_options), load_policy_options(obs_map, "--obs-map")
        check_spec_urls(policy, options)  # an upstream server's URL: its name reaches every client's run.json
        what = ServedPolicy(policy, options, env, overrides)
        served = PolicyHost(what, log_requests, inject, protocol, limits, batching)
        load_protocol(protocol)  # before the port accepts (see load_protocol)
        sock = listen(host, port, bounded=protocol == "ws")
    except (RollbenchError, OSError) as exc:
        fail(str(exc))
    if fault is not None:  # after the checks: bad input stays one line
        typer.echo("warning: --fault is deprecated: use --inject (the same values)", err=True)
    try:
        serve(served, sock, host, protocol, path, guard, bounds)
    except KeyboardInterrupt:  # Ctrl-C: exit 130, the one rule of every command (docs/status.md)
        raise typer.Exit(130) from None


def _access(host: str, token: str | None, allow_host: list[str], protocol: str, path: str) -> Guard:
    """Who may connect: the protocol and path checked, and the guard of the binding (ConfigError: a weak or missing
    token off loopback, an unknown protocol, a path not starting with ``/``)."""
    check_address(protocol, path)
    return Guard.for_binding(
        host, token, allow_host, what="run the served policy", token_option=f"--token (or {TOKEN_ENV})"
    )
