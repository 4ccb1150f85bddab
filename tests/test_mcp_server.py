"""The MCP server, driven the way an agent drives it: the official SDK's client (``stdio_client`` + ``ClientSession``)
talking to a real ``python -m rollbench mcp --root TMP`` subprocess, with real simulators. No test doubles.

Oracles: the run directory itself (``meta/info.json``, ``run.json``) and ``rollbench.grade(run_dir)``, which the tool
result must match field for field.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import rollbench
from mcp_support import error_text, mcp_session, structured

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def assert_matches_grade(out: dict[str, Any]) -> rollbench.GradeDocument:
    """The tool's numbers are exactly what grading the directory gives."""
    g = rollbench.grade(out["run_dir"])
    assert out["status"] == g.status
    assert out["reasons"] == g.reasons
    assert (out["episodes_requested"], out["episodes_recorded"]) == (g.episodes_requested, g.episodes_recorded)
    assert out["successes"] == g.overall.successes
    assert out["success_rate"] == g.overall.pooled_success_rate
    assert out["success_rate_ci95"] == [g.overall.pooled_ci95_low, g.overall.pooled_ci95_high]
    for row in out["tasks"]:
        t = g.tasks[row["task"]]
        assert (row["episodes"], row["successes"], row["termination_reasons"]) == (
            t.episodes,
            t.successes,
            t.termination_reasons,
        )
    return g


def total_episodes(run_dir: str) -> int:
    return int(json.loads((Path(run_dir) / "meta" / "info.json").read_text())["total_episodes"])


@pytest.mark.slow
async def test_scripted_rollout_records_three_reset_episodes_and_reports_graded_ok(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    events: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total, message))

    with anyio.fail_after(120):
        async with mcp_session(root) as s:
            args = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 3, "max_steps": 20}
            res = await s.call_tool("run_policy_rollout", args, progress_callback=on_progress)
            while len(events) < 4:  # the SDK runs progress callbacks as tasks: the last may trail the result
                await anyio.sleep(0.01)
    out = structured(res)
    assert Path(out["run_dir"]).parent == root.resolve()
    assert out["run_dir"] == str(root.resolve() / out["run_id"])
    assert total_episodes(out["run_dir"]) == 3 == out["dataset_total_episodes"]
    g = assert_matches_grade(out)
    assert out["status"] == "OK" and out["reasons"] == [] and out["errored_episodes"] == []
    assert out["episodes_missing"] == [] and out["episodes_recorded_before_this_call"] == 0
    assert [e.seed for e in g.episodes] == [0, 1, 2]
    assert all(e.length <= 20 for e in g.episodes)
    assert out["summary"].startswith("Recorded 3 of 3 requested episodes of scripted/reach with policy scripted-expert")
    assert "Status OK" in out["summary"]
    assert res.content[0].text == out["summary"]  # type: ignore[union-attr]
    assert [(p, t) for p, t, _ in events] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert events[1][2] is not None and events[1][2].startswith("episode 0 (scripted/reach)")


@pytest.mark.sim
async def test_metaworld_rollout_records_three_episodes(tmp_path: Path) -> None:
    with anyio.fail_after(300):
        async with mcp_session(tmp_path) as s:
            args = {"policy": "metaworld-expert", "env": "metaworld/reach-v3", "n_episodes": 3, "max_steps": 20}
            out = structured(await s.call_tool("run_policy_rollout", {**args, "run_name": "mw"}))
    assert out["run_id"] == "mw" and total_episodes(out["run_dir"]) == 3
    g = assert_matches_grade(out)
    assert out["episodes_recorded"] == 3 and out["status"] == "OK"
    assert all(e.length <= 20 and e.task == "metaworld/reach-v3" for e in g.episodes)
    assert out["summary"].startswith("Recorded 3 of 3 requested episodes of metaworld/reach-v3")


