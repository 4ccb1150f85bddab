"""Gymnasium envs used by the tests to provoke specific behaviours, loaded through rollbench's generic ``gym`` family as
``gym:fault_envs:<ID>`` (gymnasium's ``module:id`` form imports this module, which registers the ids), with
``tests/`` on PYTHONPATH.

These are deliberate test doubles of an *env* (the thing rollbench drives), not of any rollbench part: each is a
real gymnasium env, stepped by rollbench's real adapter and episode loop.

:class:`Point` is the ``scripted/reach`` point (state ``float32 [x, y, goal_x, goal_y]`` in metres, action
``float32 (2,)`` in ``[-1, 1]``, ``0.1 m`` per unit per step, success within ``0.05 m``, reported as
``info["is_success"]``), drawn from ``self.np_random`` (gymnasium's seeding), with a 32 x 32 ``rgb_array`` render.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SIZE = 32


class Point(gym.Env[np.ndarray, np.ndarray]):
    """See the module docstring. Options (registration kwargs):

    * ``reuse``: the observation and the rendered frame are the *same* arrays every time, overwritten in place
      (an env returning its state buffer, a renderer reusing its frame buffer);
    * ``solved_key``: ``"success"`` or ``"is_success"``: reset puts the point on the goal and says so in the reset
      info under that key (an episode solved before any action);
    * ``no_render_build``: the constructor raises when a render mode is asked for (an env that cannot be built);
    * ``step_error_at``: ``step`` raises at that step (a simulator fault): RuntimeError, or the ``BaseException``
      named by ``step_error_kind`` (``SystemExit``, ``KeyboardInterrupt``, ``custom``: a direct ``BaseException``
      subclass; ``exit_process``: ``os._exit(0)``, the process ends inside ``step``, a simulator that aborts);
    * ``render_failure``: ``"black"``: every frame after the first is all zeros (a lost GL context); ``"frozen"``:
      every frame is the first one while the point moves (a renderer bound to a stale simulation).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        render_mode: str | None = None,
        reuse: bool = False,
        solved_key: str | None = None,
        no_render_build: bool = False,
        step_error_at: int | None = None,
        step_error_kind: str = "RuntimeError",
        render_failure: str | None = None,
    ) -> None:
        if no_render_build and render_mode is not None:
            raise RuntimeError("fault_envs: this env cannot be built with a renderer")
        self.render_mode = render_mode
        self.reuse, self.solved_key, self.step_error_at = reuse, solved_key, step_error_at
        self.step_error_kind, self.render_failure = step_error_kind, render_failure
        self._renders, self._first_frame = 0, np.zeros(0, dtype=np.uint8)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self._obs = np.zeros(4, dtype=np.float32)
        self._frame = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
        self._t = 0

    def _observation(self) -> np.ndarray:
        return self._obs if self.reuse else self._obs.copy()

    def _success(self) -> bool:
        return bool(np.linalg.norm(self._obs[:2] - self._obs[2:]) < 0.05)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._obs[:] = self.np_random.uniform(0.1, 0.9, size=4)
        self._t = 0
        info: dict[str, Any] = {}
        if self.solved_key:
            self._obs[:2] = self._obs[2:]
            info[self.solved_key] = self._success()
        return self._observation(), info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.step_error_at is not None and self._t == self.step_error_at:
            if self.step_error_kind == "exit_process":
                os._exit(0)
            kind = {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt, "custom": SimulatorPanic}
            raise kind.get(self.step_error_kind, RuntimeError)(f"fault_envs: the simulator failed at step {self._t}")
        self._t += 1
        self._obs[:2] = np.clip(self._obs[:2] + 0.1 * np.clip(action, -1.0, 1.0), 0.0, 1.0)
        dist = float(np.linalg.norm(self._obs[:2] - self._obs[2:]))
        return self._observation(), -dist, False, False, {"is_success": self._success()}

    def render(self) -> np.ndarray:
        self._renders += 1
        if self.render_failure == "black" and self._renders > 1:
            return np.zeros_like(self._frame)
        if self.render_failure == "frozen" and self._renders > 1:
            return self._first_frame.copy()
        frame = self._frame if self.reuse else np.zeros_like(self._frame)
        frame[:] = 0
        for p, color in ((self._obs[2:], (0, 200, 0)), (self._obs[:2], (255, 255, 255))):
            r, c = int(p[1] * (SIZE - 1)), int(p[0] * (SIZE - 1))
            frame[max(r - 2, 0) : r + 3, max(c - 2, 0) : c + 3] = color
        if self._renders == 1:
            self._first_frame = frame.copy()
        return frame


class SimulatorPanic(BaseException):
    """A ``BaseException`` that is neither ``Exception``, ``SystemExit`` nor ``KeyboardInterrupt``."""


def _register(env_id: str, **kwargs: Any) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=Point, kwargs=kwargs, max_episode_steps=30)


_register("RollbenchPoint-v0")
_register("RollbenchReusePoint-v0", reuse=True)
_register("RollbenchSolvedSuccess-v0", solved_key="success")
_register("RollbenchSolvedIsSuccess-v0", solved_key="is_success")
_register("RollbenchNoRenderBuild-v0", no_render_build=True)
_register("RollbenchStepError-v0", step_error_at=2)
_register("RollbenchStepExit-v0", step_error_at=2, step_error_kind="SystemExit")
_register("RollbenchStepKeyboard-v0", step_error_at=2, step_error_kind="KeyboardInterrupt")
_register("RollbenchStepPanic-v0", step_error_at=2, step_error_kind="custom")
_register("RollbenchStepEndsProcess-v0", step_error_at=2, step_error_kind="exit_process")
_register("RollbenchBlackRender-v0", render_failure="black")
_register("RollbenchFrozenRender-v0", render_failure="frozen")
