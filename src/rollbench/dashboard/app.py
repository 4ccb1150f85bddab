"""The dashboard's FastAPI application: the HTTP API, media, and the server-rendered pages.

API (JSON unless said; identities are ``HOST/ROBOT/NAME``, each segment ``^[A-Za-z0-9][A-Za-z0-9._-]*$``):

* ``GET /api/runs``: ``generated_at``, ``rubric``, ``runs`` (summaries joined with labels, see
  :mod:`rollbench.dashboard.summary`), ``hosts`` (``host``, ``source``, ``runs``, ``error``, ``stale_since``),
  ``disagreements``, ``errors`` (run directories that could not be read).
* ``GET /api/run/HOST/ROBOT/NAME``: one run with its graded ``results`` (tasks, suites, overall, latency, reasons).
* ``GET /api/episode/HOST/ROBOT/NAME/E``: one episode with its per-step timeline and label entry (with history).
* ``GET|POST /api/label/HOST/ROBOT/NAME/E``: read, or set with ``{"label": L|null, "note": "..."}`` (400 naming
  the valid labels for an unknown one; 413 over 64 kB; 404 for an unknown episode).
* ``GET /api/checkpoints``: the ``rollbench checkpoints`` folders among the local runs (``name``, ``page``,
  ``api``); ``GET /api/checkpoints/NAME``: one recomputed from its run directories (``ranking``, ``elimination``,
  ``statuses``, ``violations``, ``level_note``, ``run_pages``; :mod:`rollbench.dashboard.checkpoints`), 404 for another name.
* ``GET /api/labels``: totals per label, task and model; ``GET /api/labels.csv``: one row per labelled episode.
* ``GET /favicon.ico``: the dashboard's icon (SVG, ``image/svg+xml``; the pages link ``/static/favicon.svg``).
* ``GET /media/HOST/ROBOT/NAME/E/CAMERA`` (video/mp4, HTTP range requests: 206, 416) and
  ``GET /transcript/HOST/ROBOT/NAME/E``.

Errors are ``{"error": "..."}`` with 400 (bad segment or body), 401/403/413/415/421 (see
:mod:`rollbench.dashboard.security`), 404 (no such run, episode or file), 502 (a peer failed), 504 (a peer past its
deadline) or 503 (a peer's video while its downloads in flight are at their bound: retry;
:func:`rollbench.dashboard.media_cache.download_slot`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from jinja2 import TemplateError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response

from rollbench.core.contracts import ConfigError
from rollbench.core.format import is_decimal
from rollbench.core.identity import RunIdentity, check_segment
from rollbench.core.jsonfile import strict_dumps
from rollbench.dashboard import checkpoints as checkpoint_pages
from rollbench.dashboard import pages
from rollbench.dashboard.peers import TIMEOUT_S, PeerError, peer_failure
from rollbench.dashboard.security import MAX_BODY_BYTES, dashboard_guard, make_guard
from rollbench.dashboard.service import Dashboard
from rollbench.dashboard.summary import label_totals, labels_csv
from rollbench.record.files import why_not_read
from rollbench.record.safe_files import open_regular
from rollbench.record.transcript import MAX_TRANSCRIPT_BYTES
from rollbench.wire.decode import MAX_DEPTH, ProtocolError, loads_json

STATIC = Path(__file__).with_name("static")


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json(data: Any, status: int = 200) -> Response:
    return Response(strict_dumps(data, default=str), status_code=status, media_type="application/json")


def _ident(host: str, robot: str, name: str) -> RunIdentity:
    try:
        return RunIdentity(host, robot, name)
    except ConfigError as exc:
        raise ApiError(400, str(exc)) from None


def _episode(value: str) -> int:
    if not is_decimal(value) or len(value) > 9:
        raise ApiError(400, f"episode {value!r} is not an episode index (a non-negative integer)")
    return int(value)


async def _body(request: Request) -> dict[str, Any]:
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes")
    try:
        body = loads_json(data or b"{}")  # strict: UTF-8, finite numbers, one value per key, bounded depth
    except ProtocolError:
        raise ApiError(
            400, f"the body is not JSON (UTF-8, finite numbers, each key once, at most {MAX_DEPTH} deep)"
        ) from None
    if not isinstance(body, dict) or set(body) - {"label", "note"}:
        raise ApiError(400, 'the body is {"label": LABEL or null, "note": TEXT}')
    if body.get("label") is not None and not isinstance(body["label"], str):
        raise ApiError(400, "label must be a string or null")
    if not isinstance(body.get("note", ""), str):
        raise ApiError(400, "note must be a string")
    return body


# Every answer's Content-Security-Policy (hostile round 7 F3): scripts, styles, media and everything else only from
# this dashboard, no plug-ins, no <base>, no framing. The pages' one inline script is the forms' ``onsubmit="return
# false"`` attribute, allowed by its hash alone ('unsafe-hashes' covers event-handler attributes with that exact
# text, nothing else); the ``<script type="application/json">`` page data is not executed.
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-hashes' 'sha256-GZIcz60Uwd6wT3vaYke/atSr53TehbYAPepOa3d03Vw='; "
    "style-src 'self'; img-src 'self'; media-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


async def _security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """:data:`CSP` and ``X-Content-Type-Options: nosniff`` on every answer (pages, API, media, refusals)."""
    resp = await call_next(request)
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def create_app(dash: Dashboard) -> FastAPI:
    """The ASGI app serving ``dash`` (no OpenAPI/docs pages: they would load assets from a CDN)."""
    app = FastAPI(title="rollbench dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(make_guard(dashboard_guard(dash.cfg.host, dash.cfg.token, dash.cfg.allow_hosts)))
    app.middleware("http")(_security_headers)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _add_error_handlers(app)
    _add_api(app, dash)
    _add_media(app, dash)
    _add_pages(app, dash)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error as ``{"error": "..."}``: ApiError with its status, Starlette's (404/405...) with theirs, a
    request FastAPI cannot validate as 400, a ConfigError no route turned into a 400 (the label file damaged while
    the dashboard runs) as 503 with its one line, never a traceback."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(ConfigError)
    async def config_error(request: Request, exc: ConfigError) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return JSONResponse({"error": "bad request"}, status_code=400)


def _reproduction(dash: Dashboard, host: str, robot: str, name: str, reference: str) -> dict[str, Any]:
    """A local run's reproduction against the shipped reference ``reference`` (400 for an unknown name, 404 for a
    run that is not local)."""
    try:
        doc = dash.reproduction(_ident(host, robot, name), reference)
    except ConfigError as exc:
        raise ApiError(400, str(exc)) from None
    if doc is None:
        raise ApiError(404, f"no local run {host}/{robot}/{name}")
    return doc


def _add_api(app: FastAPI, dash: Dashboard) -> None:
    """The JSON API (``/api/...``; see the module docstring)."""

    @app.get("/api/runs")
    def api_runs() -> Response:
        return Response(dash.runs_json(), media_type="application/json")

    @app.get("/api/run/{host}/{robot}/{name}")
    def api_run(host: str, robot: str, name: str) -> Response:
        detail = dash.run_detail(_ident(host, robot, name))
        if detail is None:
            raise ApiError(404, f"no run {host}/{robot}/{name}")
        return _json(detail)

    @app.get("/api/reproduce/{host}/{robot}/{name}")
    def api_reproduce(host: str, robot: str, name: str, reference: str) -> Response:
        return _json(_reproduction(dash, host, robot, name, reference))

    @app.get("/api/episode/{host}/{robot}/{name}/{episode}")
    def api_episode(host: str, robot: str, name: str, episode: str) -> Response:
        detail = dash.episode_detail(_ident(host, robot, name), _episode(episode))
        if detail is None:
            raise ApiError(404, f"no episode {host}/{robot}/{name}/{episode}")
        return _json(detail)

    @app.get("/api/label/{host}/{robot}/{name}/{episode}")
    def api_label_get(host: str, robot: str, name: str, episode: str) -> Response:
        ident, e = _ident(host, robot, name), _episode(episode)
        if dash.label_context(ident, e) is None:
            raise ApiError(404, f"no episode {ident.episode_key(e)}")
        return _json({"key": ident.episode_key(e), "entry": dash.labels().entries.get(ident.episode_key(e))})

    @app.post("/api/label/{host}/{robot}/{name}/{episode}")
    async def api_label_set(host: str, robot: str, name: str, episode: str, request: Request) -> Response:
        ident, e = _ident(host, robot, name), _episode(episode)
        body = await _body(request)
        try:
            result = dash.set_label(ident, e, body.get("label"), body.get("note") or "")
        except ConfigError as exc:
            raise ApiError(400, str(exc)) from None
        if result is None:
            raise ApiError(404, f"no episode {ident.episode_key(e)}")
        return _json(result)

    @app.get("/api/checkpoints")
    def api_checkpoints() -> Response:
        return _json({"checkpoints": checkpoint_pages.listing(dash.catalog)})

    @app.get("/api/checkpoints/{name:path}")
    def api_checkpoints_folder(name: str) -> Response:
        d = checkpoint_pages.detail(dash.catalog, name)
        if d is None:
            raise ApiError(404, f"no checkpoints folder {name}")
        return _json({k: v for k, v in d.items() if k != "view"})

    @app.get("/api/labels")
    def api_labels() -> Response:
        runs = dash.runs()
        totals = label_totals(dash.labels())  # an empty sidecar records no rubric yet: the dashboard's own is in force
        return _json({**totals, "rubric": totals["rubric"] or dash.rubric.id, "disagreements": runs["disagreements"]})

    @app.get("/api/labels.csv")
    def api_labels_csv() -> Response:
        return Response(
            labels_csv(dash.labels()),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="labels.csv"'},
        )


def _add_media(app: FastAPI, dash: Dashboard) -> None:
    """An episode's videos (``/media/...``, range requests) and agent transcripts (``/transcript/...``), from the
    local run directories or fetched from the peer that has the run."""

    @app.get("/media/{host}/{robot}/{name}/{episode}/{camera}")
    def media(host: str, robot: str, name: str, episode: str, camera: str) -> Response:
        ident, e = _ident(host, robot, name), _episode(episode)
        try:
            check_segment(camera, "camera")
        except ConfigError as exc:
            raise ApiError(400, str(exc)) from None
        rec, peer, summary = dash.find(ident)
        path: Path | None = None
        if rec is not None:
            path = dash.local_video(rec, e, camera)
        elif peer is not None and summary is not None:
            try:
                path = peer.cached_media(dash.cfg.cache_dir, summary, e, camera)
            except (httpx.HTTPError, PeerError) as exc:
                raise _peer_failure(peer.url, exc) from None
            except OSError as exc:  # the cache directory: a link in it, no space, no permission
                raise ApiError(500, f"the video cache in {dash.cfg.cache_dir}: {exc.strerror or exc}") from None
        if path is None:
            raise ApiError(404, f"no recorded video {camera} for {ident.episode_key(e)}")
        return FileResponse(path, media_type="video/mp4")

    @app.get("/transcript/{host}/{robot}/{name}/{episode}")
    def transcript(host: str, robot: str, name: str, episode: str) -> Response:
        ident, e = _ident(host, robot, name), _episode(episode)
        rec, peer, _ = dash.find(ident)
        if rec is not None:
            path = dash.local_transcript(rec, e)
            if path is None:
                raise ApiError(404, f"no recorded transcript for {ident.episode_key(e)}")
            _servable_transcript(path, rec.run_dir, ident.episode_key(e))
            return FileResponse(path, media_type="text/plain; charset=utf-8")
        if peer is not None:
            try:
                body = peer.transcript(ident.episode_key(e))
            except (httpx.HTTPError, PeerError) as exc:
                raise _peer_failure(peer.url, exc) from None
            return Response(body, media_type="text/plain; charset=utf-8")
        raise ApiError(404, f"no run {ident.key}")


def _servable_transcript(path: Path, run_dir: Path, key: str) -> None:
    """ApiError unless ``path`` is a regular file inside ``run_dir`` that every reader of transcripts reads
    (:data:`~rollbench.record.transcript.MAX_TRANSCRIPT_BYTES`, no hole): a 20 GiB sparse one was streamed whole."""
    try:
        with open_regular(path, run_dir, max_bytes=MAX_TRANSCRIPT_BYTES, dense=True):
            pass
    except FileNotFoundError:
        raise ApiError(404, f"no recorded transcript for {key}") from None
    except OSError as exc:
        raise ApiError(422, f"the transcript of {key} is not served ({why_not_read(exc, path)})") from None


def _peer_failure(url: str, exc: Exception) -> ApiError:
    """The central dashboard's answer when a peer cannot deliver a transcript or video: 404 for the peer's 404,
    504 past the deadline, 502 otherwise; the message names the peer and the reason, never the peer's body."""
    if isinstance(exc, PeerError):
        return ApiError(exc.status, f"peer {url}: {exc}")
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return ApiError(404 if code == 404 else 502, f"peer {url} answered HTTP {code}")
    if isinstance(exc, httpx.TimeoutException):
        return ApiError(504, f"peer {url} did not answer within {TIMEOUT_S:g} s")
    return ApiError(502, f"peer {url} is unreachable: {peer_failure(exc)}")


