"""``--executor ray`` on a real multi-node Ray cluster on this machine: a head node without CPUs (so every actor runs on
a worker node) and two worker nodes of one CPU each (so the two actors land on different nodes). One cluster serves
the whole module (Ray start-up is slow); it lives in a private RAY_TMPDIR so that no other Ray user on this machine
can find it (``ray.init()`` with no address would otherwise join the latest local cluster).

The worker nodes get ``tests/`` on PYTHONPATH so actors can load ``fault_policies:slow`` (the scripted expert with a
sleep per action, so a node can be removed while episodes are in flight).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rollbench.api import Execution, evaluate, grade
from run_tables import recorded_tables

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024**2, "include_dashboard": False}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "PYTHONPATH")}
    tmp = tempfile.mkdtemp(prefix="rbray-", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    os.environ["RAY_TMPDIR"] = tmp
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), saved["PYTHONPATH"]) if p)
    c = Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": 0})
    try:
        c.add_node(**NODE)
        c.add_node(**NODE)
        c.wait_for_nodes()
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp, ignore_errors=True)


SPEC: dict[str, Any] = dict(
    env="scripted/reach,scripted/reach-final", policy="scripted-expert", episodes=5, seed=4, action_noise=0.3
)


def test_cli_on_a_multi_node_cluster_records_the_same_run_as_local_workers(cluster: Cluster, tmp_path: Path) -> None:
    local = evaluate(**SPEC, out=tmp_path / "local", execution=Execution(workers=2))
    args = ["--env", SPEC["env"], "--policy", SPEC["policy"], "--episodes", "5", "--seed", "4", "--action-noise", "0.3"]
    args += ["--workers", "2", "--executor", "ray", "--ray-address", cluster.address, "--out", str(tmp_path / "ray")]
    r = subprocess.run(
        [ROLLBENCH, "eval", *args, "--json"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    on_ray = json.loads(r.stdout)
    assert on_ray["status"] == "OK" and on_ray["episodes_recorded"] == 10
    assert on_ray["episodes"] == local["episodes"]
    ray_data, ray_meta = recorded_tables(tmp_path / "ray")
    local_data, local_meta = recorded_tables(tmp_path / "local")
    assert ray_data.equals(local_data) and ray_meta == local_meta
    ex = json.loads((tmp_path / "ray/run.json").read_text())["executions"][-1]
    assert ex["executor"] == "ray" and ex["worker_starts"] == 2 and ex["worker_deaths"] == 0


def test_node_removed_mid_run_its_actor_is_replaced_and_the_run_has_exactly_n_episodes(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Runs last in this module: it removes one of the two worker nodes, then adds a fresh one (as an autoscaler
    would) so the replacement actor can be placed."""
    spec = dict(env="scripted/reach", episodes=24, seed=9, max_steps=10)
    ref = evaluate(**spec, policy="scripted-expert", out=tmp_path / "ref")
    removed: list[Any] = []

    def remove_a_node(event: dict[str, Any]) -> None:
        if event["event"] == "episode" and not removed:
            node = sorted(cluster.worker_nodes, key=lambda n: n.unique_id)[0]
            cluster.remove_node(node)
            removed.append(node)
            cluster.add_node(**NODE)

    out = tmp_path / "run"
    result = evaluate(
        **spec,
        policy="fault_policies:slow",
        policy_options={"sleep_s": 0.04},
        out=out,
        execution=Execution(workers=2, executor="ray", ray_address=cluster.address),
        progress=remove_a_node,
    )
    assert removed
    assert result["status"] == "OK" and result["violations"] == []
    assert result["episodes"] == ref["episodes"]  # exactly 0..23, each once
    assert grade(out) == result
    ex = json.loads((out / "run.json").read_text())["executions"][-1]
    assert ex["worker_deaths"] == 1 and ex["worker_starts"] == 3 and ex["episodes_lost"] == 0
    assert ex["episodes_rerun"] <= 1
    assert recorded_tables(out)[0].equals(recorded_tables(tmp_path / "ref")[0])
