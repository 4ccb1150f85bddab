"""A minimal LIBERO evaluation loop written from the reference protocol, independent of rollbench's episode code.

Protocol: ``/work/shared/reference/libero-openpi-client.md`` (openpi ``examples/libero/main.py``): LIBERO's
``ControlEnv`` rendering ``agentview`` and ``robot0_eye_in_hand`` at 256 x 256 as camera observations at every step
(``use_camera_obs=True``, as openpi's ``OffScreenRenderEnv``), ``reset()``, ``set_init_state(init_states[k])``,
10 no-op steps ``[0] * 6 + [-1]``, then: both images rotated 180°, resized with padding to 224 x 224 by
openpi-client's own ``image_tools``; state = eef position, eef quaternion as axis-angle (w clipped to [-1, 1]),
gripper qpos, as the env gives them (float64); prompt = the task's language; a chunk is asked for when the plan is
empty and its first 5 actions are executed with ``env.step(action.tolist())``; the episode ends at the env's
``done`` or after ``max_steps`` steps. The client is openpi-client's ``WebsocketClientPolicy``.

Where it follows rollbench instead of openpi (documented departures, so that the two can be compared per episode):
the scene is seeded per episode, ``np.random.seed(seed)`` and ``env.seed(seed)`` right before ``env.reset()``
(openpi seeds once per process and task); and, since this loop runs on robosuite 1.5 while the reference stack is
robosuite 1.4, the robot's reset first takes from numpy's global generator the ``randn(len(init_qpos))`` robosuite
1.4's ``Robot.reset`` draws there for its (zero) initialization noise (robosuite 1.5 draws it from ``env.rng``). Only what LIBERO needs to run here comes from rollbench
(``libero_setup.prepare``: config folder, asset link, the robosuite 1.5 base fix); the init states are read with
plain ``pickle`` (the files are local and trusted here), the task's language by LIBERO's file-name rule.

Also the benchmark's reference (``benchmarks/bench_libero.py``).
"""

from __future__ import annotations

import collections
import importlib.util
import math
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

CAMERA_KEYS = {"agentview_image": "observation/image", "robot0_eye_in_hand_image": "observation/wrist_image"}
NOOP = [0.0] * 6 + [-1.0]
SETTLE, REPLAN, RESIZE, RENDER = 10, 5, 224, 256


def _libero_dir() -> Path:
    spec = importlib.util.find_spec("libero.libero")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def task_files(suite: str, task_id: int) -> tuple[Path, Path, str]:
    """(bddl file, init-state file, language) of a base-suite task, from LIBERO's own task map."""
    root = _libero_dir()
    path = root / "benchmark" / "libero_suite_task_map.py"
    spec = importlib.util.spec_from_file_location("_task_map", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the file only defines a dict (its package __init__ would import torch)
    stem = module.libero_task_map[suite][task_id]
    name = stem
    if stem[0].isupper():  # LIBERO's grab_language_from_filename: drop a "..._SCENEn_" prefix
        i = stem.find("SCENE")
        name = stem[i + (8 if "SCENE10" in stem else 7) :]
    language = " ".join(name.split("_"))
    return root / "bddl_files" / suite / f"{stem}.bddl", root / "init_files" / suite / f"{stem}.pruned_init", language


def init_states(path: Path) -> np.ndarray:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("data.pkl"))
        return pickle.loads(z.read(name))


def make_env(bddl: Path) -> Any:
    from rollbench.envs.libero import setup as libero_setup

    libero_setup.prepare()
    from libero.libero.envs.env_wrapper import ControlEnv

    return ControlEnv(
        bddl_file_name=str(bddl),
        camera_heights=RENDER,
        camera_widths=RENDER,
        has_renderer=False,
        has_offscreen_renderer=True,
        use_camera_obs=True,
    )


def axis_angle(quat: np.ndarray) -> np.ndarray:
    q = quat.copy()
    q[3] = min(max(q[3], -1.0), 1.0)
    den = np.sqrt(1.0 - q[3] * q[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (q[:3] * 2.0 * math.acos(q[3])) / den


def _reset_with_14_draw(env: Any) -> None:
    """``env.reset()`` where each robot reset first draws ``np.random.randn(len(init_qpos))``, as robosuite 1.4."""
    from robosuite.robots.robot import Robot

    original = Robot.reset

    def reset(self: Any, deterministic: bool = False, *args: Any, **kwargs: Any) -> Any:
        if not deterministic:
            np.random.randn(len(self.init_qpos))
        return original(self, deterministic, *args, **kwargs)

    Robot.reset = reset  # type: ignore[method-assign]
    try:
        env.reset()
    finally:
        Robot.reset = original  # type: ignore[method-assign]


def episode(
    env: Any, states: np.ndarray, k: int, seed: int, language: str, client: Any, max_steps: int, draw_14: bool = True
) -> int:
    """One episode; returns the steps executed (the server records what it was sent). ``draw_14=False`` on
    robosuite 1.4 itself, whose robot reset takes that draw natively."""
    from openpi_client import image_tools

    np.random.seed(seed)
    env.seed(seed)
    if draw_14:
        _reset_with_14_draw(env)
    else:
        env.reset()
    obs = env.set_init_state(states[k])
    for _ in range(SETTLE):
        obs, _, _, _ = env.step(NOOP)
    plan: collections.deque[np.ndarray] = collections.deque()
    t = 0
    while t < max_steps:
        if not plan:
            element: dict[str, Any] = {}
            for cam, key in CAMERA_KEYS.items():
                img = np.ascontiguousarray(obs[cam][::-1, ::-1])
                element[key] = image_tools.convert_to_uint8(image_tools.resize_with_pad(img, RESIZE, RESIZE))
            element["observation/state"] = np.concatenate(
                (obs["robot0_eef_pos"], axis_angle(obs["robot0_eef_quat"]), obs["robot0_gripper_qpos"])
            )
            element["prompt"] = language
            chunk = client.infer(element)["actions"]
            assert len(chunk) >= REPLAN
            plan.extend(chunk[:REPLAN])
        obs, _, done, _ = env.step(plan.popleft().tolist())
        t += 1
        if done:
            break
    return t
