"""``rollbench serve-policy``: serve any rollbench policy over the openpi websocket protocol or JSON /act.

The same wire formats the clients speak (:mod:`rollbench.policies.remote_ws`, :mod:`rollbench.policies.remote_http`),
so scripted baselines sit behind the same interface as a VLA server, and the tests exercise real servers.

Episodes and sessions: the policy is built with :func:`rollbench.registry.make_policy`. A *session* is one
websocket connection, or one ``session`` id of the JSON protocol. Each session drives its own policy instance
(idle instances are reused, so one client at a time costs one instance), and a reset request ``{"reset": {"task",
"seed", "instruction"}}`` calls ``policy.reset(task, seed)`` with the task resolved from rollbench's registry, so
stateful policies start every episode fresh. Metadata says ``"reset": true`` so rollbench clients send it; a plain
openpi client never does, and then ``--env TASK`` names the task the policy is reset to (seed 0) when a session
starts. Without either, an observation is answered with an error.

Observations are decoded with the task family's :mod:`rollbench.policies.obs_map` (overridable with
``--obs-map``): images back to camera names, the state as ``observation.state`` (``float32``) with the array as
received in ``observation.raw`` (so MetaWorld's experts read the full-precision vector), the prompt/instruction
passed to ``act``. Each reply is ``{"actions": float32 (k, action_dim), "server_timing": {"infer_ms": ...}}``.

``--log-requests FILE`` appends one JSON line per request: ``{"time", "protocol", "session", "kind": "reset" |
"act", "task", "seed", "instruction", "state": [dtype, shape], "images": {camera: shape}, "outcome"}``; the tests
read it to check, on the server side, which instruction arrived.

``--fault`` is fault injection for tests and drills, recorded in the metadata (so in the client's run.json):
``wrong-shape`` (actions get one extra column), ``malformed`` (the reply is not msgpack / not JSON), ``error``
(every act raises), ``slow:SECONDS`` (sleep before every act reply), ``die-after:N`` (the process exits with
code 70, without replying, on act request N + 1: a crashed server).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import traceback
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from rollbench.policies.obs_map import check_overrides, jsonable, load_policy_options, resolve_obs_map
from rollbench.types import ConfigError, Observation, Policy, RollbenchError, TaskInfo

FAULTS = ("wrong-shape", "malformed", "error", "slow:SECONDS", "die-after:N")
MAX_SESSIONS = 64
DIE_EXIT_CODE = 70


class MalformedReply(Exception):
    """Raised by the ``malformed`` fault: the protocol layer then sends bytes that are not a valid reply."""


def parse_fault(fault: str | None) -> tuple[str, float] | None:
    """``--fault`` -> ``(kind, number)``; raises ConfigError naming the valid faults."""
    if not fault:
        return None
    kind, _, arg = fault.partition(":")
    try:
        if kind in ("wrong-shape", "malformed", "error") and not arg:
            return kind, 0.0
        if kind in ("slow", "die-after") and float(arg) >= 0:
            return kind, float(arg)
    except ValueError:
        pass
    raise ConfigError(f"unknown --fault {fault!r}; valid faults: {', '.join(FAULTS)}")


class Session:
    """One client's episode state: a policy instance, its current task, and a lock serialising its calls."""

    def __init__(self, host: PolicyHost, key: str) -> None:
        self.host, self.key = host, key
        self.policy: Policy = host.take_policy()
        self.task: TaskInfo | None = None
        self.seed: int | None = None
        self.lock = threading.Lock()

    def reset(self, request: Mapping[str, Any]) -> None:
        from rollbench.registry import family_of

        name, seed = request.get("task"), request.get("seed")
        if not isinstance(name, str) or not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"a reset needs a task name and an integer seed, got {jsonable(request)!r}")
        self.host.log(session=self.key, kind="reset", task=name, seed=seed, instruction=request.get("instruction"))
        task = family_of(name).task(name)
        with self.lock:
            self.policy.reset(task, seed)
            self.task, self.seed = task, seed

    def ensure_reset(self) -> TaskInfo:
        if self.task is None:
            if self.host.default_task is None:
                raise ValueError(
                    "no episode was started: send a reset request first, or start the server with --env TASK"
                )
            self.reset({"task": self.host.default_task.name, "seed": 0})
        assert self.task is not None
        return self.task

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        host, fault = self.host, self.host.fault
        n = host.count_act()
        if fault and fault[0] == "die-after" and n > fault[1]:
            os._exit(DIE_EXIT_CODE)  # a crash: no reply, no clean close
        if fault and fault[0] == "slow":
            time.sleep(fault[1])
        if fault and fault[0] == "error":
            raise RuntimeError("fault injection (--fault error): the policy failed")
        with self.lock:
            actions = np.atleast_2d(np.asarray(self.policy.act(observation, instruction), dtype=np.float32))
        if fault and fault[0] == "wrong-shape":
            actions = np.concatenate([actions, np.zeros((actions.shape[0], 1), np.float32)], axis=1)
        if fault and fault[0] == "malformed":
            raise MalformedReply
        return actions

    def close(self) -> None:
        self.host.give_back(self.policy)


