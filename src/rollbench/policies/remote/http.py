"""``--policy http://HOST:PORT[/PATH]``: a policy served over rollbench's JSON /act protocol (no path means ``/act``).

Wire format, version 1 (a spec: any server that follows it can be evaluated; ``rollbench serve-policy
--protocol http`` is the reference server):

**Arrays** are JSON objects ``{"dtype": D, "shape": [d0, d1, ...], "data": X}``. ``D`` is a numpy dtype name:
``bool``, ``uint8``, ``int8``, ``int16``, ``int32``, ``int64``, ``float16``, ``float32`` or ``float64``. ``X`` is
either a string, the standard base64 (RFC 4648, padded) of the array's bytes in C (row-major) order and
little-endian byte order, or a JSON list of numbers (flat, or nested to ``shape``). Readers accept both; rollbench
writes base64. Example: ``{"dtype": "float32", "shape": [1, 2], "data": "AACAPwAAAEA="}`` is ``[[1.0, 2.0]]``.

**GET URL** (readiness): ``200 {"ready": true, "metadata": {...}}``. A server still loading may answer ``503
{"ready": false, "error": "..."}``; the client polls it for up to ``connect_timeout_s``. Metadata is free-form and
recorded in run.json; recognised keys: ``replan_every`` (or ``replan_steps``): actions of each chunk to execute
before asking again; ``chunk_size`` (or ``action_horizon``): rows of the chunks it returns; ``reset``: true if it
accepts reset requests; ``max_batch``: the most items of a batch request it accepts (absent: no batches).

**POST URL**, ``Content-Type: application/json``, one of:

* act: ``{"session": S, "instruction": str, "state": ARRAY, "images": {name: ARRAY uint8 (H, W, 3)}}``
  -> ``200 {"actions": ARRAY (N, action_dim)}`` (a plain nested list of numbers is accepted too; other fields
  such as ``server_timing`` are ignored). ``instruction`` is the task's instruction, ``state`` the observation
  state (``float32 (state_dim,)``, or the simulator's native vector, see obs_map), ``images`` one entry per
  rendered camera, named by the camera (``corner``, ``agentview``...) unless ``obs_map.images`` renames them.
* reset, sent before every episode only to servers whose metadata says ``"reset": true``:
  ``{"session": S, "reset": {"task": "metaworld/reach-v3", "seed": 0, "instruction": str}}`` -> ``200 {"reset":
  true}``.
* close, sent when the client is done, only to servers whose metadata says ``"reset": true``: ``{"session": S,
  "close": true}`` -> ``200 {"closed": true}`` (the server may free the session's state at once); errors ignored.
* batch, sent only to servers whose metadata says ``"max_batch": N`` with ``N >= 2``, by a client with
  ``--batch-size`` >= 2 (:mod:`rollbench.policies.remote.base`): ``{"batch": [ACT, ...]}``, at most ``N`` act
  requests, each with its own ``session`` (one per batch slot, each started by its own reset) -> ``200 {"batch":
  [ENTRY, ...]}``, one entry per item in order, ``{"actions": ARRAY}`` or ``{"error": "message", "status": S}``
  (the status that item would have had alone). A batch of more than ``N`` items, or naming a session twice, is
  refused whole (400). See :mod:`rollbench.serve.batch`.
* ``S`` is a random hex id per client (one per evaluation worker, one per batch slot), so a server can keep
  per-client episode state; a server may ignore it. ``rollbench serve-policy`` starts a session with a reset and answers 410 to an id
  it does not know (evicted, or from before a restart); requests without ``session`` share one session.
* errors: any non-2xx status with the body ``{"error": "message"}``; the episode's error names only the status and
  the body's size, never its text (a server may echo anything, the client's token too; its own log says why, e.g.
  ``rollbench serve-policy --log-requests``). ``rollbench serve-policy`` uses 400 (the
  request breaks the protocol, e.g. an array of an unsupported dtype or a non-finite observation), 404/405, 408
  (the body did not arrive in time), 410 (unknown session), 413 (larger than its ``--max-request-mb``), 500 (the
  policy raised; the traceback), 503 (``--max-sessions`` reached).

Bounds: an unreachable server or one that never becomes ready raises ConfigError at construction (before any
episode); each call must complete within ``timeout_s`` (default 30 s; a watchdog also stops a reply that trickles
in slowly); dropped connections are retried with exponential backoff (:mod:`rollbench.policies.retry`: 0.25 s, 0.5 s, ... ``retries`` times,
default 3), re-sending the episode's reset first; a non-2xx reply, a body that is not JSON, or ``actions`` that are
missing or of the wrong size raise EpisodeError (that episode ends as ``error``, fault ``policy``); timeouts, lost
connections and 408/410/413/503 raise InfrastructureError (fault ``infrastructure``). Replies are read up to
``rollbench.wire.decode.MAX_REPLY_BYTES`` and decoded by :mod:`rollbench.wire.decode` (numeric arrays only, no
NaN/Infinity literals). Client: ``httpx``.

Options (``--policy-options``): ``timeout_s``, ``connect_timeout_s``, ``retries``, ``obs_map``.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError, InfrastructureError, Observation
from rollbench.policies.remote.base import RemotePolicy
from rollbench.policies.retry import with_retries
from rollbench.wire.decode import (
    MAX_REPLY_BYTES,
    ProtocolError,
    decode_array,
    encode_array,
    loads_json,
    status_error,
    unquoted_failure,
    unquoted_reply,
)
from rollbench.wire.guard import client_headers
from rollbench.wire.obs_map import ObsMap, check_actions, positive


def endpoint(url: str) -> str:
    """The URL requests go to: ``http://HOST:PORT`` (no path, the form ``rollbench policies`` prints) means
    ``http://HOST:PORT/act``; a URL with a path is used as it is."""

    return url.rstrip("/") + "/act" if urlsplit(url).path in ("", "/") else url


