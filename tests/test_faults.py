"""Every episode error is classified by fault (policy, environment, infrastructure), graded per fault, and a resume
re-runs the infrastructure-errored episodes (``--retry-errors``), replacing them in a still valid dataset.

Real parts: scripted and gymnasium envs (``tests/fault_envs.py``), policies from ``tests/fault_policies.py`` (test
doubles of the policy under evaluation), a real ``rollbench serve-policy`` process killed with SIGKILL and restarted,
``rollbench eval`` run as a subprocess. The one injected fault of a rollbench part is
:func:`test_a_crash_while_replacing_episodes_leaves_a_run_that_resumes_to_the_same_dataset`: a crash cannot be timed
to land inside the replacement otherwise, so ``DatasetWriter._restage`` raises there (the docstring says so).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from observers import Starts
from rollbench import GradeDocument
from rollbench.api import Execution, evaluate, grade
from rollbench.record.writer import DatasetWriter
from run_tables import recorded_tables

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))
NO_FAULTS = {"policy": 0, "environment": 0, "infrastructure": 0}


def assert_same_dataset(run: Path, reference: Path) -> None:
    """Equal per-step rows and episode records (timing columns aside); NaN equals NaN (padding frames)."""
    (data, meta), (ref_data, ref_meta) = recorded_tables(run), recorded_tables(reference)
    assert meta == ref_meta
    assert data.column_names == ref_data.column_names
    for col in data.column_names:
        np.testing.assert_array_equal(np.asarray(data[col].to_pylist()), np.asarray(ref_data[col].to_pylist()), col)


def faults(result: GradeDocument) -> list[str | None]:
    return [e.error_fault for e in result.episodes]


def meta_faults(run_dir: Path) -> list[str | None]:
    files = sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet"))
    return [pq.read_table(f)["rollbench/error_fault"][0].as_py() for f in files]


def test_policy_exceptions_and_bad_actions_are_policy_faults(tmp_path: Path) -> None:
    r = evaluate(env="scripted/reach", policy="fault_policies:fail_on_seeds", episodes=3, out=tmp_path / "a",
                 policy_options={"policy_seeds": [1], "while_exists": str(tmp_path / "absent")})  # fmt: skip
    assert faults(r) == meta_faults(tmp_path / "a") == [None, "policy", None]
    assert r.episodes[1].error == "RuntimeError: policy bug on seed 1"
    nan = evaluate(env="scripted/reach", policy="fault_policies:nan_on_seed", policy_options={"bad_seed": 0},
                   episodes=1, out=tmp_path / "b")  # fmt: skip
    assert faults(nan) == ["policy"]
    assert nan.overall.errors_by_fault == {**NO_FAULTS, "policy": 1}


def test_simulator_exceptions_at_reset_and_step_are_environment_faults(tmp_path: Path) -> None:
    r = evaluate(env="scripted/faulty,gym:fault_envs:RollbenchStepError-v0", policy="zero", episodes=3,
                 out=tmp_path / "r")  # fmt: skip
    assert faults(r) == [None, None, "environment"] + ["environment"] * 3
    assert r.episodes[3].error == "RuntimeError: fault_envs: the simulator failed at step 2"
    assert r.episodes[3].length == 2  # the steps before the fault are kept
    assert r.tasks["scripted/faulty"].errors_by_fault == {**NO_FAULTS, "environment": 1}
    assert r.overall.errors_by_fault == {**NO_FAULTS, "environment": 4}
    assert "errors by fault: 4 environment" in r.reasons


def test_an_env_that_cannot_be_built_and_an_error_carrying_its_fault_are_infrastructure(tmp_path: Path) -> None:
    r = evaluate(env="gym:fault_envs:RollbenchNoRenderBuild-v0", policy="zero", episodes=2, video=True,
                 image_size=(32, 32), out=tmp_path / "a")  # fmt: skip
    assert faults(r) == ["infrastructure", "infrastructure"]
    assert "cannot be built with a renderer" in r.episodes[0].error
    flag = tmp_path / "server-down"
    flag.touch()
    s = evaluate(env="scripted/reach", policy="fault_policies:fail_on_seeds", episodes=2, out=tmp_path / "b",
                 policy_options={"infra_seeds": [0], "while_exists": str(flag)})  # fmt: skip
    assert faults(s) == ["infrastructure", None]
    assert any("failed through no fault of the policy" in reason for reason in s.reasons)


def _run(out: Path, flag: Path, **kw: Any) -> GradeDocument:
    return evaluate(
        env="scripted/reach,scripted/reach-final",
        policy="fault_policies:fail_on_seeds",
        policy_options={"infra_seeds": [1, 3], "policy_seeds": [2], "while_exists": str(flag)},
        episodes=5,
        max_steps=12,
        video=True,
        image_size=(32, 32),
        out=out,
        **kw,
    )


@pytest.mark.slow
def test_resume_reruns_infrastructure_errored_episodes_and_replaces_them_in_place(tmp_path: Path) -> None:
    flag = tmp_path / "server-down"
    reference = _run(tmp_path / "ref", flag)  # the server was up all along
    flag.touch()
    first = _run(tmp_path / "run", flag)
    assert first.overall.errors_by_fault == {"policy": 2, "environment": 0, "infrastructure": 4}
    assert [e.length for e in first.episodes if e.error_fault == "infrastructure"] == [0, 0, 0, 0]
    flag.unlink()  # the server is back: the same call again
    seen = Starts()
    again = _run(tmp_path / "run", flag, observer=seen)
    assert [(sum(s.done.values()), s.retried) for s in seen.starts] == [(6, 4)]
    assert again.overall.errors_by_fault == {"policy": 2, "environment": 0, "infrastructure": 0}
    assert again.violations == [] and _same(again, reference)
    assert_same_dataset(tmp_path / "run", tmp_path / "ref")
    log = json.loads((tmp_path / "run" / "run.json").read_text())
    replaced = log["replacements"]
    assert [r["episode_index"] for r in replaced] == [1, 3, 6, 8]
    assert all(r["old"]["error_fault"] == "infrastructure" and r["execution"] == 1 for r in replaced)
    ref = {e.episode_index: e for e in reference.episodes}
    for r in replaced:
        e = ref[r["episode_index"]]
        assert r["new"]["error_fault"] is None and r["new"]["length"] == e.length > 0
        assert (r["new"]["termination_reason"], r["new"]["success"]) == (e.termination_reason, e.success)
    assert "policy server unreachable on seed 1" in replaced[0]["old"]["error"]

    # --retry-errors none keeps the policy errors; all re-runs them (this policy fails on them again)
    assert _run(tmp_path / "run", flag, execution=Execution(retry_errors="none")).overall.errors == 2
    assert len(json.loads((tmp_path / "run" / "run.json").read_text())["replacements"]) == 4
    _run(tmp_path / "run", flag, execution=Execution(retry_errors="all"))
    replaced = json.loads((tmp_path / "run" / "run.json").read_text())["replacements"]
    assert [(r["episode_index"], r["new"]["error_fault"]) for r in replaced[4:]] == [(2, "policy"), (7, "policy")]
    assert_same_dataset(tmp_path / "run", tmp_path / "ref")


def _same(a: GradeDocument, b: GradeDocument) -> bool:
    keys = ("episode_index", "seed", "success", "length", "return", "termination_reason", "error_fault")
    return [[e.to_json()[k] for k in keys] for e in a.episodes] == [[e.to_json()[k] for k in keys] for e in b.episodes]


@pytest.mark.slow
def test_a_crash_while_replacing_episodes_leaves_a_run_that_resumes_to_the_same_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = tmp_path / "server-down"
    _run(tmp_path / "ref", flag)
    flag.touch()
    _run(tmp_path / "run", flag)
    flag.unlink()
    real, calls = DatasetWriter._restage, []

    def crash_on_third(self: DatasetWriter, e: int) -> None:
        calls.append(e)
        if len(calls) == 3:
            raise OSError("injected crash while re-staging")
        real(self, e)

    monkeypatch.setattr(DatasetWriter, "_restage", crash_on_third)
    with pytest.raises(OSError, match="injected crash"):
        _run(tmp_path / "run", flag)
    monkeypatch.undo()
    assert calls == [9, 7, 5]  # the tail is taken back last episode first; 8 is replaced, so not re-staged
    mid = grade(tmp_path / "run")
    assert mid.violations == []  # consistent at the crash: committed 0..k-1, the rest staged or missing
    final = _run(tmp_path / "run", flag)
    assert final.violations == [] and final.overall.errors_by_fault["infrastructure"] == 0
    assert_same_dataset(tmp_path / "run", tmp_path / "ref")


# ------------------------------------------------------------------------------------- a real served policy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(port: int) -> subprocess.Popen[str]:
    cmd = [ROLLBENCH, "serve-policy", "--policy", "scripted-expert", "--port", str(port), "--inject", "slow:0.03"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving "), f"server did not start: {line!r}"
    return proc


@pytest.mark.slow
def test_served_policy_killed_mid_run_then_restarted_resumes_to_the_experts_full_success(tmp_path: Path) -> None:
    port, out = _free_port(), tmp_path / "run"
    cmd = [ROLLBENCH, "eval", "--env", "scripted/reach", "--policy", f"ws://127.0.0.1:{port}", "--episodes", "10",
           "--max-steps", "20", "--policy-options", '{"retries": 1}', "--out", str(out), "--json"]  # fmt: skip
    server = _serve(port)
    try:
        run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(list(out.glob("meta/episodes/chunk-000/*.parquet"))) < 3:
            assert time.monotonic() < deadline and run.poll() is None, "the run did not get going"
            time.sleep(0.02)
        os.kill(server.pid, signal.SIGKILL)  # the server dies in the middle of the run
        server.wait(timeout=10)
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 1, stderr
        first = json.loads(stdout)
        errored = [e for e in first["episodes"] if e["termination_reason"] == "error"]
        assert 1 <= len(errored) <= 7
        assert first["overall"]["errors_by_fault"] == {**NO_FAULTS, "infrastructure": len(errored)}
        assert any("failed through no fault of the policy" in r for r in first["reasons"])
        assert all(f"ws://127.0.0.1:{port}" in e["error"] for e in errored)

        server = _serve(port)  # back up; the same command again
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        result = json.loads(again.stdout)
        assert result["status"] == "OK" and result["tasks"]["scripted/reach"]["success_rate"] == 1.0
        assert result["overall"]["errors_by_fault"] == NO_FAULTS
        graded = grade(out)
        assert graded.status == "OK" and graded.violations == []
        replaced = json.loads((out / "run.json").read_text())["replacements"]
        assert [r["episode_index"] for r in replaced] == [e["episode_index"] for e in errored]
        assert all(r["new"]["success"] for r in replaced)
    finally:
        server.kill()
        server.wait(timeout=10)