@pytest.mark.slow
async def test_episode_that_errors_makes_the_run_partial_and_the_summary_names_it(tmp_path: Path) -> None:
    """``scripted/faulty`` raises on reset for seed % 3 == 2: from seed 0, episode 2 errors."""
    with anyio.fail_after(120):
        async with mcp_session(tmp_path) as s:
            args = {"policy": "scripted-expert", "env": "scripted/faulty", "n_episodes": 3, "max_steps": 20, "seed": 0}
            out = structured(await s.call_tool("run_policy_rollout", args))
    assert_matches_grade(out)
    assert out["status"] == "PARTIAL"
    assert out["episodes_recorded"] == 3 == total_episodes(out["run_dir"])
    assert [e["episode_index"] for e in out["errored_episodes"]] == [2]
    assert "reset fails on purpose for seed 2" in out["errored_episodes"][0]["error"]
    assert out["errored_episodes"][0]["error_fault"] == "environment"
    assert out["termination_reasons"] == {"error": 1, "success": 2}
    summary = out["summary"]
    assert "Status PARTIAL, not OK" in summary and "Status OK" not in summary
    assert (
        "episode 2 (scripted/faulty, seed 2) ended in error (environment fault): RuntimeError: scripted/faulty: "
        in summary
    )


@pytest.mark.slow
async def test_cancelled_run_stops_cleanly_and_resumes_to_exactly_n_episodes(tmp_path: Path) -> None:
    """40 episodes of 1000 steps (policy ``zero`` never reaches the goal) take a few seconds: long enough to cancel."""
    args = {"policy": "zero", "env": "scripted/reach", "n_episodes": 40, "max_steps": 1000, "run_name": "long"}
    first_episode = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if progress >= 1:
            first_episode.set()

    with anyio.fail_after(180):
        async with mcp_session(tmp_path) as s:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await s.call_tool("run_policy_rollout", args, progress_callback=on_progress)
                    raise AssertionError("the cancelled call returned a result")

                tg.start_soon(call)
                await first_episode.wait()
                busy = await s.call_tool("run_policy_rollout", args)
                assert "already running" in error_text(busy)
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the in-flight request
            state = structured(await s.call_tool("get_run", {"run_id": "long"}))["state"]
            assert state in ("stopping", "finished")
            resumed = structured(await s.call_tool("run_policy_rollout", args))
            listed = structured(await s.call_tool("list_runs", {}))["result"]
    before = resumed["episodes_recorded_before_this_call"]
    assert 1 <= before < 40, "the cancellation did not stop the run early"
    run_log = json.loads((tmp_path / "long" / "run.json").read_text())
    assert len(run_log["executions"]) == 2  # the cancelled one and the resume
    assert resumed["episodes_recorded"] == 40 == total_episodes(resumed["run_dir"])
    g = assert_matches_grade(resumed)
    assert resumed["status"] == "OK" and g.violations == []
    assert [e.episode_index for e in g.episodes] == list(range(40))
    assert f"{before} of them were recorded by an earlier call (resumed)" in resumed["summary"]
    assert [r["run_id"] for r in listed] == ["long"] and listed[0]["status"] == "OK"