class PolicyHost:
    """The served policy: builds instances, keeps sessions, decodes observations, logs requests."""

    def __init__(
        self,
        policy: str,
        options: Mapping[str, Any],
        default_env: str | None,
        obs_overrides: Mapping[str, Any],
        log_path: Path | None,
        fault: str | None,
        protocol: str,
    ) -> None:
        from rollbench.registry import family_of, make_policy

        self.name, self.options, self.protocol = policy, dict(options), protocol
        self.fault = parse_fault(fault)
        self.obs_overrides = check_overrides(obs_overrides)
        self.default_task = family_of(default_env).task(default_env) if default_env else None
        template = make_policy(policy, self.options)  # unknown names fail here, before the port opens
        self.info = template.info
        self._idle: list[Policy] = [template]
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._acts = 0
        self._log = log_path.open("a", encoding="utf-8") if log_path else None

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "server": "rollbench serve-policy",
            "rollbench": version("rollbench"),
            "policy": self.name,
            "protocol": self.protocol,
            "reset": True,
            "chunk_size": self.info.chunk_size,
            "tasks": list(self.info.tasks),  # what the served policy drives: the client refuses other tasks
            "needs_images": self.info.needs_images,
            "env": self.default_task.name if self.default_task else None,
            "provenance": jsonable(self.info.provenance),
            "fault": f"{self.fault[0]}:{self.fault[1]:g}" if self.fault else None,
        }
        if self.info.replan_every is not None:
            meta["replan_every"] = self.info.replan_every
        return meta

    def take_policy(self) -> Policy:
        from rollbench.registry import make_policy

        with self._lock:
            if self._idle:
                return self._idle.pop()
        return make_policy(self.name, self.options)

    def give_back(self, policy: Policy) -> None:
        with self._lock:
            self._idle.append(policy)

    def session(self, key: str) -> Session:
        with self._lock:
            s = self._sessions.pop(key, None)
        if s is None:
            s = Session(self, key)
        with self._lock:
            self._sessions[key] = s  # most recently used last
            stale = list(self._sessions)[:-MAX_SESSIONS]
            dropped = [self._sessions.pop(k) for k in stale]
        for d in dropped:
            d.close()
        return s

    def end_session(self, key: str) -> None:
        with self._lock:
            s = self._sessions.pop(key, None)
        if s is not None:
            s.close()

    def count_act(self) -> int:
        with self._lock:
            self._acts += 1
            return self._acts

    def obs_map_for(self, task: TaskInfo) -> Any:
        return resolve_obs_map(task.family, self.protocol, self.obs_overrides)

    def log(self, **record: Any) -> None:
        if self._log is None:
            return
        line = json.dumps(jsonable({"time": time.time(), "protocol": self.protocol, **record}))
        with self._lock:
            self._log.write(line + "\n")
            self._log.flush()

    def handle(self, session: Session, request: Any, decode: Any) -> dict[str, Any]:
        """Serve one decoded request (reset or act); ``decode(request, obs_map) -> (Observation, instruction)``."""
        if not isinstance(request, Mapping):
            raise ValueError(f"a request must be a map, got {type(request).__name__}")
        if isinstance(request.get("reset"), Mapping):
            session.reset(request["reset"])
            return {"reset": True}
        task = session.ensure_reset()
        obs, instruction = decode(request, self.obs_map_for(task))
        record = {
            "session": session.key,
            "kind": "act",
            "task": task.name,
            "seed": session.seed,
            "instruction": instruction,
            "state": [str(obs.raw.dtype), list(obs.raw.shape)],
            "images": {c: list(v.shape) for c, v in obs.images.items()},
        }
        t0 = time.perf_counter()
        try:
            actions = session.act(obs, instruction)
        except BaseException as exc:
            self.log(**record, outcome=f"{type(exc).__name__}: {exc}")
            raise
        infer_ms = 1e3 * (time.perf_counter() - t0)
        self.log(**record, outcome=f"actions {list(actions.shape)}")
        return {"actions": actions, "server_timing": {"infer_ms": infer_ms}}


