"""Policies that misbehave outside their actions (hostile round 10), test doubles of a policy under evaluation:
they change the process's working directory (``os.chdir`` to ``options["to"]``), as some libraries do to load their
assets, in ``act`` (``misbehaving_policies:in_act``) or in the factory (``misbehaving_policies:in_factory``); or
their ``close()`` never returns (``misbehaving_policies:close_hangs``); or (hostile round 12) they write junk into or
close every descriptor of their worker process (``misbehaving_policies:breaks_its_worker``), or their ``__del__``
never returns (``misbehaving_policies:del_never_returns``)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import Observation, PolicyInfo, TaskInfo


class InAct:
    """Zero actions; every ``act`` first changes the working directory to ``options["to"]``."""

    info = PolicyInfo(name="chdir-in-act")

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.to = str(options["to"])

    def reset(self, task: TaskInfo, seed: int) -> None:
        pass

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        os.chdir(self.to)
        return np.zeros((1, 2), np.float32)

    def close(self) -> None:
        pass


def in_act(name: str, options: Mapping[str, Any]) -> InAct:
    return InAct(options)


def in_factory(name: str, options: Mapping[str, Any]) -> InAct:
    os.chdir(str(options["to"]))
    return InAct({"to": os.getcwd()})


class CloseHangs(InAct):
    """Zero actions; ``close()`` sleeps for a day."""

    def __init__(self) -> None:
        super().__init__({"to": "."})

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return np.zeros((1, 2), np.float32)

    def close(self) -> None:
        time.sleep(86_400)


def close_hangs(name: str, options: Mapping[str, Any]) -> CloseHangs:
    return CloseHangs()


class MutatesState:
    """The scripted expert's actions, then it writes 123 into every value of ``observation.state`` it was given."""

    def __init__(self) -> None:
        from rollbench.core.registry import make_policy

        self.inner = make_policy("scripted-expert", {})
        self.info = self.inner.info

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        action = np.array(self.inner.act(observation, instruction), copy=True)
        observation.state[:] = 123
        return action

    def close(self) -> None:
        self.inner.close()


def mutates_state(name: str, options: Mapping[str, Any]) -> MutatesState:
    return MutatesState()


class DelRaises(CloseHangs):
    """Zero actions; a plain ``close()``, but ``__del__`` raises RuntimeError("del boom")."""

    def close(self) -> None:
        pass

    def __del__(self) -> None:
        raise RuntimeError("del boom")


def del_raises(name: str, options: Mapping[str, Any]) -> DelRaises:
    return DelRaises()


class GarblesChannel(DelRaises):
    """Zero actions; every ``act`` writes ``b"garbage\\n"`` into every socket its process holds (a worker's channel
    to rollbench is one), as a native library logging to a wrong descriptor would."""

    def __del__(self) -> None:
        pass

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        for fd in range(3, 64):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                    os.write(fd, b"garbage\n")
        return np.zeros((1, 2), np.float32)


def garbles_channel(name: str, options: Mapping[str, Any]) -> GarblesChannel:
    return GarblesChannel()


def claims_bounded(name: str, options: Mapping[str, Any]) -> InAct:
    """A plug-in declaring ``PolicyInfo(bounded=True)``, which would switch its calls' deadline off."""
    from dataclasses import replace

    policy = InAct({"to": "."})
    policy.info = replace(InAct.info, bounded=True)  # type: ignore[misc]
    return policy


class BreaksItsWorker(CloseHangs):
    """Zero actions; on its second ``act`` the first instance to claim the file ``options["once"]`` (any process)
    does to every descriptor 3..39 of its process what ``options["how"]`` says: ``junk`` writes
    ``b"\\xff\\x00garbage" * 1000`` into each (a worker's channel to rollbench and its exit pipe among them),
    ``close`` closes each; then it sleeps ``options["then_sleep"]`` seconds (default 1.5) and returns."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        super().__init__()
        self.how, self.once = str(options["how"]), str(options["once"])
        self.then_sleep = float(options.get("then_sleep", 1.5))
        self.calls = 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        self.calls += 1
        if self.calls == 2 and self._claim():
            for fd in range(3, 40):
                with contextlib.suppress(OSError):
                    if self.how == "junk":
                        os.write(fd, b"\xff\x00garbage" * 1000)
                    else:
                        os.close(fd)
            time.sleep(self.then_sleep)
        return np.zeros((1, 2), np.float32)

    def _claim(self) -> bool:
        try:
            os.close(os.open(self.once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def close(self) -> None:
        pass


def breaks_its_worker(name: str, options: Mapping[str, Any]) -> BreaksItsWorker:
    return BreaksItsWorker(options)


class DelNeverReturns(CloseHangs):
    """Zero actions; a plain ``close()``, but ``__del__`` sleeps for a day (hostile round 12, F1)."""

    def close(self) -> None:
        pass

    def __del__(self) -> None:
        time.sleep(86_400)


def del_never_returns(name: str, options: Mapping[str, Any]) -> DelNeverReturns:
    return DelNeverReturns()
