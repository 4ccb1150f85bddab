"""``--policy http://HOST:PORT/act``: a policy served over rollbench's JSON /act protocol.

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
accepts reset requests.

**POST URL**, ``Content-Type: application/json``, one of:

* act: ``{"session": S, "instruction": str, "state": ARRAY, "images": {name: ARRAY uint8 (H, W, 3)}}``
  -> ``200 {"actions": ARRAY (N, action_dim)}`` (a plain nested list of numbers is accepted too; other fields
  such as ``server_timing`` are ignored). ``instruction`` is the task's instruction, ``state`` the observation
  state (``float32 (state_dim,)``, or the simulator's native vector, see obs_map), ``images`` one entry per
  rendered camera, named by the camera (``corner``, ``agentview``...) unless ``obs_map.images`` renames them.
* reset, sent before every episode only to servers whose metadata says ``"reset": true``:
  ``{"session": S, "reset": {"task": "metaworld/reach-v3", "seed": 0, "instruction": str}}`` -> ``200 {"reset":
  true}``.
* ``S`` is a random hex id per client (one per evaluation worker), so a server can keep per-client episode
  state; a server may ignore it.
* errors: any non-2xx status; a JSON body ``{"error": "message"}`` is quoted in the episode's error.

Bounds: an unreachable server or one that never becomes ready raises ConfigError at construction (before any
episode); each call must complete within ``timeout_s`` (default 30 s; a watchdog also stops a reply that trickles
in slowly); dropped connections are retried with exponential backoff (0.25 s, 0.5 s, ... ``retries`` times,
default 3), re-sending the episode's reset first; a non-2xx reply, a body that is not JSON, or ``actions`` that are
missing or of the wrong size raise EpisodeError (that episode ends as ``error``). Client: ``httpx``.

Options (``--policy-options``): ``timeout_s``, ``connect_timeout_s``, ``retries``, ``obs_map``.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.policies.obs_map import check_actions, positive
from rollbench.policies.remote import RemotePolicy
from rollbench.types import ConfigError, EpisodeError, InfrastructureError, Observation

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")


def encode_array(arr: np.ndarray) -> dict[str, Any]:
    """An array as wire JSON ``{"dtype", "shape", "data": base64}`` (little-endian, C order)."""
    a = np.asarray(arr)
    if a.dtype.name not in DTYPES:
        raise ValueError(f"arrays of dtype {a.dtype} cannot be sent; supported: {', '.join(DTYPES)}")
    le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": base64.b64encode(le.tobytes()).decode("ascii")}


def decode_array(obj: Any) -> np.ndarray:
    """Wire JSON (base64 or list ``data``) -> numpy array; raises ValueError saying what is wrong."""
    if not isinstance(obj, Mapping) or not {"dtype", "shape", "data"} <= set(obj):
        raise ValueError('an array must be an object with "dtype", "shape" and "data"')
    dtype, shape, data = obj["dtype"], obj["shape"], obj["data"]
    if dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; supported: {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"shape must be a list of non-negative integers, got {shape!r}")
    if isinstance(data, str):
        raw = base64.b64decode(data, validate=True)
        out = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
        if out.size != int(np.prod(shape)):
            raise ValueError(f"data holds {out.size} values but shape {shape} needs {int(np.prod(shape))}")
        return out.reshape(shape).astype(dtype, copy=False)
    if isinstance(data, list):
        return np.asarray(data, dtype=dtype).reshape(shape)
    raise ValueError("data must be a base64 string or a list of numbers")


class HttpPolicy(RemotePolicy):
    """A client of one JSON /act server (see the module docstring for the wire format and bounds)."""

    protocol = "rollbench JSON /act v1"
    obs_protocol = "http"

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        import httpx

        self._session = uuid.uuid4().hex
        # options are read by RemotePolicy.__init__; the client needs the timeouts first
        self._client = httpx.Client(
            timeout=httpx.Timeout(
                positive(options, "timeout_s", 30.0), connect=positive(options, "connect_timeout_s", 5.0)
            )
        )
        try:
            super().__init__(url, options)
        except BaseException:
            self._client.close()
            raise

    def _open(self) -> dict[str, Any]:
        return self._wait_ready()

    def _reset_message(self, episode: dict[str, Any]) -> dict[str, Any]:
        return {"session": self._session, "reset": episode}

    def _wait_ready(self) -> dict[str, Any]:
        import httpx

        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                r = self._client.get(self.url, timeout=self.connect_timeout_s)
            except httpx.HTTPError as exc:
                raise ConfigError(
                    f"cannot reach the policy server {self.url} ({type(exc).__name__}: {exc}); is "
                    "`rollbench serve-policy --protocol http` or your /act server running there?"
                ) from None
            try:
                body = r.json()
            except ValueError:
                body = None
            if r.status_code == 200 and isinstance(body, dict) and body.get("ready") is True:
                meta = body.get("metadata", {})
                return meta if isinstance(meta, dict) else {"metadata": meta}
            why = f"GET answered HTTP {r.status_code}: {r.text[:300]!r}"
            if r.status_code != 503 or time.monotonic() > deadline:
                raise ConfigError(f"the policy server {self.url} is not ready ({why})")
            time.sleep(0.2)

    def _request(self, body: dict[str, Any]) -> Any:
        """POST one request; return the JSON reply; bounded by ``timeout_s``; raises EpisodeError."""
        import httpx

        payload = json.dumps(body).encode()
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(0.25 * 2 ** (attempt - 1))
            try:
                if attempt and self._episode is not None and "reset" not in body:
                    self._send(json.dumps({"session": self._session, "reset": self._episode}).encode())
                return self._send(payload)
            except httpx.TimeoutException:
                raise InfrastructureError(f"no reply from {self.url} within timeout_s={self.timeout_s:g} s") from None
            except httpx.TransportError as exc:  # refused, reset, dropped mid-reply: retry with backoff
                last = exc
        raise InfrastructureError(
            f"lost the connection to {self.url} and {self.retries} retries failed ({type(last).__name__}: {last})"
        )

    def _send(self, payload: bytes) -> Any:
        deadline = time.monotonic() + self.timeout_s
        headers = {"content-type": "application/json"}
        with self._client.stream("POST", self.url, content=payload, headers=headers) as r:
            parts = []
            for part in r.iter_bytes():  # the watchdog: a reply trickling in slower than timeout_s is cut off
                parts.append(part)
                if time.monotonic() > deadline:
                    raise InfrastructureError(
                        f"no complete reply from {self.url} within timeout_s={self.timeout_s:g} s"
                    )
            status = r.status_code
        text = b"".join(parts)
        try:
            reply = json.loads(text)
        except ValueError:
            reply = None
        if not 200 <= status < 300:
            why = reply.get("error") if isinstance(reply, dict) else text[:1500].decode(errors="replace")
            raise EpisodeError(f"server error from {self.url}: HTTP {status}: {str(why).strip()[-1500:]}")
        if reply is None:
            raise EpisodeError(f"malformed reply from {self.url}: not JSON ({text[:200]!r})")
        return reply

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """POST the observation and instruction; return the server's ``float32 (N, action_dim)`` chunk."""
        m = self._map
        body = {
            "session": self._session,
            "instruction": instruction,
            "state": encode_array(m.state_of(observation)),
            "images": {k: encode_array(v) for k, v in m.images_of(observation).items()},
        }
        reply = self._request(body)
        if isinstance(reply, dict) and isinstance(reply.get("actions"), dict):
            try:
                reply = {**reply, "actions": decode_array(reply["actions"])}
            except ValueError as exc:
                raise EpisodeError(f"malformed reply from {self.url}: 'actions' {exc}") from None
        return check_actions(reply, self.url, self._task)

    def close(self) -> None:
        self._client.close()


def make_http_policy(name: str, options: Mapping[str, Any]) -> HttpPolicy:
    """A policy served over the JSON /act protocol at http(s)://HOST:PORT/act (see rollbench serve-policy)."""
    return HttpPolicy(name, options)
