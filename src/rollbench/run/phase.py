"""Whose code a worker process is running, kept where the parent can read it after the worker dies.

A worker process (``--workers K``) can die inside code under evaluation: a policy that calls ``os._exit`` or
segfaults in ``act``, a simulator that aborts in ``step``. The parent sees only that the process is gone, so before
every call into the policy or the env the worker writes the call and the episodes it is for into a few shared
integers (:class:`PhaseBoard`, one per worker process, created by the parent and inherited by the child). When the
worker dies, the parent reads the board (:meth:`PhaseBoard.read`) and charges the death to the side that was
running (:mod:`rollbench.run.pool`): inside a policy call the episodes of that call end as ``policy`` errors, inside
an env call as ``environment`` errors, and anywhere else (rollbench's own code, waiting for work, building an env)
the death is ``infrastructure`` and the episodes are run again as before.

The board says where the worker *was*, not who killed it: a worker killed from outside (``kill -9``, the OOM killer)
while the policy's call runs is charged to the policy too. Nothing can tell that apart from a policy that kills its
own process, and re-running such an episode would let a policy re-roll the episodes it was losing.

Layout (int64 cells): ``[call, n, episode_0 .. episode_{B-1}, slot_episode_0 .. slot_episode_{B-1}]``: the call
running now (an index into :data:`CALLS`; 0 is rollbench's own code), how many episodes it is for and their indices,
then the episode each of the worker's B batch slots holds (:func:`bind`). Writes are ordered so that a reader never
sees a call with the wrong episodes: the episodes first, then the call; on leaving, the call is cleared first.
Outside worker processes (an in-process run, a Ray actor) no board is installed and every function here returns at
once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, Literal

CALLS: tuple[str, ...] = (
    "",  # rollbench's own code, or waiting for work
    "policy.reset",
    "policy.act",
    "policy.finish_episode",
    "env.reset",
    "env.render",
    "env.step",
)
Owner = Literal["policy", "environment", "infrastructure"]

_board: Any = None  # this process's cells (a multiprocessing RawArray), installed by a worker process
_slots = 0


@dataclass(frozen=True)
class Phase:
    """What a worker was doing when it was last seen: ``call`` (one of :data:`CALLS`, "" for rollbench's own code)
    and the ``episodes`` (indices) that call was for."""

    call: str
    episodes: tuple[int, ...]

    @property
    def owner(self) -> Owner:
        """Whose code ran: ``policy`` for ``policy.*`` calls, ``environment`` for ``env.*``, else
        ``infrastructure``."""
        if self.call.startswith("policy."):
            return "policy"
        return "environment" if self.call.startswith("env.") else "infrastructure"

    def describe(self) -> str:
        """``the policy's act`` / ``the env's step`` / ``rollbench's own code``."""
        if not self.call:
            return "rollbench's own code"
        side, name = self.call.split(".", 1)
        return f"the {side}'s {name}"


class PhaseBoard:
    """The parent's handle on one worker process's cells (pass :attr:`cells` to the child, which calls
    :func:`install`). ``slots``: the worker's batch size."""

    def __init__(self, ctx: BaseContext, slots: int) -> None:
        self.slots = slots
        self.cells = ctx.RawArray("q", 2 + 2 * slots)  # zero-filled: rollbench's own code

    def read(self) -> Phase:
        """The phase the worker last wrote (call it once the worker is dead)."""
        cells = self.cells
        call = int(cells[0])
        if not 0 < call < len(CALLS):
            return Phase("", ())
        n = max(0, min(int(cells[1]), self.slots))
        return Phase(CALLS[call], tuple(int(cells[2 + i]) for i in range(n)))


def install(cells: Any, slots: int) -> None:
    """Make ``cells`` (a :class:`PhaseBoard`'s) this process's board; called once in a worker process."""
    global _board, _slots
    _board, _slots = cells, slots


def bind(slot: int, episode_index: int) -> None:
    """Batch slot ``slot`` now holds episode ``episode_index`` (for :func:`inside_slots`)."""
    if _board is not None and 0 <= slot < _slots:
        _board[2 + _slots + slot] = episode_index


class inside:
    """``with inside("policy.act", [17, 18]): ...``: the call runs for those episodes (a no-op without a board)."""

    __slots__ = ("call",)

    def __init__(self, call: str, episodes: Sequence[int]) -> None:
        self.call = 0
        board = _board
        if board is None:
            return
        n = min(len(episodes), _slots)
        for i in range(n):
            board[2 + i] = episodes[i]
        board[1] = n
        self.call = CALLS.index(call)

    def __enter__(self) -> None:
        if self.call:
            _board[0] = self.call

    def __exit__(self, *exc: object) -> None:
        if self.call:
            _board[0] = 0


def inside_slots(call: str, slots: Sequence[int]) -> inside:
    """:class:`inside` for the episodes the batch slots ``slots`` hold (see :func:`bind`)."""
    if _board is None:
        return inside(call, ())
    return inside(call, [int(_board[2 + _slots + s]) for s in slots if 0 <= s < _slots])
