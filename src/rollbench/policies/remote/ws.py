"""``--policy ws://HOST:PORT``: a policy served over the openpi websocket protocol.

Protocol (openpi, ``packages/openpi-client`` and ``src/openpi/serving/websocket_policy_server.py``): binary
websocket frames packed with ``openpi_client.msgpack_numpy`` (msgpack; numpy arrays as ``{"__ndarray__": True,
"data": bytes, "dtype": str, "shape": list}``). On connect the server sends one frame, its metadata (a dict).
Then, per call, the client sends an observation dict and receives a dict with ``actions``: ``(N, action_dim)``
(``(action_dim,)`` reads as N = 1). A server error arrives as a *text* frame holding the traceback, after which
openpi closes the connection. The observation dict is built by :mod:`rollbench.wire.obs_map` (by default
``observation/image``, ``observation/wrist_image``, ``observation/state``, ``prompt`` = the task's instruction).

rollbench extension, used only when the metadata says ``"reset": true`` (``rollbench serve-policy`` does, a plain
openpi server does not, so nothing unknown is ever sent to it): before every episode the client sends
``{"reset": {"task": "metaworld/reach-v3", "seed": 0, "instruction": "..."}}`` and expects ``{"reset": true}``,
so a stateful served policy starts each episode fresh.

rollbench extension for batches, used only when the metadata says ``"max_batch": N`` with ``N >= 2`` (``rollbench
serve-policy --max-batch N``; openpi servers never say it, and get single observations from one connection per
batch slot) by a client with ``--batch-size`` >= 2 (:mod:`rollbench.policies.remote.base`): one connection serves
all slots, each its own server session: ``{"slot": i, "reset": {...}}`` starts slot ``i``'s episode, and ``{"batch":
[{"slot": i, "observation": {observation dict}}, ...]}`` (at most ``N`` items) is answered ``{"batch": [{"actions":
...} | {"error": "message", "status": S}, ...]}``, one entry per item, in order (see :mod:`rollbench.serve.batch`).

Why not ``openpi_client.websocket_client_policy.WebsocketClientPolicy`` itself (openpi-client 0.1.2): its
``infer`` calls ``recv()`` with no timeout, so a stalled server blocks the evaluation forever; it never
reconnects after a dropped connection; and it connects with websockets' default 10 s open timeout and no bound on
the wait for the metadata frame. This module keeps openpi's wire format (its ``msgpack_numpy`` packer, no
compression) on the ``websockets`` sync client, decodes what it receives with :mod:`rollbench.wire.decode`
instead of ``msgpack_numpy.unpackb`` (which builds arrays of any dtype the server names, object pointers included),
and adds the bounds:

* construction connects and reads the metadata within ``connect_timeout_s`` (default 5 s), else ConfigError
  (so ``rollbench eval`` fails before any episode with exit code 2);
* every reply must arrive within ``timeout_s`` (default 30 s), else InfrastructureError (that episode ends as
  ``error``); the connection is then dropped, so a late reply can never be taken for the next call's; a reply frame
  larger than ``rollbench.wire.decode.MAX_REPLY_BYTES`` closes the connection;
* a dropped connection is reopened with exponential backoff (:mod:`rollbench.policies.retry`: 0.25 s, 0.5 s, 1 s ... ``retries`` times, default
  3), then InfrastructureError; after a reconnect the episode's reset is sent again before the pending call is
  repeated; a server that closes with 1009 (the request exceeds its size limit) is not retried;
* a server's text (an error frame, a close reason) is never quoted, only its size or close code;
* a text (error) frame, a reply that is not msgpack, has arrays of a non-numeric dtype, or has no numeric
  ``actions`` of the task's action size raises EpisodeError (fault ``policy``) naming the server and what was
  wrong.

Options (``--policy-options``): ``timeout_s``, ``connect_timeout_s``, ``retries``, ``obs_map`` (see obs_map).
Advertised ``replan_every``/``replan_steps`` become ``PolicyInfo.replan_every``; ``action_horizon``/``chunk_size``
only ``PolicyInfo.chunk_size`` (see :func:`rollbench.wire.obs_map.advertised`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError, InfrastructureError, Observation
from rollbench.policies.remote.base import RemotePolicy, check_reset_reply
from rollbench.policies.retry import with_retries
from rollbench.wire.decode import (
    MAX_REPLY_BYTES,
    PeerFault,
    ProtocolError,
    unpack_msgpack,
    unquoted_failure,
    unquoted_reply,
)
from rollbench.wire.guard import client_headers
from rollbench.wire.obs_map import ObsMap, check_actions


class WebsocketPolicy(RemotePolicy):
    """A client of one openpi-protocol websocket server. See the module docstring for protocol and bounds."""

    protocol = "openpi-websocket (msgpack_numpy)"
    obs_protocol = "ws"

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        from openpi_client import msgpack_numpy

        self._packb = msgpack_numpy.Packer().pack
        self._ws: Any = None
        try:
            super().__init__(url, options)
        except BaseException:  # refused after connecting (e.g. oversized metadata): the connection is closed
            self._drop()
            raise

    def _open(self) -> dict[str, Any]:
        try:
            return self._connect()
        except Exception as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)  # websockets' InvalidStatus
            if status is not None:
                http_url = ("https://" if self.url.startswith("wss://") else "http://") + urlsplit(self.url).netloc
                raise ConfigError(
                    f"{self.url} answered the websocket handshake with a plain HTTP {status}: it is not a websocket "
                    f"policy server; if it serves rollbench's JSON /act protocol (`rollbench serve-policy --protocol "
                    f"http`), use --policy {http_url}"
                ) from None
            raise ConfigError(
                f"cannot reach the policy server {self.url} within {self.connect_timeout_s:g} s "
                f"({lost(exc)}); is `rollbench serve-policy` or your openpi server running there?"
            ) from None

    def _reset_message(self, episode: dict[str, Any]) -> dict[str, Any]:
        return {"reset": episode}

    def _connect(self) -> dict[str, Any]:
        from websockets.sync.client import connect

        ws = connect(
            self.url,
            open_timeout=self.connect_timeout_s,
            close_timeout=1,
            compression=None,
            max_size=MAX_REPLY_BYTES,  # a larger reply frame closes the connection (1009) instead of filling memory
            legacy=True,  # websockets >= 16: a plain connection (we reconnect ourselves, see _request)
            additional_headers=client_headers(),  # $ROLLBENCH_SERVER_TOKEN as a bearer token, when set
        )
        try:
            frame = ws.recv(timeout=self.connect_timeout_s)
            if isinstance(frame, str):
                said = unquoted_reply("an error text frame", len(frame), "characters")
                raise PeerFault(f"the server sent an error instead of its metadata: {said}")
            metadata = self._unpack(frame, "its metadata")
            if not isinstance(metadata, dict):
                raise PeerFault(f"the server's metadata is a {type(metadata).__name__}, not a dict")
        except BaseException:
            ws.close()
            raise
        self._ws = ws
        return metadata

    def _drop(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):  # closing an already broken connection
                self._ws.close()
            self._ws = None

    def _unpack(self, frame: bytes, what: str) -> Any:
        try:
            return unpack_msgpack(frame)
        except ProtocolError as exc:
            self._drop()
            raise EpisodeError(f"malformed reply from {self.url} ({what}): {exc}") from None

    def _request(self, message: dict[str, Any]) -> Any:
        """Send one message and return the unpacked reply; bounded by ``timeout_s``.

        Raises InfrastructureError when the server cannot be reached again after ``retries`` reconnects, does not
        answer within ``timeout_s``, or refuses the frame as too large (close 1009, not retried); EpisodeError
        (fault: policy) for an error text frame or a malformed reply.
        """
        from websockets.exceptions import ConnectionClosed, WebSocketException

        data = self._packb(message)

        def attempt(n: int) -> Any:
            try:
                if self._ws is None:
                    self._connect()
                    for replay in self._replays(message):  # the episode's reset (every slot's) again
                        check_reset_reply(self._roundtrip(self._packb(replay)), self.url)
                return self._roundtrip(data)
            except (WebSocketException, OSError) as exc:  # dropped, refused or bad handshake: reconnect, backoff
                self._drop()
                if isinstance(exc, ConnectionClosed) and exc.rcvd is not None and exc.rcvd.code == 1009:
                    raise InfrastructureError(
                        f"{self.url} refused a request of {len(data)} bytes as too large (close code 1009); "
                        "raise its limit (serve-policy --max-request-mb) or send smaller images"
                    ) from None
                raise

        dropped = (WebSocketException, OSError)
        try:
            return with_retries(
                attempt, retries=self.retries, first_wait_s=0.25, retry_on=lambda e: isinstance(e, dropped)
            )
        except dropped as last:
            raise InfrastructureError(
                f"lost the connection to {self.url} and {self.retries} reconnect(s) failed ({lost(last)})"
            ) from None

    def _roundtrip(self, data: bytes) -> Any:
        self._ws.send(data)
        try:
            frame = self._ws.recv(timeout=self.timeout_s)
        except TimeoutError:
            self._drop()
            raise InfrastructureError(f"no reply from {self.url} within timeout_s={self.timeout_s:g} s") from None
        if isinstance(frame, str):
            self._drop()
            raise EpisodeError(
                f"server error from {self.url}: {unquoted_reply('an error text frame', len(frame), 'characters')}"
            )
        return self._unpack(frame, "its reply")

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """Send ``observation`` + ``instruction`` (as the prompt); return the server's ``float32 (N, A)`` chunk."""
        return check_actions(
            self._request(observation_message(self._map, observation, instruction)), self.url, self._task
        )

    # batch requests (rollbench.policies.remote.base): the slots share this connection, named by their index
    def _slot_id(self, slot: int) -> int:
        return slot

    def _slot_reset_message(self, slot_id: Any, episode: dict[str, Any]) -> dict[str, Any]:
        return {"slot": slot_id, "reset": episode}

    def _batch_item(self, slot_id: Any, obs_map: ObsMap, observation: Observation, instruction: str) -> dict[str, Any]:
        return {"slot": slot_id, "observation": observation_message(obs_map, observation, instruction)}

    def close(self) -> None:
        self._drop()


def observation_message(m: ObsMap, observation: Observation, instruction: str) -> dict[str, Any]:
    """The openpi observation dict: images and state under ``m``'s keys, the instruction as the prompt."""
    message: dict[str, Any] = m.images_of(observation)
    message[m.state_key] = m.state_of(observation)
    message[m.prompt_key] = instruction
    return message


def make_ws_policy(name: str, options: Mapping[str, Any]) -> WebsocketPolicy:
    """A policy served over the openpi websocket protocol at ws://HOST:PORT, or wss:// with TLS (openpi servers,
    rollbench serve-policy)."""
    return WebsocketPolicy(name, options)


def lost(exc: BaseException) -> str:
    """Why a connection was lost, in the client's words: a closed connection by its close code only (its reason is
    the server's text, never quoted: :func:`~rollbench.wire.decode.unquoted_reply`), else the exception's class
    (:func:`~rollbench.wire.decode.unquoted_failure`: websockets' handshake errors quote the server's headers)."""
    from websockets.exceptions import ConnectionClosed

    if isinstance(exc, ConnectionClosed):
        code = exc.rcvd.code if exc.rcvd is not None else "none received"
        return f"{type(exc).__name__}: close code {code}"
    return unquoted_failure(exc)