@pytest.mark.slow
async def test_run_killed_mid_way_is_reported_interrupted_and_resumed_by_the_tool(tmp_path: Path) -> None:
    """A ``rollbench eval`` process killed with SIGKILL mid-run; the tool sees the same spec and finishes the run."""
    run_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "rollbench", "eval", "--env", "scripted/reach", "--policy", "zero"]
    cmd += ["--episodes", "30", "--max-steps", "1000", "--out", str(run_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(120):
            while not list(run_dir.glob("meta/episodes/chunk-*/file-*.parquet")):
                assert proc.poll() is None, "the eval finished before it could be killed"
                await anyio.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    args = {"policy": "zero", "env": "scripted/reach", "n_episodes": 30, "max_steps": 1000, "run_name": "killed"}
    with anyio.fail_after(120):
        async with mcp_session(tmp_path) as s:
            info = structured(await s.call_tool("get_run", {"run_id": "killed"}))
            out = structured(await s.call_tool("run_policy_rollout", args))
    assert info["state"] == "interrupted" and info["status"] == "RUNNING"
    assert "run_name='killed'" in info["summary"]
    assert 1 <= out["episodes_recorded_before_this_call"] < 30
    assert out["episodes_recorded"] == 30 == total_episodes(out["run_dir"]) and out["status"] == "OK"
    assert_matches_grade(out)


@pytest.mark.slow
async def test_bad_arguments_are_tool_errors_naming_valid_values_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    ok = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 3, "max_steps": 20}
    with anyio.fail_after(120):
        async with mcp_session(root, "--max-steps-ceiling", "500") as s:
            zero = error_text(await s.call_tool("run_policy_rollout", {**ok, "n_episodes": 0}))
            env = error_text(await s.call_tool("run_policy_rollout", {**ok, "env": "scripted/rech"}))
            family = error_text(await s.call_tool("run_policy_rollout", {**ok, "env": "nosuchsim/reach"}))
            policy = error_text(await s.call_tool("run_policy_rollout", {**ok, "policy": "scripted-exprt"}))
            steps = error_text(await s.call_tool("run_policy_rollout", {**ok, "max_steps": 501}))
            path = error_text(await s.call_tool("run_policy_rollout", {**ok, "policy": "os.path:join"}))
            tools = {t.name: t for t in (await s.list_tools()).tools}
    assert "n_episodes must be between 1 and 1000 (got 0)" in zero
    assert "unknown task or suite 'scripted/rech'" in env and "scripted/reach" in env and "list_envs" in env
    assert "unknown env family 'nosuchsim'" in family and "metaworld" in family and "scripted" in family
    assert "unknown policy 'scripted-exprt'" in policy and "scripted-expert" in policy and "random" in policy
    assert "max_steps must be between 1 and 500" in steps and "got 501" in steps
    assert "import path" in path and "scripted-expert" in path
    assert list(root.iterdir()) == []
    schema = tools["run_policy_rollout"].input_schema["properties"]
    assert schema["max_steps"]["maximum"] == 500 and schema["n_episodes"]["minimum"] == 1
    assert set(tools) == {
        "run_policy_rollout", "list_envs", "list_policies", "get_run", "grade_run", "robustness_study", "list_runs",
        "compare_policies_sequential", "rank_checkpoints",
    }  # fmt: skip


@pytest.mark.slow
async def test_run_name_that_escapes_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "runs", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    ok = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 1, "max_steps": 5}
    with anyio.fail_after(120):
        async with mcp_session(root) as s:
            texts = {
                name: error_text(await s.call_tool("run_policy_rollout", {**ok, "run_name": name}))
                for name in ("../escape", "..", "a/b", str(outside / "abs"), "link", ".hidden")
            }
            got = error_text(await s.call_tool("get_run", {"run_id": "../outside"}))
    assert all("refused" in t or "invalid run name" in t for t in texts.values()), texts
    assert "resolves outside" in texts["link"]
    assert "invalid run name '../outside'" in got
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "runs"]
    assert list(outside.iterdir()) == [] and [p.name for p in root.iterdir()] == ["link"]


@pytest.mark.slow
async def test_list_get_and_grade_runs_describe_recorded_runs(tmp_path: Path) -> None:
    args = {"policy": "scripted-expert", "env": "scripted/faulty", "n_episodes": 3, "max_steps": 20}
    with anyio.fail_after(120):
        async with mcp_session(tmp_path) as s:
            assert structured(await s.call_tool("list_runs", {}))["result"] == []
            first = structured(await s.call_tool("run_policy_rollout", {**args, "run_name": "a"}))
            second = structured(await s.call_tool("run_policy_rollout", {**args, "run_name": "b", "seed": 3}))
            runs = structured(await s.call_tool("list_runs", {"limit": 1}))["result"]
            info = structured(await s.call_tool("get_run", {"run_id": "a"}))
            regraded = structured(await s.call_tool("grade_run", {"run_id": "b"}))
            unknown = error_text(await s.call_tool("get_run", {"run_id": "zzz"}))
            envs = structured(await s.call_tool("list_envs", {"family": "scripted"}))["result"]
            policies = structured(await s.call_tool("list_policies", {}))["result"]
    assert [r["run_id"] for r in runs] == ["b"] and runs[0]["episodes_recorded"] == 3
    assert info["state"] == "finished" and info["status"] == first["status"] == "PARTIAL"
    asked = ("scripted/faulty", "scripted-expert", 3, 20)
    assert (info["env"], info["policy"], info["n_episodes"], info["max_steps"]) == asked
    assert info["reasons"] == first["reasons"] and info["live"] is None
    assert "finished with status PARTIAL" in info["summary"]
    assert {k: v for k, v in regraded.items() if k != "summary"} == {
        **{k: v for k, v in second.items() if k != "summary"},
        "episodes_recorded_before_this_call": None,
    }
    assert second["status"] == "PARTIAL" and [e["seed"] for e in second["errored_episodes"]] == [5]
    assert "no run named 'zzz'" in unknown and "a" in unknown and "b" in unknown
    assert "scripted/reach" in {t["name"] for fam in envs for t in fam["tasks"]}
    assert {"scripted-expert", "zero", "random"} <= {p["name"] for p in policies}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
