"""A rollbench process that ends without closing its run (issue 42, item 12's ``os._exit(0)`` and item 18's count):
a policy calling ``os._exit(0)`` in ``act`` ends rollbench with exit 0 and run.json saying RUNNING (nothing of
rollbench runs after it: docs/status.md), so ``grade`` and ``runs`` name the run stale and a resume finishes it with
the rows of a run never interrupted (the oracle: a clean run of the same spec). The count of invocations that ended
without a record is exact: a hand count of the invocations really killed (0, or 1 by SIGKILL), however often a
finished run is resumed.

The policy (tests/fault_policies.py ``ends_process_on_seed``) ends the process on the episode of seed 3 only while a
marker file exists, so the very same spec resumes once the marker is removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from conftest import rollbench_bin

TESTS = Path(__file__).resolve().parent
EPISODES = 4
CLOCK_COLUMNS = {"rollbench/wall_time_s", "policy.latency_s"}  # measured time: differs between any two runs


def spec_args(marker: Path, how: str) -> list[str]:
    options = json.dumps({"bad_seed": 3, "while_exists": str(marker), "how": how})
    return [
        *("--env", "scripted/reach", "--policy", "fault_policies:ends_process_on_seed", "--policy-options", options),
        *("--episodes", str(EPISODES), "--max-steps", "5", "--seed", "1"),
    ]


def run_real(*args: object) -> subprocess.CompletedProcess[str]:
    """The real ``rollbench`` process (a policy ending it must end a process of its own)."""
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [rollbench_bin(), *map(str, args)],
        env={**os.environ, "PYTHONPATH": path},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def rows(run: Path) -> list[dict[str, Any]]:
    """Every episode row and step row, without the wall-clock columns."""
    out = []
    for pattern in ("meta/episodes/chunk-000/file-*.parquet", "data/chunk-000/file-*.parquet"):
        for f in sorted(run.glob(pattern)):
            out += [{k: v for k, v in r.items() if k not in CLOCK_COLUMNS} for r in pq.read_table(f).to_pylist()]
    return out


def timing(run: Path) -> tuple[int, int]:
    """(finished invocations, invocations that left no record) as ``grade --json`` counts them."""
    t = json.loads(invoke("grade", run, "--json").stdout)["timing"]
    return t["invocations"], t["invocations_unrecorded"]


@pytest.mark.slow
def test_a_policy_calling_os_exit_0_leaves_a_stale_run_that_is_named_and_resumed(tmp_path: Path) -> None:
    marker, run, clean = tmp_path / "marker", tmp_path / "run", tmp_path / "clean"
    marker.touch()
    ended = run_real("eval", *spec_args(marker, "exit"), "--out", run)
    # the policy's own exit code: nothing can run after os._exit in the process (documented in docs/status.md)
    assert ended.returncode == 0 and "Traceback" not in ended.stderr, ended.stderr
    assert json.loads((run / "run.json").read_text())["status"] == "RUNNING"

    g = invoke("grade", run, "--json")
    note = [ln for ln in g.stderr.splitlines() if ln.startswith("note:")]
    assert note == [
        f"note: {run}: run.json says RUNNING (stale: no process is writing it, the process ended without closing "
        f"the run); resume it with: rollbench eval --resume {run} (its run.json names policy "
        "'fault_policies:ends_process_on_seed': resume uses them only when you type them again or add --trust-run; "
        "do so only for a run you recorded yourself)"
    ]  # never typed for the user: the run may be handed over (hostile round 16, F1)
    graded = json.loads(g.stdout)  # stdout stays the JSON document
    assert g.returncode == 1 and graded["status"] != "OK" and graded["episodes_recorded"] < EPISODES
    (row,) = json.loads(invoke("runs", tmp_path, "--json").stdout)
    assert row["status"].startswith("RUNNING (stale: no process is writing it, the process ended without closing")

    marker.unlink()
    resumed = invoke("eval", "--resume", run, "--policy", "fault_policies:ends_process_on_seed")  # as the note says
    assert resumed.returncode == 0, resumed.stderr
    assert invoke("eval", *spec_args(marker, "exit"), "--out", clean).returncode == 0
    assert rows(run) == rows(clean) and len(rows(clean)) > EPISODES
    assert "note:" not in invoke("grade", run).stderr  # finished: no longer stale
    assert timing(run) == (1, 1)  # hand count: one invocation finished, one ended by the policy


@pytest.mark.slow
def test_resuming_a_finished_run_counts_no_invocation_without_a_record(tmp_path: Path) -> None:
    marker, run = tmp_path / "never-made", tmp_path / "run"
    assert invoke("eval", *spec_args(marker, "kill"), "--out", run).returncode == 0
    for _ in range(2):  # a finished run resumed again: nothing to do, nothing ended without a record
        r = invoke("eval", "--resume", run, "--trust-run")
        assert r.returncode == 0 and "without a record" not in r.stderr + r.stdout, r.stdout
        doc = json.loads(invoke("eval", "--resume", run, "--trust-run", "--json").stdout)
        assert (doc["timing"]["invocations"], doc["timing"]["invocations_unrecorded"]) == (1, 0)
    assert len(json.loads((run / "run.json").read_text())["executions"]) == 1
    assert timing(run) == (1, 0)


@pytest.mark.parametrize("resumes", [1, 3])
@pytest.mark.slow
def test_one_killed_invocation_is_counted_once_however_often_the_run_is_resumed(tmp_path: Path, resumes: int) -> None:
    marker, run = tmp_path / "marker", tmp_path / "run"
    marker.touch()
    killed = run_real("eval", *spec_args(marker, "kill"), "--out", run)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    marker.unlink()
    for _ in range(resumes):  # the first runs what is left; the others find the run finished
        r = invoke("eval", "--resume", run, "--trust-run")
        assert r.returncode == 0, r.stderr
        assert "(1 more ended without a record, e.g. killed" in r.stdout, r.stdout
    assert timing(run) == (1, 1)
