"""Every policy call has a deadline (``--policy-timeout SECONDS``, ``EvalSpec.policy_timeout_s``, default 300 s).

:class:`Deadline` wraps the batch policy every :class:`~rollbench.run.worker.EpisodeWorker` drives (in-process, in
worker processes and in Ray actors alike; a :class:`~rollbench.run.lockstep.BatchPolicy`, i.e. one policy instance per
slot or a policy's native batched form). Each ``reset_slot``/``act_batch`` runs on the wrapper's own helper thread
while the episode loop waits at most ``timeout_s`` seconds for it. A call past its deadline raises
:class:`PolicyTimeout` (an ``EpisodeError``), so the episodes it was for end as ``error`` and the run goes on.

The call is then still running in the helper thread: the policy's state is unknown, and a late return must never be
taken for another call's reply. So the wrapper abandons that policy (never calls it again; a daemon thread, so a
hung call never keeps the process from exiting) and builds a fresh one from its factory for the episodes that start
afterwards; episodes of other slots that were reset on the abandoned policy end as ``error`` at their next call
(their policy state is gone). ``misses`` counts missed deadlines: a worker process or Ray actor reports it with its
episode summaries and the worker pool replaces that worker once its episodes are done, which also reclaims the hung
thread (:mod:`rollbench.run.pool`).

Whose fault a missed deadline is (``EpisodeError.fault``):

* an in-process policy (a registered name or ``module:factory``): ``policy``. The code under evaluation did not
  return; nothing but the policy ran in that call.
* a served policy (``ws://``, ``http://``): ``infrastructure``. The call is a network round trip that the client
  bounds with its own, shorter ``timeout_s`` (default 30 s, an ``InfrastructureError``); still being inside it at
  the deadline means the transport hung, not the model.

Policies whose ``PolicyInfo.bounded`` is True (rollbench's own built-in arithmetic policies) are called inline: they
cannot hang, and the hand-offs made an in-process run of MetaWorld's expert on MT10 1.158x as long when the
background committer competes for the GIL (each hand-off may wait out the interpreter's 5 ms switch interval;
``MUJOCO_GL=egl python benchmarks/bench_deadline.py --eval 5 --reps 3``, BENCHMARKS.md).

Cost: one hand-off to the helper thread per call: 53 µs on an idle machine, 30-46 µs more than a direct call at load
average 7 (``python benchmarks/bench_deadline.py``, BENCHMARKS.md). A
thread rather than ``signal.alarm``: signals reach only the main thread (Ray actor methods run in another), and a
Python signal handler cannot end a call blocked in C code.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rollbench.core.batch import SlotPolicies
from rollbench.core.call_thread import CallThread, MissedDeadline
from rollbench.core.contracts import EpisodeError, Fault, InfrastructureError, Observation, TaskInfo, describe
from rollbench.core.working_dir import check_working_dir, working_dir
from rollbench.run.finalize import finalize_elsewhere

if TYPE_CHECKING:
    from rollbench.core.batch import Answer, BatchPolicy


class PolicyTimeout(MissedDeadline):
    """A policy call did not return within its deadline (see the module docstring for the fault)."""


class Deadline:
    """A :class:`~rollbench.run.lockstep.BatchPolicy` whose every call is bounded by ``timeout_s`` seconds (see the
    module docstring). ``build`` makes the batch policy, at construction and again after a missed deadline.
    ``before`` (optional) runs before every call into a policy that is not ``bounded``: the in-process runner's
    :meth:`~rollbench.record.background.BackgroundCommitter.settle`, so that every episode that ended is committed
    before the policy runs again.

    Attributes:
        misses: deadlines missed so far (each abandoned one policy).
    """

    def __init__(
        self,
        build: Callable[[], BatchPolicy],
        timeout_s: float,
        fault: Fault,
        before: Callable[[], None] | None = None,
    ) -> None:
        self._build = build
        self._before = before
        self.timeout_s = float(timeout_s)
        self.fault: Fault = fault
        self.misses = 0
        self.inner: BatchPolicy | None = build()
        self.info = self.inner.info
        self._caller: CallThread | None = None
        self._generation = 0  # bumped whenever a policy is abandoned
        self._slot_generation: dict[int, int] = {}

    def _live(self) -> BatchPolicy:
        if self.inner is None:  # abandoned after a missed deadline: a fresh one for the episodes starting now
            try:
                self.inner = self._build()
            except Exception as exc:  # e.g. the policy server is gone
                raise InfrastructureError(
                    f"could not build a fresh policy after a missed deadline ({describe(exc)})"
                ) from exc
        if self._caller is None and not self.info.bounded:
            self._caller = CallThread("rollbench-policy-call")
        return self.inner

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self.info.bounded:  # rollbench's own arithmetic policies: nothing to time out (PolicyInfo.bounded)
            return fn(*args)
        if self._before is not None:
            self._before()
        assert self._caller is not None
        cwd = working_dir()
        try:
            value = self._caller.call(self.timeout_s, fn, *args)
        except queue.Empty:
            self.misses += 1
            self._generation += 1
            if self.inner is not None:  # abandoned: never called again, its thread left to finish
                finalize_elsewhere(self.inner, self.timeout_s)
            self.inner, self._caller = None, None
            raise PolicyTimeout(
                f"policy.{what} did not return within --policy-timeout {self.timeout_s:g} s", self.fault
            ) from None
        finally:
            moved = check_working_dir(cwd, f"policy.{what}")
        if moved is not None:
            raise EpisodeError(moved, self.fault)
        return value

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        inner = self._live()
        self._call("reset", inner.reset_slot, slot, task, seed)
        self._slot_generation[slot] = self._generation

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[Answer]:
        stale = [s for s in slots if self._slot_generation.get(s) != self._generation]
        if stale:  # reset on a policy abandoned since: its state is gone
            lost = PolicyTimeout(
                "the policy instance this episode was reset on missed an earlier call's --policy-timeout "
                f"{self.timeout_s:g} s and was abandoned", self.fault
            )  # fmt: skip
            if len(stale) == len(slots):
                return [lost] * len(slots)
            fresh = [i for i, s in enumerate(slots) if s not in stale]
            partial = self.act_batch(
                [slots[i] for i in fresh], [observations[i] for i in fresh], [instructions[i] for i in fresh]
            )
            by_slot = dict(zip((slots[i] for i in fresh), partial, strict=True))
            return [by_slot.get(s, lost) for s in slots]
        inner = self._live()
        answers: list[Answer] = self._call("act", inner.act_batch, slots, observations, instructions)
        return answers

    def slot_policy(self, slot: int) -> object | None:
        """The live inner policy's instance for ``slot`` (see :func:`rollbench.run.lockstep._slot_policy`); None after
        a missed deadline abandoned it (its episodes already ended as ``error``)."""
        return self.inner.slot_policy(slot) if isinstance(self.inner, SlotPolicies) else None

    def close(self) -> None:
        """Close the live policy, waiting at most the deadline for a policy that is not ``bounded`` (PolicyTimeout
        past it: its close() is left running in a daemon thread); an abandoned one is left alone (closing it could
        block behind its hung call)."""
        if self._caller is not None:
            self._caller.stop()
        inner, self.inner = self.inner, None
        if inner is not None:
            try:
                close_within(inner.close, self.timeout_s, inline=self.info.bounded)
            finally:
                if not self.info.bounded:  # its __del__ never runs on this thread (rollbench's own: none)
                    finalize_elsewhere(inner, self.timeout_s)


def close_within(close: Callable[[], None], timeout_s: float, inline: bool = False) -> None:
    """``close()`` on a daemon thread of its own, waited for at most ``timeout_s`` seconds: a policy whose close()
    never returns cannot hang the run after its episodes are recorded (hostile round 10, F6). Raises what close()
    raised, or :class:`PolicyTimeout` (fault ``policy``) past the deadline, the call left running. ``inline``: a
    ``bounded`` policy (rollbench's own), closed in this thread."""
    if inline:
        close()
        return
    thread = CallThread("rollbench-policy-close")
    try:
        thread.call(timeout_s, close)
    except queue.Empty:
        raise PolicyTimeout(
            f"close() did not return within --policy-timeout {timeout_s:g} s; rollbench went on without it", "policy"
        ) from None
    finally:
        thread.stop()  # a close still running keeps its daemon thread until it returns


def closed_badly(exc: BaseException) -> str:
    """A failed close() in the words of a warning: its missed deadline, or what it raised."""
    return str(exc) if isinstance(exc, MissedDeadline) else f"close() raised {describe(exc)}"
