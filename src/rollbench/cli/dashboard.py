"""``rollbench dashboard``: serve the review dashboard over run directories (and peers)."""

from __future__ import annotations

import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer

from rollbench.core.contracts import ConfigError
from rollbench.core.urlcreds import masked_credentials
from rollbench.wire.inbound import DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT_S, ConnectionBounds

if TYPE_CHECKING:
    from rollbench.dashboard.service import Dashboard


MIN_STALE_AFTER_S = 1.0  # --stale-after: at least a second (run.live.json is rewritten about once a second at most)
MAX_STALE_AFTER_S = 7 * 86_400.0  # --stale-after: at most a week without run.live.json updates


def _peer(value: str) -> tuple[str, str | None]:
    """``URL`` or ``URL#TOKEN`` (the peer's token; ``#`` never reaches the server)."""
    url, _, token = value.partition("#")
    shown = url + ("#***" if token else "")  # the token is never printed
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"--peer {shown!r} is not an http(s) URL (e.g. http://gpu-box:8301 or http://gpu-box:8301#TOKEN)"
        )
    try:  # the parts the peer client will use, as the standard parser reads them (hostile round 12, F2)
        parts = urlsplit(url)
        valid = bool(parts.hostname) and ";" not in parts.netloc and (parts.port is None or 0 < parts.port < 65536)
    except ValueError:  # a port that is not a number, an unclosed [IPv6 literal
        valid = False
    if not valid:  # its host part is not shown: it may hold a credential the parser did not separate
        raise ConfigError(
            f"--peer {url.split('://', 1)[0]}://… is not a valid http(s) URL: give http://HOST:PORT (a port from 1 "
            "to 65535), and a token after '#'"
        )
    if (masked := masked_credentials(url)) is not None:  # the URL is shown to every viewer (hostile round 10, F11)
        raise ConfigError(
            f"--peer {masked} carries credentials, which every viewer of this dashboard (and of a central one reading "
            "it) would see; give the peer's token after '#' (URL#TOKEN): it is sent as a header, never shown"
        )
    return url.rstrip("/"), token or None


@dataclass(frozen=True)
class DashboardOptions:
    """``rollbench dashboard``'s options as given, before :func:`build_dashboard` checks them: the ``rubric`` (a name
    or a file, None: outcome-v1), ``peers`` (``URL`` or ``URL#TOKEN``), the ``token`` clients must show, the
    ``annotator`` (None: the OS user), the ``cache_dir`` (None: the XDG cache), seconds before a run is stale
    (``stale_after_s``), between peer refreshes (``peer_refresh_s``) and spent grading per listing
    (``sync_budget_s``), the bound ``host`` and the other Host names clients use (``allow_hosts``)."""

    rubric: str | None = None
    peers: tuple[str, ...] = ()
    token: str | None = None
    annotator: str | None = None
    cache_dir: Path | None = None
    stale_after_s: float = 120.0
    peer_refresh_s: float = 5.0
    sync_budget_s: float = 2.0
    host: str = "127.0.0.1"
    allow_hosts: tuple[str, ...] = ()


def build_dashboard(roots: list[Path], labels: Path, options: DashboardOptions | None = None) -> Dashboard:
    """Validate ``options`` (default :class:`DashboardOptions`) and return the
    :class:`rollbench.dashboard.service.Dashboard` over ``roots`` with its ``labels`` file (ConfigError if bad)."""
    from rollbench.core.identity import check_segment
    from rollbench.dashboard.labels import default_annotator
    from rollbench.dashboard.rubrics import load_rubric
    from rollbench.dashboard.service import Dashboard, DashboardConfig
    from rollbench.record.safe_files import refuse_inside_run

    o = options or DashboardOptions()
    for root in roots:
        if not root.is_dir():
            raise ConfigError(f"--root {root} is not a directory")
    if not roots and not o.peers:
        raise ConfigError("give at least one --root DIR or --peer URL")
    for what, path in (("--labels", labels), ("--cache-dir", o.cache_dir)):
        if path is not None:
            refuse_inside_run(
                path, what, own="labels" if what == "--labels" else None
            )  # the one check of every output option (issue 42, item 8)
    if not MIN_STALE_AFTER_S <= o.stale_after_s <= MAX_STALE_AFTER_S:  # False for NaN too
        raise ConfigError(
            f"--stale-after must be at least {MIN_STALE_AFTER_S:g} and at most {MAX_STALE_AFTER_S:g} seconds, "
            f"got {o.stale_after_s:g}"
        )
    if o.annotator is not None:
        check_segment(o.annotator, "--annotator")
    cfg = DashboardConfig(
        roots=list(roots),
        labels=labels,
        rubric=load_rubric(o.rubric),
        annotator=o.annotator or default_annotator(),
        cache_dir=o.cache_dir
        or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rollbench" / "dashboard",
        peers=[_peer(p) for p in o.peers],
        token=o.token,
        stale_after_s=o.stale_after_s,
        peer_refresh_s=o.peer_refresh_s,
        sync_budget_s=o.sync_budget_s,
        host=o.host,
        allow_hosts=tuple(o.allow_hosts),
    )
    return Dashboard(cfg)