def _page(source: str, render: Callable[[], str]) -> Response:
    """``render()`` as an HTML page. For a peer's run (``source`` its URL), a 502 naming the peer when what it sent
    lacks a field the page draws or has another type there (the exception's class only, never a value it quotes);
    a local run's page is rollbench's own data, and a failure there stays a bug."""
    if source == "local":
        return HTMLResponse(render())
    try:
        return HTMLResponse(render())
    except (TemplateError, LookupError, TypeError, ValueError, AttributeError) as exc:
        raise ApiError(502, f"peer {source}: its answer lacks what the page draws ({type(exc).__name__})") from None


def _add_pages(app: FastAPI, dash: Dashboard) -> None:
    """The server-rendered pages (:mod:`rollbench.dashboard.pages`): runs, disagreements, a run, an episode; and the
    icon at ``/favicon.ico`` (the SVG of ``/static/favicon.svg``, for clients that ask there without reading the
    pages' ``<link rel="icon">``)."""

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    @app.get("/", response_class=HTMLResponse)
    def index() -> Response:
        return HTMLResponse(pages.runs_page(dash.runs(), checkpoint_pages.listing(dash.catalog)))

    @app.get("/checkpoints/{name:path}", response_class=HTMLResponse)
    def checkpoints_page(name: str) -> Response:
        d = checkpoint_pages.detail(dash.catalog, name)
        if d is None:
            raise ApiError(404, f"no checkpoints folder {name}")
        return HTMLResponse(pages.checkpoints_page(d, checkpoint_pages.chart(d)))

    @app.get("/disagreements", response_class=HTMLResponse)
    def disagreements_page() -> Response:
        return HTMLResponse(pages.disagreements_page(dash.runs()))

    @app.get("/run/{host}/{robot}/{name}", response_class=HTMLResponse)
    def run_page(host: str, robot: str, name: str, reference: str | None = None) -> Response:
        detail = dash.run_detail(_ident(host, robot, name))
        if detail is None:
            raise ApiError(404, f"no run {host}/{robot}/{name}")
        repro = None if reference is None else _reproduction(dash, host, robot, name, reference)
        refs = dash.matching_references(_ident(host, robot, name))
        return _page(detail["source"], lambda: pages.run_page(detail, reproduction=repro, references=refs))

    @app.get("/episode/{host}/{robot}/{name}/{episode}", response_class=HTMLResponse)
    def episode_page(host: str, robot: str, name: str, episode: str) -> Response:
        detail = dash.episode_detail(_ident(host, robot, name), _episode(episode))
        if detail is None:
            raise ApiError(404, f"no episode {host}/{robot}/{name}/{episode}")
        return _page(detail["run"]["source"], lambda: pages.episode_page(detail))
