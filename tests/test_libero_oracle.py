"""rollbench against an independent reference loop on LIBERO, both driving one recording openpi server.

The server is openpi's own ``WebsocketPolicyServer`` (PyPI ``openpi-server``) around a recording policy whose
answer is a float64 chunk drawn from a hash of everything it was sent (so any difference in what a client sends
shows up in the actions too, and the trajectories are closed-loop). The reference loop is
``tests/libero_reference.py``, written from the protocol (LIBERO's ``ControlEnv`` with camera observations at every
step, openpi-client's ``image_tools`` and ``WebsocketClientPolicy``, replan 5). Per suite, one episode with a short
horizon (11 steps: calls at steps 0, 5 and 10): every call must carry identical keys, prompt, state (values and
dtype) and images, and rollbench must execute (and record) exactly the actions the server returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rollbench.envs.libero import setup as libero_setup

pytestmark = [
    pytest.mark.sim,
    pytest.mark.slow,
    pytest.mark.skipif(libero_setup.missing() is not None, reason=f"LIBERO not installed: {libero_setup.missing()}"),
]
pytest.importorskip("openpi_server")
from openpi_recording import RecordingPolicy, Server, assert_same_episode, evaluate_episode, recording_server  # noqa: E402

HORIZON = 11


@pytest.fixture()
def server() -> Iterator[tuple[Server, RecordingPolicy]]:
    with recording_server() as pair:
        yield pair


@pytest.mark.parametrize(("suite", "task_id", "trial"), [("libero_spatial", 0, 1), ("libero_object", 0, 0)])
def test_rollbench_sends_and_executes_exactly_what_the_reference_loop_does(
    suite: str, task_id: int, trial: int, server: tuple[Server, RecordingPolicy], tmp_path: Path
) -> None:
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    import libero_reference as ref

    srv, policy = server
    seed = 100
    bddl, init_file, language = ref.task_files(suite, task_id)
    env = ref.make_env(bddl)
    try:
        client = WebsocketClientPolicy("127.0.0.1", srv.port)
        steps = ref.episode(env, ref.init_states(init_file), trial, seed + trial, language, client, HORIZON)
    finally:
        env.close()
    reference_calls, reference_replies = policy.take()
    run_dir = tmp_path / "run"
    log = evaluate_episode(f"libero/{suite}/{task_id}", srv.port, seed, trial, HORIZON, run_dir)
    assert steps == HORIZON and len(reference_calls) == 3  # steps 0, 5, 10
    assert reference_calls[0]["prompt"] == language
    assert_same_episode(policy, (reference_calls, reference_replies), run_dir, HORIZON)
    assert "np.random.seed(seed)" in log["provenance"]["libero"]["scene_seeding"]
