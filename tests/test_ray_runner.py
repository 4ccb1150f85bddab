"""``--executor ray`` on a real cluster of separate processes (:mod:`ray_processes`): a head without CPUs (so every
actor runs on a worker node) and worker nodes started by ``ray start`` in their own mount namespace, where the
driver's run directory does not exist (a private tmpfs hides it), with Ray's token authentication on. One cluster
serves the module; the node-loss test runs last because it changes the cluster.

The oracle of every run is the same spec run by local worker processes (``--workers``) or in-process: the recorded
data and episode rows must be identical apart from the timing columns, and the videos byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from observers import OnEpisodeEnd
from ray_processes import ProcessCluster, can_unshare
from rollbench.api import Execution, RayOptions, evaluate, grade
from rollbench.core.runlog_model import RunLog
from rollbench.run import ray_runner
from rollbench.run.observer import EpisodeSummary
from run_tables import recorded_tables, same_run

ray = pytest.importorskip("ray")
pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(not can_unshare(), reason="needs root for unshare -m (mount namespaces)"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ProcessCluster]:
    saved = dict(os.environ)
    c = ProcessCluster()
    try:
        c.connect()
        c.add_node(cpus=1)
        c.add_node(cpus=1)
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        os.environ.clear()
        os.environ.update(saved)
        from ray._private.authentication_test_utils import reset_auth_token_state

        reset_auth_token_state()


def _ray(cluster: ProcessCluster, workers: int = 2, **opts: Any) -> Execution:
    return Execution(workers=workers, executor="ray", ray_address=cluster.address, ray=RayOptions(**opts))


def test_cli_metaworld_on_nodes_without_the_run_directory_records_what_local_workers_record(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    """The issue's failing command, with video: every episode crosses the wire and is identical to a local run (the
    same spec on two local worker processes, run from this process: the oracle is not about the command line)."""
    pytest.importorskip("metaworld")
    args = ["eval", "--env", "metaworld/reach-v3", "--policy", "metaworld-expert", "--episodes", "3", "--video"]
    args += ["--max-steps", "40", "--workers", "2", "--json"]
    spec: dict[str, Any] = dict(env="metaworld/reach-v3", policy="metaworld-expert", episodes=3, video=True)
    local = evaluate(**spec, max_steps=40, out=tmp_path / "local", execution=Execution(workers=2))
    out = cluster.runs / "mw"  # exists for the driver only: the nodes see an empty tmpfs there
    r = subprocess.run(
        [ray_runner_cli(), *args, "--executor", "ray", "--ray-address", cluster.address, "--out", str(out)],
        env=cluster.environ(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["status"] == "OK" and result["episodes_recorded"] == 3
    assert result["episodes"] == local.to_json()["episodes"]
    same_run(out, tmp_path / "local", videos=1)
    ex = json.loads((out / "run.json").read_text())["executions"][-1]
    assert {a["episodes"] for a in ex["ray"]["actors"]} == {"shipped"}
    assert len({a["node"] for a in ex["ray"]["actors"]}) == 2  # one actor per 1-CPU node
    assert ex["ray"]["placement"] == "spread" and ex["ray"]["shared_fs"] is False


def test_a_driver_without_the_clusters_token_exits_2_naming_token_auth(cluster: ProcessCluster, tmp_path: Path) -> None:
    env = {**cluster.environ(), "RAY_AUTH_TOKEN": "0" * 64}
    env.pop("RAY_AUTH_TOKEN_PATH")
    args = ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--executor", "ray"]
    r = subprocess.run(
        [ray_runner_cli(), *args, "--ray-address", cluster.address, "--out", str(tmp_path / "x")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2, r.stderr
    assert f"cannot start or reach Ray at {cluster.address}" in r.stderr and "RAY_AUTH_TOKEN" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()  # refused while connecting, before the run directory is made


def test_a_private_ray_instance_asked_for_a_gpu_this_machine_lacks_exits_2(tmp_path: Path) -> None:
    """Without --ray-address Ray starts on this machine with the GPUs it detects (none here): the request is refused
    at once instead of waiting for a GPU that cannot come."""
    if ray_gpus_here():
        pytest.skip("this machine has a GPU")
    args = ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--executor", "ray"]
    r = subprocess.run(
        [ray_runner_cli(), *args, "--ray-gpus", "1", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2, r.stderr
    assert "no node of the Ray cluster has what one worker asks for (CPU 1, GPU 1)" in r.stderr
    assert "Traceback" not in r.stderr


def ray_gpus_here() -> bool:
    import shutil as sh

    return sh.which("nvidia-smi") is not None


def ray_runner_cli() -> str:
    from conftest import rollbench_bin

    return rollbench_bin()


SCRIPTED: dict[str, Any] = dict(env="scripted/reach,scripted/reach-final", policy="scripted-expert", seed=4)


def test_corrupted_and_oversized_replies_are_infrastructure_errors_and_a_resume_records_them(
    cluster: ProcessCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The actor (:mod:`ray_faults`) damages episode 1's reply after checksumming and inflates episode 2's past the
    driver's bound; neither is recorded as the episode, and a resume with sound actors makes the run whole."""
    ref = evaluate(**SCRIPTED, episodes=2, action_noise=0.3, out=tmp_path / "ref")
    from ray_faults import CorruptingActor

    monkeypatch.setattr(ray_runner, "EpisodeActor", CorruptingActor)
    out = cluster.runs / "bad"
    bad = evaluate(
        **SCRIPTED, episodes=2, action_noise=0.3, out=out, execution=_ray(cluster, max_episode_bytes=1_000_000)
    )
    rows = {e.episode_index: e for e in bad.episodes}
    assert sorted(rows) == [0, 1, 2, 3] and rows[1].termination_reason == rows[2].termination_reason == "error"
    assert rows[1].error_fault == rows[2].error_fault == "infrastructure"
    assert "failed its SHA-256 checksum" in rows[1].error
    assert "over the 1,000,000-byte bound" in rows[2].error
    for i in (0, 3):
        assert rows[i] == ref.episodes[i]
    monkeypatch.undo()
    again = evaluate(**SCRIPTED, episodes=2, action_noise=0.3, out=out, execution=_ray(cluster))
    assert again.status == "OK" and [e.termination_reason for e in again.episodes] == [
        e.termination_reason for e in ref.episodes
    ]
    same_run(out, tmp_path / "ref")


