"""``--ray-policy-per-node``: one policy actor per node, answering every env actor Ray placed on that node.

The driver starts a :class:`PolicyActor` on a node (pinned there with Ray's node affinity, holding the node's
``--ray-gpus``) the first time an env actor lands on it, and gives each env actor of the node a :class:`NodePolicyClient`
for its ``batch_size`` slots: slots ``base .. base + B - 1`` of the policy actor, each its own session (its own policy
instance or its own slot of a natively batched policy, reset for each episode). The env actors step their episodes as
they would with their own policy (:mod:`rollbench.run.lockstep`), so every episode is the same pure function of its
plan whichever slot, actor or node runs it.

The policy actor is built with ``workers x batch_size`` slots (every env actor could land on one node). A policy with a
native batched form (``batched(size)``) is built once; any other keeps one instance per slot, built the first time the
slot is reset (so a node holds as many copies as it runs env slots: weight sharing needs a natively batched policy).
Concurrent ``act_batch`` calls of the node's env actors are gathered into one call of the batched policy: the first
waiting call waits at most :data:`GATHER_WINDOW_S` for the other attached actors' calls, then runs all that wait.
It requests no CPU (so that env actors holding every CPU of a node never keep it from being placed) and the node's
GPU share; Ray sets ``CUDA_VISIBLE_DEVICES`` in it, so a policy that uses ``cuda`` uses the GPU Ray assigned.

A call that fails because the policy actor is gone (its process died) is that episode's ``infrastructure`` error.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rollbench.core.batch import Answer, Batchable, BatchPolicy
from rollbench.core.contracts import InfrastructureError, Observation, Policy, PolicyInfo, TaskInfo, describe
from rollbench.core.spec import EvalSpec
from rollbench.run.lockstep import PolicyLoop
from rollbench.run.worker import build_policy

GATHER_WINDOW_S = 0.002


class LazyLoop(PolicyLoop):
    """A :class:`PolicyLoop` whose slot instances are built on their first reset (slot 0's is ``first``)."""

    def __init__(self, first: Policy, spec: EvalSpec, size: int) -> None:
        super().__init__([first])
        self._spec = spec
        self.built: dict[int, Policy] = {0: first}
        self.policies = [first] * size  # placeholders until built; only built slots are ever called

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        if slot not in self.built:
            self.built[slot] = self.policies[slot] = build_policy(self._spec)
        super().reset_slot(slot, task, seed)

    def close(self) -> None:
        for policy in self.built.values():
            policy.close()


@dataclass
class _Call:
    slots: list[int]
    observations: list[Observation]
    instructions: list[str]
    at: float = field(default_factory=time.monotonic)
    answers: list[Answer] | None = None


class PolicyActor:
    """The body of a node's policy actor (see the module docstring); a threaded Ray actor."""

    def __init__(self, spec: EvalSpec, size: int) -> None:
        self.error: str | None = None
        self.policy: BatchPolicy | None = None
        self.clients = 0
        self._lock = threading.Lock()  # every call into the policy
        self._cond = threading.Condition()
        self._queue: list[_Call] = []
        self._serving = False
        try:
            first = build_policy(spec)
            batched = first.batched(size) if isinstance(first, Batchable) else None
            self.policy = batched if batched is not None else LazyLoop(first, spec, size)
        except Exception as exc:
            self.error = f"could not build the policy: {describe(exc)}\n{traceback.format_exc()}"

    def ready(self) -> dict[str, Any]:
        """``{"error", "pid", "node", "gpu_ids", "cuda_visible_devices", "info"}`` (info: the PolicyInfo)."""
        import ray

        return {
            "error": self.error,
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "info": None if self.policy is None else self.policy.info,
        }

    def attach(self, delta: int) -> int:
        """An env actor started (+1) or went away (-1) on this node; returns how many are attached."""
        with self._cond:
            self.clients = max(0, self.clients + delta)
            self._cond.notify_all()
            return self.clients

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        assert self.policy is not None
        with self._lock:
            self.policy.reset_slot(slot, task, seed)

    def act_batch(self, slots: list[int], observations: list[Observation], instructions: list[str]) -> list[Answer]:
        """One answer per slot (see :class:`rollbench.core.batch.BatchPolicy`), gathered with other env actors'."""
        call = _Call(list(slots), list(observations), list(instructions))
        with self._cond:
            self._queue.append(call)
            self._cond.notify_all()
            while call.answers is None:
                if self._serving:
                    self._cond.wait()
                    continue
                deadline = self._queue[0].at + GATHER_WINDOW_S
                while len(self._queue) < self.clients and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
                taken, self._queue = self._queue, []
                self._serving = True
                self._cond.release()
                try:
                    self._run(taken)
                finally:
                    self._cond.acquire()
                    self._serving = False
                    self._cond.notify_all()
        return call.answers

    def _run(self, taken: list[_Call]) -> None:
        assert self.policy is not None
        slots = [s for c in taken for s in c.slots]
        try:
            with self._lock:
                answers: list[Answer] = list(
                    self.policy.act_batch(
                        slots, [o for c in taken for o in c.observations], [i for c in taken for i in c.instructions]
                    )
                )
            if len(answers) != len(slots):
                raise RuntimeError(f"act_batch returned {len(answers)} answers for {len(slots)} observations")
        except BaseException as exc:  # the batch call failed: every slot of it fails
            answers = [exc] * len(slots)
        at = 0
        for c in taken:
            c.answers, at = answers[at : at + len(c.slots)], at + len(c.slots)

    def close(self) -> None:
        if self.policy is not None:
            with self._lock:
                self.policy.close()


class NodePolicyClient:
    """An env actor's :class:`~rollbench.core.batch.BatchPolicy` over slots ``base..base+size-1`` of its node's
    policy actor ``handle``; a lost policy actor is each requested slot's :class:`InfrastructureError`."""

    def __init__(self, handle: Any, base: int, info: PolicyInfo) -> None:
        self.handle, self.base, self.info = handle, base, info

    def _get(self, ref: Any) -> Any:
        import ray

        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the policy raised: that exception, as if called here
            raise exc.as_instanceof_cause() from None
        except ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InfrastructureError(f"the node's policy actor is gone: {first}") from None

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        self._get(self.handle.reset_slot.remote(self.base + slot, task, seed))

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[Answer]:
        try:
            answers: list[Answer] = self._get(
                self.handle.act_batch.remote([self.base + s for s in slots], list(observations), list(instructions))
            )
        except InfrastructureError as exc:
            return [exc] * len(slots)
        return answers

    def close(self) -> None:
        pass