async def test_http_transport_serves_the_same_tools(tmp_path: Path) -> None:
    from mcp import Client

    port = _free_port()
    cmd = [sys.executable, "-m", "rollbench", "mcp", "--transport", "http", "--root", str(tmp_path)]
    cmd += ["--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the http server did not start"
                await anyio.sleep(0.2)
        with anyio.fail_after(60):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                args = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 2, "max_steps": 10}
                res = await client.call_tool("run_policy_rollout", {**args, "run_name": "h"})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = structured(res)
    assert out["episodes_recorded"] == 2 == total_episodes(out["run_dir"]) and out["status"] == "OK"


@pytest.mark.slow
def test_import_rollbench_is_light_and_exports_evaluate_and_grade(tmp_path: Path) -> None:
    code = (
        "import sys, rollbench\n"
        "heavy = [m for m in ('duckdb', 'pyarrow', 'mcp', 'numpy', 'rollbench.api') if m in sys.modules]\n"
        "assert heavy == [], heavy\n"
        f"r = rollbench.evaluate(env='scripted/reach', policy='scripted-expert', episodes=2, out={str(tmp_path / 'r')!r})\n"
        f"g = rollbench.grade({str(tmp_path / 'r')!r})\n"
        "assert r['status'] == g['status'] == 'OK' and g['episodes_recorded'] == 2, g\n"
        "import rollbench.grading.grade as module\n"
        "assert module.wilson_interval(0, 0) == (0.0, 1.0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    help_text = subprocess.run(
        [sys.executable, "-m", "rollbench", "mcp", "--help"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    assert "--max-steps-ceiling" in help_text and "--root" in help_text


@pytest.mark.sim
async def test_a_fetch_rollout_leaves_the_clients_terminal_quiet(tmp_path: Path) -> None:
    """Issue 30, item 22: the server's stderr (the terminal of the client that launched it) gets nothing from a
    Fetch rollout (gymnasium_robotics' Farama notice, GL back-end chatter) nor from a refused call."""
    import os

    from mcp import ClientSession, StdioServerParameters, stdio_client

    errlog = tmp_path / "stderr.txt"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rollbench", "mcp", "--root", str(tmp_path / "runs")],
        env={"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
    )
    with anyio.fail_after(300), errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            args = {"policy": "fetch-expert", "env": "fetch/Reach", "n_episodes": 1, "max_steps": 5, "video": True}
            done = structured(await s.call_tool("run_policy_rollout", args))
            refused = await s.call_tool("run_policy_rollout", {**args, "policy": "no-such"})
    assert done["episodes_recorded"] == 1 and "no-such" in error_text(refused)
    assert errlog.read_text() == ""


@pytest.mark.slow
async def test_get_run_shows_the_reasons_grade_recomputes_not_run_json_recorded_text(tmp_path: Path) -> None:
    # a run recorded by an older version kept a server's raw text (escape sequences, a token) in its reasons
    from rollbench.api import evaluate, grade
    from rollbench.core.format import printable

    run = tmp_path / "old"
    evaluate(env="scripted/faulty", policy="scripted-expert", episodes=3, max_steps=20, out=run)
    doc = json.loads((run / "run.json").read_text())
    doc["results"]["reasons"] = ["\x1b[1A\x1b[2K\x1b[32mstatus: OK\nHTTP 500: Bearer TOPSECRETTOKEN123456"]
    (run / "run.json").write_text(json.dumps(doc))
    expected = [printable(r) for r in grade(run).reasons]  # the oracle: grade on the files, one line each
    with anyio.fail_after(120):
        async with mcp_session(tmp_path) as s:
            info = structured(await s.call_tool("get_run", {"run_id": "old"}))
    assert info["state"] == "finished" and info["reasons"] == expected and expected
    assert "TOPSECRET" not in json.dumps(info) and "\x1b" not in json.dumps(info) and "\\u001b" not in json.dumps(info)
    assert "Reasons (recomputed from the files): " in info["summary"]
