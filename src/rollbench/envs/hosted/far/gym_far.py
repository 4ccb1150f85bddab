"""Env-host adapter for any gymnasium env in the user's own interpreter (the ``hostedgym`` family, docs/env-host.md).

Runs inside :mod:`host` (never imports rollbench; needs only gymnasium and numpy, of whatever versions the user's
venv pins). ``start(["--env-id", ID])``; ``ID`` is a gymnasium id, or gymnasium's own ``module:ID`` form (imports
``module`` of the user's venv first). Ops:

* ``probe`` -> ``ok`` {action: {kind: "box"|"discrete", low, high}, state_dim, max_episode_steps, fps, render,
  success_key}: builds the env, resets it with seed 0, takes one step with the mid-range action and reports its
  spaces, its TimeLimit, ``metadata["render_fps"]`` (else ``1 / dt``), whether it renders ``rgb_array`` and which
  success key (``is_success``, ``success``) its step info holds (None: neither). A ``Box`` action space must be flat
  with finite bounds; ``Discrete(n, start)`` becomes one action dim in ``[start, start + n - 1]``, rounded to the
  nearest integer (and clipped) on every step. The observation is flattened by ``gymnasium.spaces.flatten``.
* ``make`` {render: bool, image_size: [h, w]} -> ``ok``: builds the env (``render_mode="rgb_array"``, with
  ``width``/``height`` where the env takes them, when ``render``).
* ``reset`` {seed} / ``step`` (array ``action`` float64 ``(action_dim,)``) -> ``obs`` {reward, terminated,
  truncated, success, info} + arrays ``state`` (float32 ``(state_dim,)``) and, when rendering, ``image`` (uint8
  ``(H, W, 3)``). ``reset`` seeds python's and numpy's global generators and the env (``reset(seed=seed)``) from the
  episode's seed. ``success`` is the success key's truthiness (False without one).
* ``drop`` -> ``ok``: closes the env (the process is kept for the next env, docs/env-host.md "Reuse").
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import random
import sys
from typing import Any

import numpy as np

OPS = frozenset({"probe", "make", "reset", "step", "drop"})
SUCCESS_KEYS = ("is_success", "success")
DEFAULT_FPS = 10


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _success_key(info: dict[str, Any]) -> str | None:
    return next((k for k in SUCCESS_KEYS if k in info), None)


def _scalars(info: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, bool | int | float | np.bool_ | np.integer | np.floating) or (
            isinstance(v, np.ndarray) and v.shape == ()
        ):
            value = np.asarray(v).item()
            if not isinstance(value, float) or np.isfinite(value):
                out[str(k)] = value
    return out


class GymAdapter:
    OPS = OPS

    def __init__(self, env_id: str) -> None:
        import gymnasium

        self.gym = gymnasium
        self.env_id = env_id
        self.env: Any = None
        self.key: str | None = None

    def _build(self, render: bool = False, size: tuple[int, int] | None = None) -> Any:
        if render and size is not None:
            try:
                return self.gym.make(self.env_id, render_mode="rgb_array", width=size[1], height=size[0])
            except TypeError:  # the env takes no width/height: rendered at its own size, resized by rollbench
                pass
        return self.gym.make(self.env_id, render_mode="rgb_array") if render else self.gym.make(self.env_id)

    def _action(self, value: np.ndarray) -> Any:
        space = self.env.action_space
        if isinstance(space, self.gym.spaces.Discrete):
            lo, hi = int(space.start), int(space.start) + int(space.n) - 1
            return int(np.clip(np.rint(float(value[0])), lo, hi))
        return np.asarray(value, dtype=space.dtype)

    def _describe_action(self, space: Any) -> dict[str, Any]:
        spaces = self.gym.spaces
        if isinstance(space, spaces.Discrete):
            lo = int(space.start)
            return {"kind": "discrete", "low": [float(lo)], "high": [float(lo + int(space.n) - 1)]}
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"action space {space}: rollbench needs a flat Box or a Discrete space")
        low, high = np.asarray(space.low, dtype=np.float64), np.asarray(space.high, dtype=np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"action space {space} is unbounded: rollbench needs finite bounds")
        return {"kind": "box", "low": low.tolist(), "high": high.tolist()}

    def _obs(self, obs: Any, reply: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {"state": np.asarray(self.gym.spaces.flatten(self.env.observation_space, obs), dtype=np.float32)}
        if self.env.render_mode == "rgb_array":
            arrays["image"] = np.ascontiguousarray(np.asarray(self.env.render())[..., :3], dtype=np.uint8)
        return {"op": "obs", **reply}, arrays

    def probe(self) -> dict[str, Any]:
        self.env = self._build()
        action = self._describe_action(self.env.action_space)
        self.env.reset(seed=0)
        mid = (np.asarray(action["low"]) + np.asarray(action["high"])) / 2
        info = self.env.step(self._action(mid))[4]
        spec, meta, unwrapped = self.env.spec, self.env.metadata, self.env.unwrapped
        fps = meta.get("render_fps") or (1.0 / unwrapped.dt if getattr(unwrapped, "dt", None) else DEFAULT_FPS)
        return {
            "op": "ok",
            "action": action,
            "state_dim": int(self.gym.spaces.flatdim(self.env.observation_space)),
            "max_episode_steps": int(spec.max_episode_steps) if spec and spec.max_episode_steps else None,
            "fps": max(1, round(float(fps))),
            "render": "rgb_array" in meta.get("render_modes", ()),
            "success_key": _success_key(info),
        }

    def handle(self, op: str, msg: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[dict[str, Any], Any]:
        if op in ("probe", "make", "drop") and self.env is not None:
            self.env.close()
            self.env = None
        if op == "probe":
            reply = self.probe()
            self.env.close()
            self.env = None
            return reply, None
        if op == "make":
            size = msg.get("image_size")
            self.env = self._build(bool(msg.get("render")), (int(size[0]), int(size[1])) if size else None)
            self.key = None
            return {"op": "ok"}, None
        if op == "drop":
            return {"op": "ok"}, None
        if self.env is None:
            raise RuntimeError(f"{op} before make")
        if op == "reset":
            seed = int(msg["seed"])
            random.seed(seed)
            np.random.seed(seed % 2**32)
            obs, info = self.env.reset(seed=seed)
            self.key = self.key or _success_key(info)
            return self._obs(obs, {"success": bool(np.asarray(info[self.key]).item()) if self.key in info else False})
        obs, reward, terminated, truncated, info = self.env.step(self._action(arrays["action"]))
        self.key = self.key or _success_key(info)
        return self._obs(
            obs,
            {
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "success": bool(np.asarray(info[self.key]).item()) if self.key in info else False,
                "info": _scalars(info),
            },
        )


def start(argv: list[str]) -> tuple[GymAdapter, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="gym_far")
    parser.add_argument("--env-id", required=True)
    args = parser.parse_args(argv)
    adapter = GymAdapter(args.env_id)
    info = {
        "python": sys.executable,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "versions": {d: _version(d) for d in ("gymnasium", "numpy")},
    }
    return adapter, info
