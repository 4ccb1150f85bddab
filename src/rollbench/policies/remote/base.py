"""What the ``ws://`` and ``http://`` policy clients share: options, PolicyInfo, and the per-episode reset.

A subclass supplies the transport: ``_open()`` (connect, return the server's metadata, raise ConfigError when
unreachable), ``_request(message)`` (one bounded round trip, raise EpisodeError; after a reconnect it re-sends
``_replays(message)`` first), ``_reset_message(episode)``, ``act`` and ``close``, and for batch requests
(:class:`RemoteBatch`, below) ``_slot_id``, ``_slot_reset_message``, ``_batch_item``, ``_item_reply``
and ``_close_slot``. Options shared by both (``--policy-options``): ``timeout_s`` (per call, default 30 s),
``connect_timeout_s`` (default 5 s), ``retries`` (reconnects with exponential backoff, default 3), ``obs_map``,
``needs_images`` (render and send camera images; default: the server metadata's ``needs_images``, else true).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rollbench.core.contracts import ConfigError, EpisodeError, Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import served_layout
from rollbench.core.secret_echo import SecretEcho, scrubbed
from rollbench.wire.decode import ProtocolError, described, status_error, unquoted_reply
from rollbench.wire.guard import TOKEN_ENV
from rollbench.wire.obs_map import (
    ObsMap,
    advertised,
    advertised_chunk_size,
    advertised_image_sizes,
    advertised_tasks,
    check_actions,
    check_options,
    check_overrides,
    jsonable,
    positive,
    resolve_obs_map,
    retries,
)

if TYPE_CHECKING:
    from rollbench.core.batch import Answer

MAX_METADATA_BYTES = 64 * 1024
"""The most a server's metadata may take as JSON (UTF-8 bytes, compact): it is recorded whole in run.json, so a larger
one is refused before any episode (ConfigError, exit 2), never truncated. Its nesting is bounded by the wire decoder
(:data:`rollbench.wire.decode.MAX_DEPTH`), its key count by this size."""


def bounded_metadata(url: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` as run.json records it (:func:`~rollbench.wire.obs_map.jsonable`), with every copy of the token
    the clients send (``$ROLLBENCH_SERVER_TOKEN``) that a server echoed back replaced by ``<ROLLBENCH_SERVER_TOKEN>``
    (the token is never recorded: its exact forms in place, any other form :mod:`rollbench.core.secret_echo`
    recognises by replacing the smallest part that holds it whole); ConfigError naming the server and the size when
    its JSON, as sent or as recorded, is larger than :data:`MAX_METADATA_BYTES` (which bounds the detector's work)."""

    sent = jsonable(metadata)
    size = _json_size(sent)
    recorded: dict[str, Any] = sent
    if size <= MAX_METADATA_BYTES:  # checked first: it bounds the detector's work
        recorded = _without_token(sent, os.environ.get(TOKEN_ENV) or "")
        size = _json_size(recorded)
    if size > MAX_METADATA_BYTES:
        raise ConfigError(
            f"the policy server {url} sent metadata of {size} bytes as JSON, more than the {MAX_METADATA_BYTES} bytes "
            "rollbench records in run.json; nothing was run"
        )
    return recorded


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def token_forms(token: str) -> re.Pattern[str]:
    """A pattern matching ``token`` as a server may echo it: itself, its UTF-8 bytes in standard and URL-safe base64
    (with and without ``=`` padding) and in hex, each in any letter case (``TOK_...``, upper-case hex). A longer form
    is tried first, so a padded base64 copy is replaced whole. Base64 of a longer text that holds the token starts at
    another byte boundary and is not matched."""
    raw = token.encode()
    forms = {token, raw.hex()}
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        forms |= {encoded.decode(), encoded.decode().rstrip("=")}
    return re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)), re.IGNORECASE)


def _without_token(value: Any, token: str) -> Any:
    """``value`` (JSON: dicts, lists, strings, numbers) with ``token`` in any of its :func:`token_forms` replaced by
    ``<ROLLBENCH_SERVER_TOKEN>`` in every string and key, and then every smallest part that still holds it in another
    form (:func:`rollbench.core.secret_echo.scrubbed`: an array of its bytes, base32, reversed, split over items...)
    replaced whole by the same placeholder."""
    if not token:
        return value
    pattern, placeholder = token_forms(token), f"<{TOKEN_ENV}>"
    return scrubbed(value, SecretEcho({TOKEN_ENV: token}), placeholder, lambda s: pattern.sub(placeholder, s))


OPTIONS: dict[str, type | tuple[type, ...]] = {
    "timeout_s": (int, float),
    "connect_timeout_s": (int, float),
    "retries": int,
    "obs_map": dict,
    "needs_images": bool,
}


