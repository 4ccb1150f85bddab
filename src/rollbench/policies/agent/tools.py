"""The tools an LLM agent drives a robot with, per env family, and how each tool call becomes env actions.

Every tool call becomes an *action chunk* ``float32 (k, action_dim)`` that the episode loop executes in full
(the agent advertises ``replan_every = max_move_steps``), except ``done`` and ``give_up``, which end the episode.
Every tool call costs at least one env step (``take_picture`` executes one *hold* action), so the episode's horizon
(``--max-steps``, else the task's) is the agent's step budget and bounds its model calls.

Tool sets (the tool descriptions sent to the model say the same; units are the simulator's):

Which set a task gets, and the scales, are its env family's declared ``arm``
(:class:`~rollbench.core.family.ArmLayout`; ``EnvFamily.arm``):

* **arm** (MetaWorld, Fetch, robosuite): the action is an end-effector displacement ``dx, dy, dz`` in
  ``[-1, 1]`` scaled by the family's ``metres_per_unit`` per step (MetaWorld 0.01 m, Fetch 0.05 m, robosuite OSC_POSE
  0.05 m; robosuite's three rotation deltas are held at 0), plus a gripper command.

  - ``move_delta(dx, dy, dz)`` (metres, world frame): ``n = ceil(max|d| / metres_per_unit)`` steps (at most
    ``max_move_steps``; a longer move is cut short and the result says so) of action ``d / (n * metres_per_unit)``
    per axis, with the current gripper command.
  - ``move_to(x, y, z)`` (metres, world frame): ``move_delta`` of ``target - hand position``, the hand position
    being ``state[0:3]`` of the observation before the chunk (open loop: the arm's tracking error is not corrected
    within one call; the next tool result reports where the hand really is).
  - ``gripper(command)``: ``"close"`` or ``"open"``: ``gripper_steps`` steps of zero motion with the gripper action
    at ``close`` / ``-close`` (MetaWorld and robosuite close at +1, Fetch at -1); the command then persists in
    every following move, so a grasped object stays grasped.
* **planar** (an arm layout without a gripper: the scripted family): a point moved by ``0.1 m * clip(action, -1,
  1)`` per step; ``move_delta(dx, dy)`` and ``move_to(x, y)`` as above with ``state[0:2]`` the position (and the
  goal, ``state[2:4]``, told to the model); no gripper.
* **raw** (every family that declares no arm: PushT, any gymnasium env, LIBERO): ``set_action(action, steps)``: the raw action
  vector (clipped to the task's bounds) repeated ``steps`` times (1..``max_move_steps``).
* every set: ``take_picture()`` (one hold step, then the camera image is sent as an image message),
  ``done()`` (the agent claims the task is done: termination reason ``policy_stop``; success is still the env's
  judgement), ``give_up(reason)`` (termination reason ``give_up``).

A hold action is zero motion with the current gripper command (raw set: the midpoint of the action bounds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rollbench.core.contracts import EpisodeError, TaskInfo
from rollbench.core.registry import env_family
from rollbench.wire.decode import described

_AXES = ("x", "y", "z")


def _fn(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required, "additionalProperties": False},
        },
    }


def _num(desc: str) -> dict[str, Any]:
    return {"type": "number", "description": desc}


class ToolSet:
    """The tools for one task and the mapping of a tool call to an action chunk (see the module docstring).

    Args:
        task: the task (its family picks the set; its action bounds clip raw actions).
        max_move_steps: the longest chunk one tool call may produce (>= 1).
        gripper_steps: steps a ``gripper`` call takes (>= 1).
    """

    def __init__(self, task: TaskInfo, max_move_steps: int, gripper_steps: int) -> None:
        self.task = task
        self.max_move_steps, self.gripper_steps = max_move_steps, gripper_steps
        family = env_family(task.family)
        self.arm = family.arm if family is not None else None  # the family's declared ArmLayout
        self.kind = "raw" if self.arm is None else ("planar" if self.arm.gripper_dim is None else "arm")
        self.low = np.asarray(task.action_low, dtype=np.float32)
        self.high = np.asarray(task.action_high, dtype=np.float32)
        self.grip = -self.arm.close if self.arm and self.arm.gripper_dim is not None else 0.0  # starts open
        self.axes = _AXES[: (3 if self.kind == "arm" else 2)]

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` list for this set."""
        tools = []
        if self.kind == "raw":
            dim = self.task.action_dim
            tools.append(
                _fn(
                    "set_action",
                    f"Apply a raw action vector of {dim} numbers (bounds low={self.low.tolist()}, "
                    f"high={self.high.tolist()}) for `steps` env steps (1..{self.max_move_steps}).",
                    {
                        "action": {"type": "array", "items": {"type": "number"}, "minItems": dim, "maxItems": dim},
                        "steps": {"type": "integer", "minimum": 1, "maximum": self.max_move_steps},
                    },
                    ["action", "steps"],
                )
            )
        else:
            assert self.arm is not None
            per = self.arm.metres_per_unit
            limit = f"at most {per:g} m per axis per env step and {self.max_move_steps} steps per call"
            tools.append(
                _fn(
                    "move_to",
                    f"Move the {'hand' if self.kind == 'arm' else 'point'} to a position in metres (world frame), "
                    f"{limit}.",
                    {a: _num(f"target {a}, metres") for a in self.axes},
                    list(self.axes),
                )
            )
            tools.append(
                _fn(
                    "move_delta",
                    f"Move by a displacement in metres (world frame), {limit}.",
                    {f"d{a}": _num(f"displacement along {a}, metres") for a in self.axes},
                    [f"d{a}" for a in self.axes],
                )
            )
            if self.kind == "arm":
                tools.append(
                    _fn(
                        "gripper",
                        f"Close or open the gripper ({self.gripper_steps} env steps); the command persists.",
                        {"command": {"type": "string", "enum": ["close", "open"]}},
                        ["command"],
                    )
                )
        tools.append(_fn("take_picture", "Take a picture with the camera (one env step).", {}, []))
        tools.append(_fn("done", "Declare the task done; ends the episode.", {}, []))
        tools.append(
            _fn(
                "give_up",
                "Give up on the task; ends the episode.",
                {"reason": {"type": "string", "description": "why"}},
                ["reason"],
            )
        )
        return tools

    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.schemas()]

    def hold(self) -> np.ndarray:
        """One step of zero motion with the current gripper command, ``float32 (action_dim,)``."""
        if self.kind == "raw":
            return ((self.low + self.high) / 2).astype(np.float32)
        a = np.zeros(self.task.action_dim, dtype=np.float32)
        if self.arm is not None and self.arm.gripper_dim is not None:
            a[self.arm.gripper_dim] = self.grip
        return a

    def position(self, state: np.ndarray) -> np.ndarray:
        assert self.arm is not None
        lo, hi = self.arm.position_slice
        return np.asarray(state[lo:hi], dtype=np.float64)

    def describe(self, state: np.ndarray) -> str:
        """The state as the model is told it after every tool call."""
        if self.kind == "raw":
            return f"state = {np.round(np.asarray(state, dtype=np.float64), 4).tolist()}"
        pos = ", ".join(f"{a}={v:.4f}" for a, v in zip(self.axes, self.position(state), strict=True))
        text = f"{'hand' if self.kind == 'arm' else 'point'} at {pos} m"
        if self.kind == "arm":
            text += f"; gripper command: {'close' if self.grip == self.arm.close else 'open'}"  # type: ignore[union-attr]
        if self.arm is not None and self.arm.goal_slice is not None:
            lo, hi = self.arm.goal_slice
            text += f"; goal at {', '.join(f'{a}={v:.4f}' for a, v in zip(self.axes, state[lo:hi], strict=True))} m"
        return text

    def chunk(self, name: str, args: dict[str, Any], state: np.ndarray) -> tuple[np.ndarray, str]:
        """``(float32 (k, action_dim), note)`` for a motion tool call; raises EpisodeError (fault ``policy``) for
        arguments of the wrong kind. ``note`` says how the call was executed (e.g. a move cut short)."""
        if name == "take_picture":
            return self.hold()[None, :], "held still for 1 step"
        if name == "set_action" and self.kind == "raw":
            action, steps = args.get("action"), args.get("steps")
            vec = _numbers(action, name, "action")
            if len(vec) != self.task.action_dim or not isinstance(steps, int) or isinstance(steps, bool):
                raise EpisodeError(
                    f"malformed tool call set_action{args}: needs {self.task.action_dim} numbers and integer steps"
                )
            n = min(max(steps, 1), self.max_move_steps)
            a = np.clip(np.asarray(vec, dtype=np.float32), self.low, self.high)
            return np.repeat(a[None, :], n, axis=0), f"applied for {n} steps"
        if name == "gripper" and self.kind == "arm":
            assert self.arm is not None
            cmd = args.get("command")
            if cmd not in ("close", "open"):
                raise EpisodeError(f"malformed tool call gripper{args}: command must be 'close' or 'open'")
            self.grip = self.arm.close if cmd == "close" else -self.arm.close
            return np.repeat(self.hold()[None, :], self.gripper_steps, axis=0), f"gripper {cmd}d"
        if name in ("move_to", "move_delta") and self.kind != "raw":
            keys = list(self.axes) if name == "move_to" else [f"d{a}" for a in self.axes]
            vals = np.asarray([_number(args.get(k), name, k) for k in keys], dtype=np.float64)
            delta = vals - self.position(state) if name == "move_to" else vals
            return self._move(delta)
        raise EpisodeError(f"malformed tool call: {name!r} is not a motion tool here; tools: {', '.join(self.names())}")

    def _move(self, delta: np.ndarray) -> tuple[np.ndarray, str]:
        assert self.arm is not None
        per = self.arm.metres_per_unit
        needed = max(1, math.ceil(float(np.abs(delta).max()) / per - 1e-9))
        n = min(needed, self.max_move_steps)
        step = np.clip(delta / (needed * per), -1.0, 1.0)
        chunk = np.repeat(self.hold()[None, :], n, axis=0)
        chunk[:, : len(self.axes)] = step.astype(np.float32)
        note = f"moved for {n} steps"
        if n < needed:
            note += f" (cut short: the move needs {needed} steps, at most {self.max_move_steps} per call)"
        return chunk, note


def _number(value: Any, tool: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EpisodeError(
            f"malformed tool call {tool}: argument {key!r} must be a finite number, got {described(value)}"
        )
    return float(value)


def _numbers(value: Any, tool: str, key: str) -> list[float]:
    if not isinstance(value, list):
        raise EpisodeError(
            f"malformed tool call {tool}: argument {key!r} must be a list of numbers, got {described(value)}"
        )
    return [_number(v, tool, key) for v in value]