def test_gpu_share_custom_resources_and_one_policy_per_node_give_the_in_process_episodes(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    """A third node, able to see the run directory, with 1 (logical) GPU and a custom resource ``gpu_node``: the env
    workers ask for ``gpu_node`` so they land there; the node's one policy actor holds half the GPU and serves both
    workers' 2 lockstep slots each; with ``--ray-shared-fs`` they stage straight into the run directory."""
    evaluate(**SCRIPTED, episodes=4, action_noise=0.3, out=tmp_path / "ref")
    gpu = cluster.add_node(cpus=2, gpus=1, hide_runs=False, resources='{"gpu_node": 2}')
    out = tmp_path / "node"
    ex = replace(_ray(cluster, gpus=0.5, resources={"gpu_node": 1}, policy="node", shared_fs=True), batch_size=2)
    result = evaluate(**SCRIPTED, episodes=4, action_noise=0.3, out=out, execution=ex)
    assert result.status == "OK"
    same_run(out, tmp_path / "ref")
    full = json.loads((out / "run.json").read_text())
    assert RunLog.model_validate(full).model_dump(mode="json", by_alias=True, exclude_unset=True) == full
    log = full["executions"][-1]["ray"]
    assert {a["node"] for a in log["actors"]} == {gpu.node_id}
    assert {a["episodes"] for a in log["actors"]} == {"shared"}
    (policy,) = log["policy_actors"]
    assert policy["node"] == gpu.node_id and policy["gpu_ids"] == ["0"] and policy["cuda_visible_devices"] == "0"
    assert log["nodes"][gpu.node_id]["resources"]["GPU"] == 1.0

    # a GPU share per env worker: both on GPU 0 of the same node, each its own policy (the scripted expert behind a
    # barrier: neither worker's episode moves past its first step until both policies are built, so the second worker
    # takes part however slowly it starts)
    out2 = tmp_path / "worker"
    barrier = {"dir": str(tmp_path / "barrier"), "parties": 2}
    spec = {**SCRIPTED, "policy": "fault_policies:barrier", "policy_options": barrier}
    again = evaluate(
        **spec, episodes=4, action_noise=0.3, out=out2, execution=_ray(cluster, gpus=0.5, placement="pack")
    )
    assert again.status == "OK"
    same_run(out2, tmp_path / "ref")
    log2 = json.loads((out2 / "run.json").read_text())["executions"][-1]["ray"]
    assert [a["gpu_ids"] for a in log2["actors"]] == [["0"], ["0"]] and log2["placement"] == "pack"
    assert {a["node"] for a in log2["actors"]} == {gpu.node_id}


def test_a_served_policy_per_node_records_what_an_in_process_client_of_the_same_server_records(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    """``--ray-policy-per-node`` with a served policy: each node's policy actor is the node's one client of the
    server (a batched websocket client, every env slot its own session); the episodes are those of the driver's own
    client of the same server. The server listens on loopback, which the nodes share with the driver."""
    from served_policy import served

    spec: dict[str, Any] = dict(env="scripted/reach", episodes=4, seed=2, action_noise=0.3)
    with served(tmp_path, "scripted-expert", "ws", "--max-batch", "4", "--max-sessions", "16") as (url, _, _):
        evaluate(**spec, policy=url, out=tmp_path / "ref")
        ex = replace(_ray(cluster, policy="node"), batch_size=2)
        result = evaluate(**spec, policy=url, out=cluster.runs / "served", execution=ex)
    assert result.status == "OK"
    same_run(cluster.runs / "served", tmp_path / "ref")
    log = json.loads((cluster.runs / "served/run.json").read_text())["executions"][-1]["ray"]
    assert log["policy"] == "node"
    assert sorted(p["node"] for p in log["policy_actors"]) == sorted({a["node"] for a in log["actors"]})


def test_a_node_killed_mid_run_and_one_added_the_run_has_exactly_n_episodes(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    """Runs last: SIGKILLs every process of one worker node while episodes are in flight and starts a fresh node
    (as an autoscaler would); the lost actor's episode re-runs on another and nothing is recorded twice."""
    spec = dict(env="scripted/reach", episodes=16, seed=9, max_steps=10)
    evaluate(**spec, policy="scripted-expert", out=tmp_path / "ref")
    killed: list[Any] = []

    def kill_a_node(summary: EpisodeSummary) -> None:
        if not killed:
            victim = cluster.node_running("ray::EpisodeActor")
            cluster.kill(victim)
            killed.append(victim)
            cluster.add_node(cpus=1)

    out = cluster.runs / "loss"
    result = evaluate(
        **spec,
        policy="fault_policies:slow",
        policy_options={"sleep_s": 0.04},
        out=out,
        execution=_ray(cluster),
        observer=OnEpisodeEnd(kill_a_node),
    )
    assert killed
    assert result.status == "OK" and result.violations == []
    assert [e.episode_index for e in result.episodes] == list(range(16))
    assert grade(out) == result
    ex = json.loads((out / "run.json").read_text())["executions"][-1]
    assert ex["worker_deaths"] >= 1 and ex["episodes_lost"] == 0
    assert ex["worker_starts"] == 2 + ex["worker_deaths"]
    assert recorded_tables(out)[0].equals(recorded_tables(tmp_path / "ref")[0])