class RemotePolicy:
    """Base of the remote policy clients (see the module docstring for the subclass hooks)."""

    protocol: ClassVar[str]  # recorded in run.json provenance
    obs_protocol: ClassVar[str]  # "ws" or "http": selects the default observation map (see obs_map)

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        check_options(options, OPTIONS)
        self.url = url
        self.timeout_s = positive(options, "timeout_s", 30.0)
        self.connect_timeout_s = positive(options, "connect_timeout_s", 5.0)
        self.retries = retries(options, 3)
        self._overrides = check_overrides(options.get("obs_map"))
        self._task: TaskInfo | None = None
        self._episode: dict[str, Any] | None = None
        self._batch: RemoteBatch | None = None  # set when this client serves several slots with batch requests
        self._map = ObsMap()
        self.metadata = self._open()
        recorded = bounded_metadata(url, self.metadata)
        try:
            chunk, replan = advertised(self.metadata)
        except ProtocolError as exc:  # a server advertising nonsense is refused at connection (hostile13 F11)
            raise ConfigError(f"the policy server {url} advertises metadata whose {exc}") from None
        self.info = PolicyInfo(
            name=url,
            chunk_size=chunk,
            chunk_size_known=advertised_chunk_size(self.metadata),
            replan_every=replan,
            tasks=advertised_tasks(self.metadata),
            io_bound=True,  # calls wait on the server: batch slots may overlap them (rollbench.run.lockstep)
            # the option, else the server's word (rollbench serve-policy of a state-based policy says False),
            # else True: openpi servers do not say, and VLAs read images
            needs_images=bool(options.get("needs_images", self.metadata.get("needs_images", True))),
            image_sizes=advertised_image_sizes(self.metadata),
            provenance={
                "server": url,
                "protocol": self.protocol,
                "server_metadata": recorded,
                "timeout_s": self.timeout_s,
                "obs_map_overrides": jsonable(self._overrides),
            },
        )

    @property
    def max_batch(self) -> int:
        """The most observations the server takes in one request (metadata ``max_batch``; 1 if it does not say)."""
        n = self.metadata.get("max_batch")
        return n if type(n) is int and n >= 1 else 1

    def batched(self, size: int) -> RemoteBatch | None:
        """This client serving ``size`` slots with one batch request per step (see
        :mod:`rollbench.policies.remote.base`) when the server accepts batches of 2 or more (metadata
        ``max_batch``); None otherwise (openpi servers, ``serve-policy --max-batch 1``): then
        :func:`rollbench.run.lockstep.as_batch_policy` keeps one client per slot, each sending single observations."""
        if size < 2 or self.max_batch < 2:
            return None

        return RemoteBatch(self, size)

    def _replays(self, message: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The reset messages to re-send after a reconnect, before ``message``: the current episode's (every
        slot's in batch mode), none when ``message`` is itself a reset."""
        if self._batch is not None:
            return self._batch.replays()
        if self._episode is None or "reset" in message:
            return []
        return [self._reset_message(self._episode)]

    def _slot_id(self, slot: int) -> Any:
        raise NotImplementedError

    def _slot_reset_message(self, slot_id: Any, episode: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _batch_item(self, slot_id: Any, obs_map: ObsMap, observation: Observation, instruction: str) -> dict[str, Any]:
        raise NotImplementedError

    def _item_reply(self, entry: Any) -> Any:
        return entry

    def _close_slot(self, slot_id: Any) -> None:
        pass

    def _open(self) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _request(self, message: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _reset_message(self, episode: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def reset(self, task: TaskInfo, seed: int) -> None:
        """Start an episode: pick the obs map of ``task``'s family; tell a server that accepts resets (task, seed).

        The instruction in the reset message is the task's declared one, for the server's log; each call carries
        the prompt actually used. Raises EpisodeError when the server rejects the reset.
        """
        self._task, self._episode = task, None
        self._map, self._episode = self._start_episode(task, seed, self._reset_message)

    def _start_episode(
        self, task: TaskInfo, seed: int, message: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> tuple[ObsMap, dict[str, Any] | None]:
        """``task``'s obs map, and the episode ``{"task", "seed", "instruction"}`` once a server that accepts resets
        has acknowledged ``message(episode)`` (None for a server that does not); used by :meth:`reset` and by each
        slot of a batch client (:class:`~rollbench.policies.remote.base.RemoteBatch`). Raises EpisodeError."""
        obs_map = resolve_obs_map(served_layout(task.family), self.obs_protocol, self._overrides)
        if self.metadata.get("reset") is not True:
            return obs_map, None
        episode = {"task": task.name, "seed": int(seed), "instruction": task.instruction}
        check_reset_reply(self._request(message(episode)), self.url)
        return obs_map, episode


def check_reset_reply(reply: Any, url: str) -> None:
    """A reset must be answered ``{"reset": true}``; raises EpisodeError otherwise."""
    if not (isinstance(reply, Mapping) and reply.get("reset") is True):  # named by its shape, never its text
        got = f"'reset' is {described(reply['reset'])}" if isinstance(reply, Mapping) and "reset" in reply else None
        raise EpisodeError(
            f'malformed reply from {url} to reset: expected {{"reset": true}}, got {got or described(reply)}'
        )


# One client serving B slots with one batch request per lockstep step.
# One ``ws://`` or ``http://`` client serving B slots with one batch request per lockstep step (``--batch-size B``).
#
# Used only against servers whose metadata says ``"max_batch": N`` with ``N >= 2`` (``rollbench serve-policy
# --max-batch N``); openpi servers, which do not say it, and ``serve-policy --max-batch 1`` get single observations
# from one client per slot, exactly as before (:meth:`rollbench.policies.remote.RemotePolicy.batched` returns None).
# The wire format of batch requests is in :mod:`rollbench.serve.batch`.
#
# Each slot is its own server-side session, so its episode state never mixes with another slot's: over http a slot
# has its own ``session`` id; over websocket the slots share the client's one connection and are named by their
# index (``{"slot": i, "reset": ...}``, batch items ``{"slot": i, "observation": ...}``). ``reset_slot`` sends that
# slot's reset (only to servers whose metadata says ``"reset": true``). ``act_batch`` sends the observations of the
# asking slots in requests of at most ``N`` items, and gives each slot its own answer: its chunk ``float32 (k,
# action_dim)``, or the exception that ends its episode:
#
# * an item's ``{"error", "status"}`` entry: InfrastructureError for the statuses that say the server cannot take
#   the call now (408, 410, 413, 503), else EpisodeError (fault ``policy``), quoting the server;
# * actions missing or of the wrong size for the slot's task: EpisodeError;
# * a reply with another number of entries than items: EpisodeError naming both counts, for every slot of that
#   request (which answer belongs to which slot is then unknown);
# * a failed round trip (timeout, lost connection after the retries, an error frame, HTTP error status):
#   the client's own exception, for every slot of that request.
#
# After a reconnect every slot's reset is re-sent before the pending request (as the single client does for its one
# episode). ``close`` ends every slot's session (http) and the connection.


class RemoteBatch:
    """A :class:`~rollbench.run.lockstep.BatchPolicy` over one remote client (see the module docstring)."""

    def __init__(self, client: RemotePolicy, size: int) -> None:
        self.client = client
        self.info = client.info
        self.size = size
        self.ids = [client._slot_id(i) for i in range(size)]
        self.tasks: list[TaskInfo | None] = [None] * size
        self.maps = [ObsMap() for _ in range(size)]
        self.episodes: dict[int, dict[str, Any]] = {}  # slot -> its episode's reset, for replays after a reconnect
        client._batch = self

    def replays(self) -> list[dict[str, Any]]:
        """Every slot's reset message for its current episode (re-sent after a reconnect)."""
        return [self.client._slot_reset_message(self.ids[s], ep) for s, ep in sorted(self.episodes.items())]

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        """Start slot ``slot``'s episode: its task's obs map, and its own reset on the server. Raises EpisodeError
        (InfrastructureError for transport failures) when the server rejects or does not answer the reset."""
        c = self.client
        self.episodes.pop(slot, None)
        self.tasks[slot] = task
        self.maps[slot], episode = c._start_episode(task, seed, lambda e: c._slot_reset_message(self.ids[slot], e))
        if episode is not None:
            self.episodes[slot] = episode

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[Answer]:
        """One answer per slot, in order (see the module docstring); requests of at most ``max_batch`` items."""
        n = self.client.max_batch
        answers: list[Answer] = []
        for start in range(0, len(slots), n):
            part = slice(start, start + n)
            answers += self._request(list(slots[part]), list(observations[part]), list(instructions[part]))
        return answers

    def _request(self, slots: list[int], observations: list[Observation], instructions: list[str]) -> list[Answer]:
        c = self.client
        try:
            items = [
                c._batch_item(self.ids[s], self.maps[s], o, i)
                for s, o, i in zip(slots, observations, instructions, strict=True)
            ]
            reply = c._request({"batch": items})
            entries = reply.get("batch") if isinstance(reply, Mapping) else None
            if not isinstance(entries, list):
                raise EpisodeError(
                    f"malformed reply from {c.url} to a batch request: no 'batch' list (got {described(reply)})"
                )
            if len(entries) != len(slots):
                raise EpisodeError(
                    f"malformed reply from {c.url}: {len(entries)} answers for a batch of {len(slots)} observations"
                )
        except Exception as exc:  # the whole request failed: every slot of it ends with the reason
            return [exc] * len(slots)
        answers: list[Answer] = []
        for slot, entry in zip(slots, entries, strict=True):
            try:
                answers.append(self._answer(slot, entry))
            except EpisodeError as exc:
                answers.append(exc)
        return answers

    def _answer(self, slot: int, entry: Any) -> Any:
        c = self.client
        if isinstance(entry, Mapping) and "error" in entry and "actions" not in entry:
            status = entry.get("status")
            what = f"HTTP {status}" if type(status) is int and 100 <= status <= 599 else "an error entry"  # no text
            said = f"server error from {c.url}: {unquoted_reply(what, len(str(entry['error'])), 'characters')}"
            raise status_error(status, said)
        return check_actions(c._item_reply(entry), c.url, self.tasks[slot])

    def close(self) -> None:
        """End every slot's session (http; best effort), then the client's connection."""
        try:
            for slot_id in self.ids:
                self.client._close_slot(slot_id)
        finally:
            self.client.close()
