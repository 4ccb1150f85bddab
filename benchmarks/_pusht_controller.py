"""A deterministic scripted controller for gym-pusht's PushT, importable from rollbench's venv and lerobot's.

No state between calls: the action is a pure function of the observed pose, so two evaluation loops that present
the same ``float32`` pose get the same action, bit for bit, even across numpy versions (rollbench's venv has numpy
1.26, lerobot's 2.x): transcendental functions come from Python's ``math`` (the platform's libm, the same for both),
and numpy is used only for element-wise ``+ - * /``, ``sqrt``, comparisons and ``argmax``, which IEEE 754 rounds
exactly; no ``@``, ``hypot``, ``linspace`` or reductions whose BLAS kernel or summation order may differ.

Input ``state``: ``float32 (5,)`` = ``[agent_x, agent_y, block_x, block_y, block_angle]``, gym-pusht 0.1.8's
``obs_type="state"`` observation (pixels of the 512 x 512 workspace; radians; ``block_x, block_y`` is the block
body's origin, the middle of the bar's lower edge in the T's own frame). Output: ``float32 (2,)``, the agent's
target position in pixels (gym-pusht's action).

Geometry (gym-pusht ``gym_pusht/envs/pusht.py``, ``PushTEnv.add_tee`` with ``scale=30``): bar ``x in [-60, 60],
y in [0, 30]``, stem ``x in [-15, 15], y in [30, 120]`` in the block frame, centre of gravity ``(0, 45)``; agent
radius 15; goal pose ``(256, 256, pi/4)``. Contacts are frictionless and the space's damping is 0 (bodies keep no
velocity), so the block moves only while pushed, along the contact normal: the controller picks, among points on
the T's outline, the push whose translation and rotation best match the remaining error, walks the agent round the
block to the point behind it, and pushes by an amount that shrinks with the error.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

GOAL = (256.0, 256.0, math.pi / 4)  # gym-pusht PushTEnv._setup: goal_pose
AGENT_RADIUS = 15.0
COG = (0.0, 45.0)  # block frame: the mean of the bar's (0, 15) and the stem's (0, 75) centroids
INERTIA_PER_MASS = 2550.0  # ~ 2 * (120^2 + 30^2) / 12: the T's moment of inertia over its mass, px^2
LENGTH_SCALE = 60.0  # px per radian when translation and rotation errors are compared
# The T's outline, counter-clockwise in the block frame; each edge's outward normal is its direction turned right.
OUTLINE = ((-60, 0), (60, 0), (60, 30), (15, 30), (15, 120), (-15, 120), (-15, 30), (-60, 30))
RECTS = ((-60.0, 0.0, 60.0, 30.0), (-15.0, 30.0, 15.0, 120.0))  # bar and stem: x0, y0, x1, y1


def _distance_to_block(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Distance of block-frame points ``(x, y)`` (``float64 (N,)`` each, px) to the T, 0 inside."""
    d = np.full(x.shape, np.inf)
    for x0, y0, x1, y1 in RECTS:
        dx = np.maximum(np.maximum(x0 - x, x - x1), 0.0)
        dy = np.maximum(np.maximum(y0 - y, y - y1), 0.0)
        d = np.minimum(d, np.sqrt(dx * dx + dy * dy))
    return d


