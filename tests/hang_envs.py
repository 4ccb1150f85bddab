"""Gymnasium envs that never return from one call, loaded through rollbench's ``gym`` family as
``gym:hang_envs:<ID>`` with ``tests/`` on PYTHONPATH (test doubles of an env a user hands rollbench, as in
``tests/fault_envs.py``): the ``scripted/reach`` point of :class:`fault_envs.Point`, whose ``reset``, ``step`` or
``close`` blocks for good in the episode of one seed.

* ``RollbenchHangStep-v0``: ``step`` blocks at step 2 of the episode reset with seed 101 (2 steps recorded first);
* ``RollbenchHangReset-v0``: ``reset`` blocks for seed 101;
* ``RollbenchHangClose-v0``: ``close`` blocks once the env was reset with seed 102;
* ``RollbenchHangProbe<Call>-v0``: the same with seed 0 (``step``: at step 0), the reset and step rollbench's ``gym``
  family checks a new id with (a hang before the run).

A blocked call waits on :data:`RELEASE` (never set by the envs; a test running them in its own process may set it
to let the abandoned threads end). Each build appends a line to ``$HANG_ENVS_BUILDS`` when that is set, so a test
can count the envs rollbench built.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import gymnasium as gym
import numpy as np

from fault_envs import Point
from rollbench import Observation, StepResult

RELEASE = threading.Event()


class Hang(Point):
    """:class:`fault_envs.Point` whose ``hang`` call (``reset``, ``step`` or ``close``) blocks in the episode of
    seed ``seed`` (``step``: at step ``at``)."""

    def __init__(self, render_mode: str | None = None, hang: str = "", seed: int = 101, at: int = 2) -> None:
        super().__init__(render_mode=render_mode)
        self.hang, self.hang_seed, self.at = hang, seed, at
        self.seeds: list[int | None] = []
        if path := os.environ.get("HANG_ENVS_BUILDS"):
            with open(path, "a") as f:
                f.write(f"{os.getpid()}\n")

    def _block(self, call: str) -> None:
        if self.hang == call and self.hang_seed in self.seeds[-1:]:
            RELEASE.wait()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        self.seeds.append(seed)
        self._block("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._t == self.at:
            self._block("step")
        return super().step(action)

    def close(self) -> None:
        if self.hang == "close" and self.hang_seed in self.seeds:
            RELEASE.wait()
        super().close()


for _call in ("step", "reset", "close"):
    for _id, _seed in ((f"RollbenchHang{_call.title()}-v0", 102 if _call == "close" else 101),
                       (f"RollbenchHangProbe{_call.title()}-v0", 0)):  # fmt: skip
        if _id not in gym.registry:
            gym.register(
                id=_id,
                entry_point=Hang,
                kwargs={"hang": _call, "seed": _seed, "at": 2 if _seed else 0},
                max_episode_steps=5,
            )
if "RollbenchHangNever-v0" not in gym.registry:  # behaves: the same env, no hang
    gym.register(id="RollbenchHangNever-v0", entry_point=Hang, max_episode_steps=5)


class Gate:
    """A :class:`rollbench.Env` (not gymnasium) whose calls named in ``blocks`` wait on ``gate`` (a test sets it to let
    abandoned threads end). ``calls`` lists ``(call, thread id)`` of every call made, the build included;
    ``expects`` (True) gives it the optional ``expect_images`` hook."""

    def __init__(self, task: Any, gate: threading.Event, blocks: tuple[str, ...] = (), expects: bool = False) -> None:
        self.task, self.gate, self.blocks = task, gate, blocks
        self.calls: list[tuple[str, int]] = [("make", threading.get_ident())]
        if expects:
            self.expect_images = lambda cameras: self._enter("expect_images")

    def _enter(self, call: str) -> None:
        self.calls.append((call, threading.get_ident()))
        if call in self.blocks:
            self.gate.wait()

    def reset(self, seed: int, initial_state: int | None = None) -> Any:
        self._enter("reset")
        return Observation(state=np.array([seed], dtype=np.float32))

    def step(self, action: np.ndarray) -> Any:
        self._enter("step")
        if float(action[0]) < 0:
            raise ValueError("Gate: a negative action")
        return StepResult(Observation(np.array(action, dtype=np.float32)), 0.5, False, False, True)

    def render(self, camera: str) -> np.ndarray:
        self._enter("render")
        return np.full((2, 2, 3), 7, dtype=np.uint8)

    def success(self) -> bool:
        self._enter("success")
        return False

    def close(self) -> None:
        self._enter("close")