def default_labels(roots: list[Path]) -> Path:
    """Where labels go without ``--labels``: ``labels.json`` in the first root (its parent when that root is itself
    a run directory: nothing is written inside a run), else ``$XDG_DATA_HOME/rollbench/labels.json``
    (``~/.local/share`` when unset)."""
    if roots:
        first = roots[0]
        return (first.parent if (first / "run.json").is_file() else first) / "labels.json"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "rollbench" / "labels.json"


def dashboard_cmd(
    labels: Annotated[
        Path | None,
        typer.Option(
            help="Label sidecar JSON file, created on the first label (default: labels.json in the first --root, "
            "or $XDG_DATA_HOME/rollbench/labels.json with peers only)."
        ),
    ] = None,
    root: Annotated[list[Path] | None, typer.Option(help="Directory of run directories (repeatable).")] = None,
    peer: Annotated[
        list[str] | None, typer.Option(help="Another dashboard, URL or URL#TOKEN (repeatable): central mode.")
    ] = None,
    rubric: Annotated[str | None, typer.Option(help="outcome-v1 (default), harm-five-class-v1, or a file.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8301,
    token: Annotated[
        str | None, typer.Option(help="Require this token, 16+ characters (bearer header or ?token= cookie).")
    ] = None,
    allow_host: Annotated[
        list[str] | None, typer.Option(help="Another Host name clients use (repeatable; needed for 0.0.0.0).")
    ] = None,
    annotator: Annotated[str | None, typer.Option(help="Name recorded with each label (default: OS user).")] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            help="Cache of graded run records and peers' videos (default $XDG_CACHE_HOME/rollbench/dashboard, "
            "~/.cache/rollbench/dashboard when unset)."
        ),
    ] = None,
    stale_after: Annotated[
        float, typer.Option(help="Seconds without run.live.json updates before 'stale' (1 to 604800).")
    ] = 120.0,
    request_timeout_s: Annotated[
        float,
        typer.Option(
            help="Seconds to receive one HTTP request (headers and body; a late body gets 408); a client that takes "
            "no byte of an answer for that long is cut off."
        ),
    ] = DEFAULT_REQUEST_TIMEOUT_S,
    max_connections: Annotated[
        int, typer.Option(help="Connections held at once; one more is answered 503.")
    ] = DEFAULT_MAX_CONNECTIONS,
) -> None:
    """Watch, label and export every episode: a web dashboard over run directories (and other dashboards)."""
    from rollbench.cli.common import fail as _fail
    from rollbench.dashboard.app import create_app
    from rollbench.dashboard.security import check_binding

    labels = labels or default_labels(list(root or []))
    try:
        check_binding(host, token, allow_host or ())
        options = DashboardOptions(
            rubric=rubric,
            peers=tuple(peer or ()),
            token=token,
            annotator=annotator,
            cache_dir=cache_dir,
            stale_after_s=stale_after,
            host=host,
            allow_hosts=tuple(allow_host or ()),
        )
        bounds = ConnectionBounds(request_timeout_s, max_connections)  # rollbench.wire.inbound
        dash = build_dashboard(list(root or []), labels, options)
    except ConfigError as exc:
        _fail(str(exc))
        return
    sock = _listening_socket(host, port)  # a busy port is exit 2 with one line, before anything is announced
    shown = "localhost" if host in ("127.0.0.1", "::1") else host
    typer.echo(f"rollbench dashboard on http://{shown}:{port}/ (labels: {labels}, rubric: {dash.rubric.id})", err=True)
    dash.warm_up()
    from rollbench.wire.inbound_http import bounded_server

    server = bounded_server(create_app(dash), bounds, "rollbench dashboard")
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it caught, once it has shut down
        raise typer.Exit(130) from None
    if signal.SIGINT in getattr(server, "_captured_signals", []):  # a background job ignores the re-raised SIGINT
        raise typer.Exit(130)  # as every command's Ctrl-C (docs/status.md; issue 42, item 19)


def _listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``(host, port)`` for uvicorn to serve on; exit 2 naming the address when it cannot be bound
    (a port in use, an address not of this machine)."""
    from rollbench.cli.common import fail

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        fail(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); choose another --port")
    sock.set_inheritable(True)
    return sock