def _candidates() -> tuple[np.ndarray, ...]:
    """Usable contact points on the outline (block frame): ``px, py, nx, ny, lever``, ``float64 (K,)`` each.

    ``n`` is the inward normal (the push direction) and ``lever`` the torque arm ``(p - cog) x n``. A point is usable
    when the agent's disc touching it from outside overlaps no other part of the T.
    """
    px, py, nx, ny = [], [], [], []
    for i, (ax, ay) in enumerate(OUTLINE):
        bx, by = OUTLINE[(i + 1) % len(OUTLINE)]
        ex, ey = bx - ax, by - ay
        length = math.sqrt(ex * ex + ey * ey)
        pieces = max(1, int(length // 10))
        for j in range(1, pieces):
            t = j / pieces
            px.append(ax + t * ex)
            py.append(ay + t * ey)
            nx.append(-ey / length)
            ny.append(ex / length)
    p_x, p_y, n_x, n_y = (np.array(v, dtype=np.float64) for v in (px, py, nx, ny))
    reach = AGENT_RADIUS + 0.5
    ok = _distance_to_block(p_x - n_x * reach, p_y - n_y * reach) >= AGENT_RADIUS - 1e-6
    p_x, p_y, n_x, n_y = p_x[ok], p_y[ok], n_x[ok], n_y[ok]
    lever = (p_x - COG[0]) * n_y - (p_y - COG[1]) * n_x
    return p_x, p_y, n_x, n_y, lever


_PX, _PY, _NX, _NY, _LEVER = _candidates()
_ROT_EFFECT = LENGTH_SCALE * _LEVER / INERTIA_PER_MASS  # rotation per unit push, in translation units
_EFFECT_NORM = np.sqrt(1.0 + _ROT_EFFECT * _ROT_EFFECT)  # |(n, rot)| with |n| = 1
_PATH_T = np.arange(12, dtype=np.float64) / 11.0


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def act(state: Any) -> np.ndarray:
    """Agent target ``float32 (2,)`` (pixels) for the observed ``float32 (5,)`` PushT state; see the module doc."""
    ax, ay, bx, by, angle = (float(v) for v in np.asarray(state, dtype=np.float32))
    c, s = math.cos(angle), math.sin(angle)
    gc, gs = math.cos(GOAL[2]), math.sin(GOAL[2])

    # Remaining error at the centre of gravity (world frame, px) and in angle (rad).
    cog_x, cog_y = bx + c * COG[0] - s * COG[1], by + s * COG[0] + c * COG[1]
    ex = GOAL[0] + gc * COG[0] - gs * COG[1] - cog_x
    ey = GOAL[1] + gs * COG[0] + gc * COG[1] - cog_y
    er = LENGTH_SCALE * _wrap(GOAL[2] - angle)
    err = math.sqrt(ex * ex + ey * ey + er * er)
    if err < 0.5:
        return np.array([ax, ay], dtype=np.float32)

    # The push whose effect (translation along its normal, rotation by lever / inertia) best matches the error,
    # preferring contacts the agent reaches sooner.
    nwx, nwy = c * _NX - s * _NY, s * _NX + c * _NY
    score = (nwx * ex + nwy * ey + _ROT_EFFECT * er) / (_EFFECT_NORM * err)
    pwx, pwy = bx + c * _PX - s * _PY, by + s * _PX + c * _PY
    back = AGENT_RADIUS + 6.0
    apx, apy = pwx - nwx * back, pwy - nwy * back
    travel = np.sqrt((apx - ax) * (apx - ax) + (apy - ay) * (apy - ay))
    k = int(np.argmax(score - 0.0015 * travel))
    px, py, nx, ny = float(pwx[k]), float(pwy[k]), float(nwx[k]), float(nwy[k])

    # Behind the contact and on its line: push, further when the error is large.
    rx, ry = ax - px, ay - py
    along = rx * nx + ry * ny  # negative: behind the contact
    lateral = abs(-rx * ny + ry * nx)
    if -AGENT_RADIUS - 12.0 < along < -AGENT_RADIUS + 8.0 and lateral < 3.0:
        depth = min(max(0.4 * err, 1.0), 25.0) - AGENT_RADIUS
        return np.clip(np.array([px + nx * depth, py + ny * depth]), 0.0, 512.0).astype(np.float32)

    # Otherwise go to the approach point, around the block when the straight way would touch it.
    tx, ty = float(apx[k]), float(apy[k])
    wx, wy = ax + _PATH_T * (tx - ax), ay + _PATH_T * (ty - ay)
    lx, ly = c * (wx - bx) + s * (wy - by), -s * (wx - bx) + c * (wy - by)  # to the block frame
    if float(np.min(_distance_to_block(lx, ly))) < AGENT_RADIUS + 2.0:
        here = math.atan2(ay - cog_y, ax - cog_x)
        step = min(max(_wrap(math.atan2(ty - cog_y, tx - cog_x) - here), -0.6), 0.6)
        tx, ty = cog_x + 110.0 * math.cos(here + step), cog_y + 110.0 * math.sin(here + step)
    return np.clip(np.array([tx, ty]), 0.0, 512.0).astype(np.float32)


class RollbenchPolicy:
    """The controller as a rollbench policy (the ``Policy`` protocol of ``rollbench.core.contracts``): one action per call,
    chunk ``float32 (1, 2)``, from ``observation.state`` (rollbench's ``pusht/PushT-v0`` state is gym-pusht's
    ``obs_type="state"`` observation as ``float32 (5,)``)."""

    def __init__(self, name: str) -> None:
        from rollbench.core.contracts import (
            PolicyInfo,  # only in rollbench's venv; lerobot's side never builds this class
        )

        self.info = PolicyInfo(name=name, tasks=("pusht/*",))

    def reset(self, task: Any, seed: int) -> None:
        pass

    def act(self, observation: Any, instruction: str) -> np.ndarray:
        return act(observation.state)[None, :]

    def close(self) -> None:
        pass


def make(name: str, options: dict[str, Any]) -> RollbenchPolicy:
    """rollbench's policy factory: ``--policy _pusht_controller:make`` with ``benchmarks/`` on ``PYTHONPATH``."""
    return RollbenchPolicy(name)
