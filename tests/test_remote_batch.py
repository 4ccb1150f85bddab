"""Batches over the wire: ``serve-policy --max-batch N`` and ``ws://``/``http://`` clients with ``--batch-size B``.

Everything is real: ``rollbench serve-policy`` processes on loopback, the scripted and MetaWorld simulators, worker
processes. The served policies are ``gpu-standin`` (a natively batched policy: one call per gathered batch) over a
stateful test policy whose actions depend on its own episode's state (so a slot answered from another slot's
session records other actions), and plain single-observation policies (the server loops over them). The oracle is
``--batch-size 1`` against the same server: per-episode results and every recorded action must be equal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from rollbench import GradeDocument
from rollbench.api import Execution, evaluate
from rollbench.wire.decode import unpack_msgpack
from run_tables import recorded_tables
from served_policy import ROLLBENCH, actions, requests, rows, served

TESTS = Path(__file__).resolve().parent
PROTOCOLS = ("ws", "http")
STATEFUL = json.dumps({"inner": "fault_policies:stateful", "latency_ms": 0})
# 13 episodes whose lengths spread from 1 to 9 steps: slots of one batch end at very different steps
SCRIPTED = dict(env="scripted/reach", episodes=13, seed=5, max_steps=20)


@pytest.fixture(autouse=True)
def _tests_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fault_policies`` importable by the served processes (and, for references, in this one)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(TESTS))


def _eval(url: str, out: Path, spec: dict[str, Any], **execution: Any) -> GradeDocument:
    return evaluate(**spec, policy=url, out=out, execution=Execution(**execution))


def _acts(log: Path, since: int = 0) -> list[dict[str, Any]]:
    return [r for r in requests(log)[since:] if r["kind"] == "act"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.slow
def test_served_batch_size_8_records_exactly_what_batch_size_1_records(protocol: str, tmp_path: Path) -> None:
    with served(tmp_path, "gpu-standin", protocol, "--policy-options", STATEFUL, "--max-batch", "8") as (url, log, _):
        base = _eval(url, tmp_path / "b1", SCRIPTED)
        single = len(requests(log))
        batched = _eval(url, tmp_path / "b8", SCRIPTED, batch_size=8)
        meta = httpx.get(url).json()["metadata"] if protocol == "http" else None
    assert base.status == "OK" and base.episodes_recorded == 13
    assert [e.length for e in base.episodes] == [6, 2, 7, 2, 6, 1, 6, 9, 7, 6, 9, 5, 3]
    assert rows(batched) == rows(base)  # seeds, successes, lengths, returns, reasons
    np.testing.assert_array_equal(actions(tmp_path / "b8"), actions(tmp_path / "b1"))
    got, expected = recorded_tables(tmp_path / "b8"), recorded_tables(tmp_path / "b1")
    assert got[0].equals(expected[0]) and got[1] == expected[1]  # every recorded step and episode record

    # B = 1 sent single observations; B = 8 sent batch requests, at most 8 items, each slot in its own session
    assert all("batch" not in r for r in _acts(log)[: sum(e.length for e in base.episodes)])
    sizes = [r["batch"] for r in _acts(log, single)]
    assert len(sizes) == 69 and max(sizes) == 8 and set(sizes) <= set(range(1, 9))
    assert len({r["session"] for r in _acts(log, single)}) == 8
    calls = [r for r in requests(log)[single:] if r["kind"] == "call"]
    assert max(c["size"] for c in calls) == 8  # one act_batch of the served policy answered 8 slots
    if meta is not None:
        assert (meta["max_batch"], meta["batch_window_ms"], meta["batched_form"]) == (8, 5.0, True)


@pytest.mark.sim
def test_served_metaworld_pick_place_batch_size_8_equals_batch_size_1(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    options = json.dumps({"inner": "metaworld-expert", "latency_ms": 0})
    spec = dict(env="metaworld/pick-place-v3", episodes=8, seed=0, max_steps=60)
    with served(tmp_path, "gpu-standin", "ws", "--policy-options", options, "--max-batch", "8") as (url, log, _):
        base = _eval(url, tmp_path / "b1", spec)
        single = len(requests(log))
        batched = _eval(url, tmp_path / "b8", spec, batch_size=8)
    assert base.status == "OK" and base.episodes_recorded == 8
    assert rows(batched) == rows(base)
    np.testing.assert_array_equal(actions(tmp_path / "b8"), actions(tmp_path / "b1"))
    assert max(r["batch"] for r in _acts(log, single)) == 8
    assert _acts(log)[0]["state"] == ["float64", [39]]  # MetaWorld's native vector, in batches too


@pytest.mark.slow
def test_batches_of_two_worker_processes_share_one_call_of_a_max_batch_server(tmp_path: Path) -> None:
    import fault_policies

    reference = evaluate(**SCRIPTED, policy="fault_policies:stateful", out=tmp_path / "ref")
    assert fault_policies.Stateful  # the in-process reference runs the served policy's own code
    extra = ("--policy-options", json.dumps({"inner": "fault_policies:stateful", "latency_ms": 20}))
    with served(tmp_path, "gpu-standin", "ws", *extra, "--max-batch", "8", "--batch-window-ms", "100") as (url, log, _):
        result = _eval(url, tmp_path / "run", SCRIPTED, workers=2, batch_size=4)
    assert result.status == "OK"
    assert rows(result) == rows(reference)
    np.testing.assert_array_equal(actions(tmp_path / "run"), actions(tmp_path / "ref"))
    batches = [r["batch"] for r in _acts(log)]
    assert max(batches) == 4 and len(batches) == sum(e.length for e in reference.episodes)
    # some calls of the served policy answered slots of both workers' connections at once
    connections = [{key.split("/")[0] for key in c["sessions"]} for c in requests(log) if c["kind"] == "call"]
    assert len(set().union(*connections)) == 2
    assert any(len(c) == 2 for c in connections)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.slow
def test_a_server_batch_with_a_missing_answer_errors_those_episodes_naming_the_counts(
    protocol: str, tmp_path: Path
) -> None:
    spec = dict(env="scripted/reach", episodes=4, seed=0)
    extra = ("--max-batch", "8", "--inject", "short-batch")
    with served(tmp_path, "scripted-expert", protocol, *extra) as (url, _, _):
        result = _eval(url, tmp_path / "run", spec, batch_size=3)
    assert result.status == "PARTIAL" and result.episodes_recorded == 4
    reasons = [(e.termination_reason, e.error, e.length) for e in result.episodes]
    error = f"EpisodeError: malformed reply from {url}: 2 answers for a batch of 3 observations"
    assert reasons == [("error", error, 0)] * 3 + [("success", None, 6)]  # the 4th ran alone: a batch of 1
    assert result.overall.errors_by_fault == {"policy": 3, "environment": 0, "infrastructure": 0}


@pytest.mark.parametrize(
    ("protocol", "policy", "options"),
    [
        ("ws", "gpu-standin", {"inner": "fault_policies:raise_on_seed", "latency_ms": 0}),  # native act_batch
        ("http", "fault_policies:raise_on_seed", {}),  # a single-observation policy, looped over by the server
    ],
)
@pytest.mark.slow
def test_a_policy_exception_for_one_item_of_a_batch_ends_only_that_episode(
    protocol: str, policy: str, options: dict[str, Any], tmp_path: Path
) -> None:
    spec = dict(env="scripted/reach", episodes=4, seed=0)
    extra = ("--policy-options", json.dumps(options), "--max-batch", "4")
    with served(tmp_path, policy, protocol, *extra) as (url, log, _):
        result = _eval(url, tmp_path / "run", spec, batch_size=4)
    outcome = [(e.seed, e.termination_reason, e.length) for e in result.episodes]
    assert outcome == [(0, "success", 5), (1, "success", 3), (2, "error", 1), (3, "success", 6)]
    error = result.episodes[2].error
    # the server's traceback is never quoted (it may hold anything): its status and size only; its log says why
    said = re.fullmatch(
        rf"EpisodeError: server error from {re.escape(url)}: HTTP 500, a reply of (\d+) characters \(not shown: a server's text is never quoted\)",
        error,
    )
    assert said is not None, error
    failed = [r for r in _acts(log) if "RuntimeError" in json.dumps(r)]
    assert "RuntimeError: the policy failed on seed 2" in json.dumps(failed)
    assert result.overall.errors_by_fault == {"policy": 1, "environment": 0, "infrastructure": 0}
    assert max(r["batch"] for r in _acts(log)) == 4


def test_an_openpi_style_server_without_batch_support_gets_single_observations(tmp_path: Path) -> None:
    with openpi_style_server() as (url, frames, connections):
        result = evaluate(
            env="scripted/reach",
            policy=url,
            policy_options={"needs_images": False},
            episodes=6,
            seed=1,
            out=tmp_path / "run",
            execution=Execution(batch_size=4),
        )
    assert result.status == "OK" and result.episodes_recorded == 6
    assert len(frames) == sum(e.length for e in result.episodes)
    assert {tuple(sorted(f)) for f in frames} == {("observation/state", "prompt")}  # no batch, slot or reset
    # one client per slot: the pre-flight probe's connection is slot 0's (rollbench.run.probed), 3 more for slots 1-3
    assert connections[0] == 4


@pytest.mark.slow
def test_a_max_batch_1_server_gets_single_requests_from_a_batch_size_4_client(tmp_path: Path) -> None:
    with served(tmp_path, "fault_policies:stateful", "http") as (url, log, _):
        meta = httpx.get(url).json()["metadata"]
        result = _eval(url, tmp_path / "run", SCRIPTED, batch_size=4)
    assert (meta["max_batch"], meta["batched_form"]) == (1, False)
    assert result.status == "OK"
    assert all("batch" not in r for r in _acts(log)) and len({r["session"] for r in _acts(log)}) == 4
    assert not [r for r in requests(log) if r["kind"] == "call"]  # no gathering


def test_a_ws_batch_client_of_4_slots_holds_4_server_sessions(tmp_path: Path) -> None:
    """One connection, one session per slot: the connection's own session (unused by a batch client) is given
    back, so 4 slots fit a server of 4 sessions."""
    extra = ("--max-batch", "4", "--max-sessions", "4")
    with served(tmp_path, "fault_policies:stateful", "ws", *extra) as (url, log, _):
        result = _eval(url, tmp_path / "run", SCRIPTED, batch_size=4)
    assert result.status == "OK", result.reasons
    assert sorted({r["session"].split("/")[1] for r in _acts(log)}) == ["slot-0", "slot-1", "slot-2", "slot-3"]


@pytest.mark.slow
def test_a_batch_larger_than_max_batch_or_naming_a_session_twice_is_refused_clearly(tmp_path: Path) -> None:
    from websockets.sync.client import connect

    item = {"session": "a", "instruction": "x", "state": {"dtype": "float32", "shape": [4], "data": [0, 0, 1, 1]}}
    with served(tmp_path, "scripted-expert", "http", "--max-batch", "2") as (url, _, _):
        too_many = httpx.post(url, json={"batch": [item, {**item, "session": "b"}, {**item, "session": "c"}]})
        reset = httpx.post(url, json={"session": "a", "reset": {"task": "scripted/reach", "seed": 0}})
        assert reset.json() == {"reset": True}
        twice = httpx.post(url, json={"batch": [item, item]})
        # a client with --batch-size 4 splits its batch into requests of at most 2
        result = _eval(url, tmp_path / "run", dict(env="scripted/reach", episodes=4, seed=0), batch_size=4)
    assert too_many.status_code == 400
    assert too_many.json() == {
        "error": "ProtocolError: a batch of 3 observations exceeds this server's --max-batch 2; send at most 2 "
        "per request"
    }
    assert twice.status_code == 400
    assert twice.json() == {
        "error": "ProtocolError: a batch names one session more than once; each item must be for its own session"
    }
    assert result.status == "OK"

    from openpi_client import msgpack_numpy

    obs = {"observation/state": np.zeros(4, np.float32), "prompt": "x"}
    with served(tmp_path, "scripted-expert", "ws", "--max-batch", "2") as (url, _, _), connect(url) as ws:
        assert unpack_msgpack(ws.recv(timeout=10))["max_batch"] == 2
        ws.send(msgpack_numpy.packb({"batch": [{"slot": i, "observation": obs} for i in range(3)]}))
        text = ws.recv(timeout=10)
        with pytest.raises(Exception, match="1008"):
            ws.recv(timeout=10)
    assert text == (
        "ProtocolError: a batch of 3 observations exceeds this server's --max-batch 2; send at most 2 per request"
    )


def test_serve_policy_help_documents_batching() -> None:
    out = subprocess.run([ROLLBENCH, "serve-policy", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--max-batch" in out and "--batch-window-ms" in out


@contextmanager
def openpi_style_server() -> Iterator[tuple[str, list[dict[str, Any]], list[int]]]:
    """A websocket server that speaks openpi's protocol as openpi's ``WebsocketPolicyServer`` does (metadata frame
    without ``reset`` or ``max_batch``, then one observation in, ``actions`` out), answering with the scripted
    expert's action. Yields (url, every observation received, [connections accepted])."""
    from openpi_client import msgpack_numpy
    from websockets.sync.server import serve

    frames: list[dict[str, Any]] = []
    connections = [0]
    lock = threading.Lock()

    def handler(conn: Any) -> None:
        with lock:
            connections[0] += 1
        conn.send(msgpack_numpy.packb({"action_horizon": 1}))
        try:
            while True:
                obs = unpack_msgpack(conn.recv())
                with lock:
                    frames.append(obs)
                s = np.asarray(obs["observation/state"], np.float32)
                action = np.clip((s[2:4] - s[0:2]) / 0.1, -1, 1).astype(np.float32)[None, :]
                conn.send(msgpack_numpy.packb({"actions": action}))
        except Exception:
            pass

    with serve(handler, "127.0.0.1", 0, compression=None) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}", frames, connections
        finally:
            server.shutdown()
            thread.join(timeout=10)