def server_said(status: int, text: bytes) -> str:
    """What a non-2xx reply says: its status and size only. Its body, the protocol's ``{"error": ...}`` included, is
    never echoed: a server may put anything there, the client's token too (issue 42, class 1; hostile round 3)."""
    return unquoted_reply(f"HTTP {status}", len(text))


class HttpPolicy(RemotePolicy):
    """A client of one JSON /act server (see the module docstring for the wire format and bounds)."""

    protocol = "rollbench JSON /act v1"
    obs_protocol = "http"

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        import httpx

        self._session = uuid.uuid4().hex
        # options are read by RemotePolicy.__init__; the client needs the timeouts first
        self._client = httpx.Client(
            headers=client_headers(),  # $ROLLBENCH_SERVER_TOKEN as a bearer token, when set
            timeout=httpx.Timeout(
                positive(options, "timeout_s", 30.0), connect=positive(options, "connect_timeout_s", 5.0)
            ),
        )
        try:
            super().__init__(endpoint(url), options)
        except BaseException:
            self._client.close()
            raise

    def _open(self) -> dict[str, Any]:
        return self._wait_ready()

    def _reset_message(self, episode: dict[str, Any]) -> dict[str, Any]:
        return self._slot_reset_message(self._session, episode)

    def _wait_ready(self) -> dict[str, Any]:
        import httpx

        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                status, text = self._exchange("GET", None, self.connect_timeout_s)
            except (httpx.HTTPError, EpisodeError) as exc:
                raise ConfigError(
                    f"cannot reach the policy server {self.url} ({unquoted_failure(exc)}); is "
                    "`rollbench serve-policy --protocol http` or your /act server running there?"
                ) from None
            try:
                body = loads_json(text)
            except ValueError:
                body = None
            if status == 200 and isinstance(body, dict) and body.get("ready") is True:
                meta = body.get("metadata", {})
                return meta if isinstance(meta, dict) else {"metadata": meta}
            if status == 426 or b"WebSocket" in text[:2000]:  # a websocket server (openpi, serve-policy) says so
                ws_url = ("wss://" if self.url.startswith("https://") else "ws://") + urlsplit(self.url).netloc
                raise ConfigError(
                    f"{self.url} is a websocket policy server (it answered HTTP {status} to a plain HTTP request): "
                    f"use --policy {ws_url}"
                )
            if status != 503 or time.monotonic() > deadline:
                why = f"GET {self.url} answered HTTP {status}" + (', not {"ready": true}' if status == 200 else "")
                raise ConfigError(f"the policy server {self.url} is not ready ({why})")
            time.sleep(0.2)

    def _request(self, body: dict[str, Any]) -> Any:
        """POST one request; return the JSON reply; bounded by ``timeout_s``.

        Raises InfrastructureError for transport failures (timeout, lost connection after ``retries``) and for
        the statuses that say the server cannot take the call now (408, 410 session gone, 413, 503), else
        EpisodeError (fault: policy) for an error reply (its status and size, never its text) or a malformed one.
        """
        import httpx

        payload = json.dumps(body).encode()

        def attempt(n: int) -> Any:
            try:
                for replay in self._replays(body) if n else []:  # the episode's reset (every slot's) again
                    self._send(json.dumps(replay).encode())
                return self._send(payload)
            except httpx.TimeoutException:  # not retried: the call already took timeout_s
                raise InfrastructureError(f"no reply from {self.url} within timeout_s={self.timeout_s:g} s") from None

        try:  # refused, reset, dropped mid-reply: retried with backoff
            return with_retries(
                attempt, retries=self.retries, first_wait_s=0.25, retry_on=lambda e: isinstance(e, httpx.TransportError)
            )
        except httpx.TransportError as last:
            raise InfrastructureError(
                f"lost the connection to {self.url} and {self.retries} retries failed ({unquoted_failure(last)})"
            ) from None

    def _exchange(self, method: str, payload: bytes | None, timeout_s: float) -> tuple[int, bytes]:
        """One request -> (status, body), reading at most MAX_REPLY_BYTES within ``timeout_s`` (a watchdog cuts off
        a reply that trickles in slower). Raises httpx errors for transport failures, EpisodeError otherwise."""
        deadline = time.monotonic() + timeout_s
        headers = {"content-type": "application/json"} if payload is not None else None
        import httpx

        per_phase = httpx.Timeout(timeout_s) if method == "GET" else httpx.USE_CLIENT_DEFAULT
        with self._client.stream(method, self.url, content=payload, headers=headers, timeout=per_phase) as r:
            parts, size = [], 0
            for part in r.iter_bytes():
                parts.append(part)
                size += len(part)
                if size > MAX_REPLY_BYTES:
                    raise EpisodeError(f"malformed reply from {self.url}: larger than {MAX_REPLY_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise InfrastructureError(f"no complete reply from {self.url} within {timeout_s:g} s")
            return r.status_code, b"".join(parts)

    def _send(self, payload: bytes) -> Any:
        status, text = self._exchange("POST", payload, self.timeout_s)
        if not 200 <= status < 300:
            said = f"server error from {self.url}: {server_said(status, text)}"
            raise status_error(status, said)
        try:
            return loads_json(text)
        except ProtocolError as exc:
            raise EpisodeError(f"malformed reply from {self.url}: {exc} (HTTP {status}, {len(text)} bytes)") from None

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """POST the observation and instruction; return the server's ``float32 (N, action_dim)`` chunk."""
        reply = self._request(self._batch_item(self._session, self._map, observation, instruction))
        return check_actions(self._item_reply(reply), self.url, self._task)

    # batch requests (rollbench.policies.remote.base): every slot is a session of its own id
    def _slot_id(self, slot: int) -> str:
        return uuid.uuid4().hex

    def _slot_reset_message(self, slot_id: Any, episode: dict[str, Any]) -> dict[str, Any]:
        return {"session": slot_id, "reset": episode}

    def _batch_item(self, slot_id: Any, obs_map: ObsMap, observation: Observation, instruction: str) -> dict[str, Any]:
        """An act request (alone, or as an item of a batch) for session ``slot_id``."""
        return {
            "session": slot_id,
            "instruction": instruction,
            "state": encode_array(obs_map.state_of(observation)),
            "images": {k: encode_array(v) for k, v in obs_map.images_of(observation).items()},
        }

    def _item_reply(self, entry: Any) -> Any:
        """An act reply with its ``actions`` array decoded; EpisodeError if the array is malformed."""
        if isinstance(entry, dict) and isinstance(entry.get("actions"), dict):
            try:
                return {**entry, "actions": decode_array(entry["actions"])}
            except ValueError as exc:
                raise EpisodeError(f"malformed reply from {self.url}: 'actions' {exc}") from None
        return entry

    def _close_slot(self, slot_id: Any) -> None:
        self._end_session(slot_id)

    def close(self) -> None:
        """Tell a server that keeps sessions (metadata ``reset: true``) that this one is over, then disconnect."""
        self._end_session(self._session)
        self._client.close()

    def _end_session(self, session: str) -> None:
        """Tell a server that keeps sessions (metadata ``reset: true``) that ``session`` is over; best effort."""
        import httpx

        if getattr(self, "metadata", {}).get("reset") is True:
            payload = json.dumps({"session": session, "close": True}).encode()
            with contextlib.suppress(httpx.HTTPError, EpisodeError):  # best effort: the server may be gone
                self._exchange("POST", payload, min(self.timeout_s, 2.0))


def make_http_policy(name: str, options: Mapping[str, Any]) -> HttpPolicy:
    """A policy served over the JSON /act protocol at http(s)://HOST:PORT[/PATH] (path default /act; see
    rollbench serve-policy --protocol http).

    Wire format: this module's docstring."""
    return HttpPolicy(name, options)
