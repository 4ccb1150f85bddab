"""What the ``ws://`` and ``http://`` policy clients share: options, PolicyInfo, and the per-episode reset.

A subclass supplies the transport: ``_open()`` (connect, return the server's metadata, raise ConfigError when
unreachable), ``_request(message)`` (one bounded round trip, raise EpisodeError; after a reconnect it re-sends
``_replays(message)`` first), ``_reset_message(episode)``, ``act`` and ``close``, and for batch requests
(:mod:`rollbench.policies.remote_batch`) ``_slot_id``, ``_slot_reset_message``, ``_batch_item``, ``_item_reply``
and ``_close_slot``. Options shared by both (``--policy-options``): ``timeout_s`` (per call, default 30 s),
``connect_timeout_s`` (default 5 s), ``retries`` (reconnects with exponential backoff, default 3), ``obs_map``,
``needs_images`` (render and send camera images; default: the server metadata's ``needs_images``, else true).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from rollbench.policies.obs_map import (
    ObsMap,
    advertised,
    advertised_chunk_size,
    advertised_tasks,
    check_options,
    check_overrides,
    jsonable,
    positive,
    resolve_obs_map,
)
from rollbench.types import ConfigError, EpisodeError, Observation, PolicyInfo, TaskInfo

if TYPE_CHECKING:
    from rollbench.policies.remote_batch import RemoteBatch

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
        self.retries = int(options.get("retries", 3))
        if self.retries < 0:
            raise ConfigError(f"policy option retries must be >= 0, got {self.retries}")
        self._overrides = check_overrides(options.get("obs_map"))
        self._task: TaskInfo | None = None
        self._episode: dict[str, Any] | None = None
        self._batch: RemoteBatch | None = None  # set when this client serves several slots with batch requests
        self._map = ObsMap()
        self.metadata = self._open()
        chunk, replan = advertised(self.metadata)
        self.info = PolicyInfo(
            name=url,
            chunk_size=chunk,
            chunk_size_known=advertised_chunk_size(self.metadata),
            replan_every=replan,
            tasks=advertised_tasks(self.metadata),
            io_bound=True,  # calls wait on the server: batch slots may overlap them (rollbench.batching)
            # the option, else the server's word (rollbench serve-policy of a state-based policy says False),
            # else True: openpi servers do not say, and VLAs read images
            needs_images=bool(options.get("needs_images", self.metadata.get("needs_images", True))),
            provenance={
                "server": url,
                "protocol": self.protocol,
                "server_metadata": jsonable(self.metadata),
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
        :mod:`rollbench.policies.remote_batch`) when the server accepts batches of 2 or more (metadata
        ``max_batch``); None otherwise (openpi servers, ``serve-policy --max-batch 1``): then
        :func:`rollbench.batching.as_batch_policy` keeps one client per slot, each sending single observations."""
        if size < 2 or self.max_batch < 2:
            return None
        from rollbench.policies.remote_batch import RemoteBatch

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
        slot of a batch client (:class:`~rollbench.policies.remote_batch.RemoteBatch`). Raises EpisodeError."""
        obs_map = resolve_obs_map(task.family, self.obs_protocol, self._overrides)
        if self.metadata.get("reset") is not True:
            return obs_map, None
        episode = {"task": task.name, "seed": int(seed), "instruction": task.instruction}
        check_reset_reply(self._request(message(episode)), self.url)
        return obs_map, episode


def check_reset_reply(reply: Any, url: str) -> None:
    """A reset must be answered ``{"reset": true}``; raises EpisodeError otherwise."""
    if not (isinstance(reply, Mapping) and reply.get("reset") is True):
        raise EpisodeError(f"malformed reply from {url} to reset: {jsonable(reply)!r:.300}")
