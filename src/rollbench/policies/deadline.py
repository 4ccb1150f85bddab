"""Every policy call has a deadline (``--policy-timeout SECONDS``, ``EvalSpec.policy_timeout_s``, default 300 s).

:class:`Deadline` wraps the run's policy (in-process, in worker processes and in Ray actors alike: ``execute.
build_policy`` applies it). Each ``reset``/``act`` runs on the wrapper's own helper thread while the episode loop waits
at most ``timeout_s`` seconds for it. A call past its deadline raises :class:`PolicyTimeout` (an ``EpisodeError``),
so the episode ends as ``error`` and the run goes on; the wrapper is then *hung*: the call is still running in the
helper thread, the policy's state is unknown, and a late return must never be taken for another call's reply, so the
policy is never called again. :class:`rollbench.execute.EpisodeWorker` builds a fresh policy before its next episode
(in this process), and the worker pool replaces a worker process or Ray actor whose policy hung (which also reclaims
the hung thread). The helper thread is a daemon thread, so a hung call never keeps the process from exiting.

Whose fault a missed deadline is (``EpisodeError.fault``):

* an in-process policy (a registered name or ``module:factory``): ``policy``. The code under evaluation did not
  return; nothing but the policy ran in that call.
* a served policy (``ws://``, ``http://``): ``infrastructure``. The call is a network round trip that the client
  bounds with its own, shorter ``timeout_s`` (default 30 s, an ``InfrastructureError``); still being inside it at
  the deadline means the transport hung, not the model.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from rollbench.types import EpisodeError, Fault, Observation, Policy, TaskInfo


class PolicyTimeout(EpisodeError):
    """A policy call did not return within its deadline (see the module docstring for the fault)."""


class Deadline:
    """``inner`` with every ``reset``/``act`` bounded by ``timeout_s`` seconds (see the module docstring).

    Attributes:
        hung: True once a call missed its deadline; every later call raises PolicyTimeout at once.
    """

    def __init__(self, inner: Policy, timeout_s: float, fault: Fault) -> None:
        self.inner = inner
        self.info = inner.info
        self.timeout_s = float(timeout_s)
        self.fault: Fault = fault
        self.hung = False
        # two C-implemented queues: a call costs ~30 us of thread hand-off (BENCHMARKS.md), an Event twice that
        self._calls: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._replies: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, args = call
            try:
                self._replies.put((True, fn(*args)))
            except BaseException as exc:  # handed to the waiting caller, raised there
                self._replies.put((False, exc))

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self.hung:
            raise PolicyTimeout(f"the policy is still inside an earlier call past its deadline; policy.{what} "
                                "was not called", self.fault)  # fmt: skip
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="rollbench-policy-call", daemon=True)
            self._thread.start()
        self._calls.put((fn, args))
        try:
            ok, value = self._replies.get(timeout=self.timeout_s)
        except queue.Empty:
            self.hung = True  # a late reply would sit in _replies: the policy is never called again
            raise PolicyTimeout(
                f"policy.{what} did not return within --policy-timeout {self.timeout_s:g} s", self.fault
            ) from None
        if not ok:
            raise value
        return value

    def reset(self, task: TaskInfo, seed: int) -> None:
        self._call("reset", self.inner.reset, task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        result: np.ndarray = self._call("act", self.inner.act, observation, instruction)
        return result

    def close(self) -> None:
        """Close the inner policy, unless it is hung: then it is abandoned (closing it could block behind the call
        still running), and its process reclaims it."""
        if self.hung:
            return
        if self._thread is not None:
            self._calls.put(None)
        self.inner.close()
