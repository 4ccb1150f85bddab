"""One ``ws://`` or ``http://`` client serving B slots with one batch request per lockstep step (``--batch-size B``).

Used only against servers whose metadata says ``"max_batch": N`` with ``N >= 2`` (``rollbench serve-policy
--max-batch N``); openpi servers, which do not say it, and ``serve-policy --max-batch 1`` get single observations
from one client per slot, exactly as before (:meth:`rollbench.policies.remote.RemotePolicy.batched` returns None).
The wire format of batch requests is in :mod:`rollbench.serve_batch`.

Each slot is its own server-side session, so its episode state never mixes with another slot's: over http a slot
has its own ``session`` id; over websocket the slots share the client's one connection and are named by their
index (``{"slot": i, "reset": ...}``, batch items ``{"slot": i, "observation": ...}``). ``reset_slot`` sends that
slot's reset (only to servers whose metadata says ``"reset": true``). ``act_batch`` sends the observations of the
asking slots in requests of at most ``N`` items, and gives each slot its own answer: its chunk ``float32 (k,
action_dim)``, or the exception that ends its episode:

* an item's ``{"error", "status"}`` entry: InfrastructureError for the statuses that say the server cannot take
  the call now (408, 410, 413, 503), else EpisodeError (fault ``policy``), quoting the server;
* actions missing or of the wrong size for the slot's task: EpisodeError;
* a reply with another number of entries than items: EpisodeError naming both counts, for every slot of that
  request (which answer belongs to which slot is then unknown);
* a failed round trip (timeout, lost connection after the retries, an error frame, HTTP error status):
  the client's own exception, for every slot of that request.

After a reconnect every slot's reset is re-sent before the pending request (as the single client does for its one
episode). ``close`` ends every slot's session (http) and the connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rollbench.policies.obs_map import ObsMap, check_actions, jsonable
from rollbench.policies.remote_wire import status_error
from rollbench.types import EpisodeError, Observation, TaskInfo

if TYPE_CHECKING:
    from rollbench.batching import Answer
    from rollbench.policies.remote import RemotePolicy


class RemoteBatch:
    """A :class:`~rollbench.batching.BatchPolicy` over one remote client (see the module docstring)."""

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
                    f"malformed reply from {c.url} to a batch request: no 'batch' list ({_shown(reply)})"
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
            said = f"server error from {c.url}: HTTP {status}: {str(entry['error']).strip()[-1500:]}"
            raise status_error(status, said)
        return check_actions(c._item_reply(entry), c.url, self.tasks[slot])

    def close(self) -> None:
        """End every slot's session (http; best effort), then the client's connection."""
        try:
            for slot_id in self.ids:
                self.client._close_slot(slot_id)
        finally:
            self.client.close()


def _shown(reply: Any) -> str:
    return f"got keys {sorted(map(str, reply))[:20]}" if isinstance(reply, Mapping) else f"got {jsonable(reply)!r:.200}"