def _observation(state: Any, images: dict[str, np.ndarray]) -> Observation:
    raw = np.asarray(state)
    if raw.ndim != 1 or raw.dtype.kind not in "fiu":
        raise ValueError(f"the state must be a numeric vector, got {raw.dtype} {raw.shape}")
    return Observation(state=raw.astype(np.float32), images=images, raw=raw)


def decode_openpi(request: Mapping[str, Any], m: Any) -> tuple[Observation, str]:
    """An openpi-style flat observation dict -> (Observation, prompt)."""
    images = {cam: np.asarray(v) for k, v in request.items() if (cam := m.camera_of(k)) is not None}
    for key in (m.state_key, m.prompt_key):
        if key not in request:
            raise ValueError(f"the observation has no {key!r}; its keys: {sorted(request)}")
    if not isinstance(request[m.prompt_key], str):
        raise ValueError(f"{m.prompt_key!r} must be a string")
    return _observation(request[m.state_key], images), request[m.prompt_key]


def decode_json(request: Mapping[str, Any], m: Any) -> tuple[Observation, str]:
    """A JSON /act request body -> (Observation, instruction)."""
    from rollbench.policies.remote_http import decode_array

    if not isinstance(request.get("instruction"), str) or "state" not in request:
        raise ValueError('an act request needs "instruction" (a string) and "state" (an array)')
    images_in = request.get("images") or {}
    if not isinstance(images_in, Mapping):
        raise ValueError('"images" must map names to arrays')
    images = {(m.camera_of(k) or k): decode_array(v) for k, v in images_in.items()}
    return _observation(decode_array(request["state"]), images), request["instruction"]


def serve_ws(host: PolicyHost, sock: socket.socket) -> None:
    """Serve the openpi websocket protocol on ``sock`` (a thread per connection) until interrupted."""
    import http

    from openpi_client import msgpack_numpy
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.server import ServerConnection, serve

    packb = msgpack_numpy.Packer().pack

    def handler(conn: ServerConnection) -> None:
        key = f"ws-{id(conn):x}"
        session = host.session(key)
        try:
            conn.send(packb(host.metadata()))
            while True:
                request = msgpack_numpy.unpackb(conn.recv())
                try:
                    conn.send(packb(host.handle(session, request, decode_openpi)))
                except MalformedReply:
                    conn.send(b"\xc1 fault injection: not msgpack")
                except Exception:  # as openpi: the traceback as a text frame, then close
                    conn.send(traceback.format_exc())
                    conn.close(code=1011, reason="internal server error; traceback in the previous frame")
                    return
        except ConnectionClosed:
            pass
        finally:
            host.end_session(key)

    def health(conn: ServerConnection, request: Any) -> Any:
        return conn.respond(http.HTTPStatus.OK, "OK\n") if request.path == "/healthz" else None

    with serve(handler, sock=sock, compression=None, max_size=None, process_request=health) as server:
        server.serve_forever()


