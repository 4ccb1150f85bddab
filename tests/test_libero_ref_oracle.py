"""``libero_ref`` (LIBERO on robosuite 1.4.1 / MuJoCo 3.2.3 through an env host) against openpi's own LIBERO loop run
on that same stack, both driving one recording openpi server.

The loop (``tests/envhost/openpi_libero_loop.py``) runs in the reference venv itself, with LIBERO's benchmark object,
``OffScreenRenderEnv`` and openpi-client, never rollbench: every call of the episode (the first one is the state the
episode starts from after the reset, the stored initial state and the 10 settle steps) must carry identical keys,
prompt, state and images, and rollbench must execute and record exactly the actions the server returned. One
episode per suite (two suites, two initial states), horizon 11 (calls at steps 0, 5, 10).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollbench.envs.libero import ref

pytest.importorskip("openpi_server")
from openpi_recording import RecordingPolicy, Server, assert_same_episode, evaluate_episode, recording_server

pytestmark = [
    pytest.mark.sim,
    pytest.mark.venv,
    pytest.mark.slow,
    pytest.mark.skipif(ref.FAMILY.missing() is not None, reason=f"libero_ref: {ref.FAMILY.missing()}"),
]
HORIZON = 11
LOOP = Path(__file__).parent / "envhost" / "openpi_libero_loop.py"


@pytest.fixture()
def server() -> Iterator[tuple[Server, RecordingPolicy]]:
    with recording_server() as pair:
        yield pair


def openpi_loop(suite: str, task_id: int, trial: int, seed: int, port: int) -> int:
    python = ref.FAMILY.python()
    assert python is not None
    # the far side's own LIBERO config (this process's in-process LIBERO may have pointed LIBERO_CONFIG_PATH elsewhere)
    env = {
        **os.environ,
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        "PYTHONNOUSERSITE": "1",
        **ref.FAMILY.host_env,
    }
    r = subprocess.run(
        [python, str(LOOP), suite, str(task_id), str(trial), str(seed), str(port), str(HORIZON)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return int(json.loads(r.stdout.strip().splitlines()[-1])["steps"])


@pytest.mark.parametrize(("suite", "task_id", "trial"), [("libero_spatial", 0, 1), ("libero_goal", 3, 0)])
def test_the_reference_stack_starts_and_runs_each_episode_as_openpis_client_sees_it_there(
    suite: str, task_id: int, trial: int, server: tuple[Server, RecordingPolicy], tmp_path: Path
) -> None:
    srv, policy = server
    seed = 100
    steps = openpi_loop(suite, task_id, trial, seed + trial, srv.port)
    reference_calls, reference_replies = policy.take()
    run_dir = tmp_path / "run"
    log = evaluate_episode(f"libero_ref/{suite}/{task_id}", srv.port, seed, trial, HORIZON, run_dir)
    assert steps == HORIZON and len(reference_calls) == 3  # steps 0, 5, 10
    assert_same_episode(policy, (reference_calls, reference_replies), run_dir, HORIZON)
    versions = log["provenance"]["libero_ref"]["versions"]
    assert (versions["robosuite"], versions["mujoco"]) == ("1.4.1", "3.2.3")