def http_app(host: PolicyHost, path: str) -> Any:
    """The FastAPI app of the JSON /act protocol at ``path``."""
    from fastapi import Body, FastAPI
    from fastapi.responses import JSONResponse, Response

    from rollbench.policies.remote_http import encode_array

    app = FastAPI(title="rollbench serve-policy", description="JSON /act protocol v1 (rollbench.policies.remote_http)")

    @app.get(path)
    def ready() -> dict[str, Any]:
        return {"ready": True, "metadata": host.metadata()}

    @app.post(path)
    def act(body: Any = Body(...)) -> Response:  # noqa: B008 - FastAPI's documented way to take a raw JSON body
        if not isinstance(body, dict):
            return JSONResponse({"error": "the request body must be a JSON object"}, status_code=400)
        session = host.session(str(body.get("session") or "default"))
        try:
            reply = host.handle(session, body, decode_json)
        except MalformedReply:
            return Response(b"fault injection: this is not JSON", media_type="text/plain")
        except (ValueError, RollbenchError) as exc:
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=400)
        except Exception:
            return JSONResponse({"error": traceback.format_exc(limit=6)}, status_code=500)
        if "actions" in reply:
            reply = {**reply, "actions": encode_array(reply["actions"])}
        return JSONResponse(reply)

    return app


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Created with ``proto=IPPROTO_TCP`` on purpose: asyncio only sets ``TCP_NODELAY``
    on connections whose socket says so, and ``socket.create_server`` leaves ``proto`` 0, which under uvicorn left
    Nagle's algorithm on and cost ~40 ms per keep-alive request (delayed ACK)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def serve_policy(
    policy: Annotated[str, typer.Option(help="Policy to serve (see `rollbench policies`).")],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one (the URL is printed).")
    ] = 8000,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    protocol: Annotated[str, typer.Option(help="ws (openpi websocket, msgpack) or http (JSON /act).")] = "ws",
    path: Annotated[str, typer.Option(help="URL path of the http protocol.")] = "/act",
    env: Annotated[
        str | None,
        typer.Option(help="Task the policy is reset to when a client sends no reset (plain openpi clients)."),
    ] = None,
    policy_options: Annotated[
        str | None, typer.Option(help="Options of the served policy: a JSON object or a JSON file.")
    ] = None,
    obs_map: Annotated[
        str | None,
        typer.Option(help="Override of the observation mapping (see rollbench.policies.obs_map), JSON or file."),
    ] = None,
    log_requests: Annotated[
        Path | None, typer.Option(help="Append one JSON line per request (task, seed, instruction, shapes).")
    ] = None,
    fault: Annotated[str | None, typer.Option(help="Fault injection: " + ", ".join(FAULTS) + ".")] = None,
) -> None:
    """Serve a rollbench policy over the openpi websocket protocol or JSON /act, for `--policy ws://` or `http://`."""
    err = typer.echo
    try:
        if protocol not in ("ws", "http"):
            raise ConfigError(f"unknown protocol {protocol!r}; valid protocols: ws, http")
        if not path.startswith("/"):
            raise ConfigError(f"--path must start with '/', got {path!r}")
        served = PolicyHost(
            policy,
            load_policy_options(policy_options),
            env,
            load_policy_options(obs_map),
            log_requests,
            fault,
            protocol,
        )
        sock = _listen(host, port)
    except (RollbenchError, OSError) as exc:
        err(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    bound = sock.getsockname()[1]
    url = f"ws://{host}:{bound}" if protocol == "ws" else f"http://{host}:{bound}{path}"
    print(f"serving {policy} at {url}", flush=True)
    try:
        if protocol == "ws":
            serve_ws(served, sock)
        else:
            import uvicorn

            server = uvicorn.Server(uvicorn.Config(http_app(served, path), log_level="warning", access_log=False))
            server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
