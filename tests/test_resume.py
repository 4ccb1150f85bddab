"""Resume with worker processes: a run killed or stopped at any point finishes, on re-run, with exactly the planned
episodes (indices 0..N-1, each once), a readable LeRobot dataset, and ``grade`` equal to run.json's results.

Real processes throughout: ``rollbench eval`` as a subprocess killed with SIGKILL, its spawned workers, the run lock.
``fault_policies:slow`` (tests/fault_policies.py) is the scripted expert sleeping in every call, so runs last long
enough to be killed half-way; it acts exactly like ``scripted-expert``, which serves as the reference.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from observers import OnEpisodeEnd
from rollbench.api import Execution, evaluate, grade
from run_tables import recorded_tables

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}


def eval_args(out: Path, episodes: int, *extra: str) -> list[str]:
    return [ROLLBENCH, "eval", "--env", "scripted/reach,scripted/reach-final", "--policy", "fault_policies:slow",
            "--episodes", str(episodes), "--max-steps", "10", "--seed", "7", "--out", str(out), *extra]  # fmt: skip


def committed(out: Path) -> int:
    return len(list(out.glob("meta/episodes/chunk-000/*.parquet")))


def wait_for(condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def children_of(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_main_process_sigkilled_mid_run_then_resumed_holds_exactly_the_planned_episodes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        eval_args(out, 15, "--workers", "2"), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for(lambda: committed(out) >= 8)
    workers = children_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(workers) >= 2
    wait_for(lambda: not any(alive(p) for p in workers), timeout=10)  # no orphan simulators left behind

    partial = grade(out)
    k = partial.episodes_recorded
    assert 8 <= k < 30 and partial.violations == []
    assert [e.episode_index for e in partial.episodes] == list(range(k))

    r = subprocess.run(
        [ROLLBENCH, "eval", "--resume", str(out), "--policy", "fault_policies:slow", "--workers", "3", "--json"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    ref = evaluate(
        env="scripted/reach,scripted/reach-final",
        policy="scripted-expert",
        episodes=15,
        max_steps=10,
        seed=7,
        out=tmp_path / "ref",
    )
    done = grade(out)
    assert done.status == "OK" and done.violations == []
    assert done.episodes == ref.episodes  # exactly 0..29, each once, the planned seeds and outcomes
    printed = json.loads(r.stdout)
    assert printed.pop("run_dir") == str(out)  # --json also says where the run went
    assert done.to_json() == printed == json.loads((out / "run.json").read_text())["results"]
    info = json.loads((out / "meta/info.json").read_text())
    assert info["total_episodes"] == 30 and info["total_frames"] == sum(e.length for e in done.episodes)
    for e in done.episodes:  # every LeRobot data file is readable on its own
        table = pq.read_table(out / f"data/chunk-000/file-{e.episode_index:03d}.parquet")
        assert table.num_rows == e.length
    assert recorded_tables(out)[0].equals(recorded_tables(tmp_path / "ref")[0])
    log = json.loads((out / "run.json").read_text())
    assert [(x["workers"], "finished" in x) for x in log["executions"]] == [(2, False), (3, True)]
    assert not (out / "run.live.json").exists()


@pytest.mark.slow
def test_second_process_writing_the_same_run_dir_is_refused_with_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = subprocess.Popen(
        eval_args(out, 40, "--workers", "2"), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: committed(out) >= 1)
        second = subprocess.run(
            eval_args(out, 40, "--workers", "2"), env=ENV, capture_output=True, text=True, timeout=120
        )
        assert first.poll() is None, "the first run ended before the second one was tried"
        assert second.returncode == 2
        assert "is being written by another rollbench process" in " ".join(second.stderr.split())
    finally:
        assert first.wait(timeout=300) == 0  # the first run is unharmed and finishes
    result = grade(out)
    assert result.status == "OK" and result.episodes_recorded == 80 and result.violations == []


@pytest.mark.slow
def test_stopped_run_resumed_with_another_worker_count_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    spec = dict(env="scripted/reach", policy="scripted-expert", episodes=9, seed=2, action_noise=0.2)
    ref = evaluate(**spec, out=tmp_path / "ref")
    out = tmp_path / "run"
    finished: list[int] = []
    stopped = evaluate(
        **spec,
        out=out,
        execution=Execution(workers=2),
        observer=OnEpisodeEnd(lambda summary: finished.append(1), stop=lambda: len(finished) >= 3),
    )
    k = stopped.episodes_recorded
    assert 3 <= k < 9 and stopped.status == "PARTIAL"
    assert any(f"{9 - k} of 9 requested episodes are not recorded" in r for r in stopped.reasons)
    resumed = evaluate(**spec, out=out, execution=Execution(workers=3))
    assert resumed.status == "OK"
    assert resumed.episodes == ref.episodes
    assert recorded_tables(out)[0].equals(recorded_tables(tmp_path / "ref")[0])


@pytest.mark.slow
def test_a_finished_run_holds_no_lock_file_and_a_held_lock_refuses_a_second_writer(tmp_path: Path) -> None:
    """run.lock exists only while a writer holds it; while it is held, a second writer is refused (exit 2)."""
    from rollbench.record.runlog import RunLock, is_locked

    out = tmp_path / "run"
    evaluate(env="scripted/reach", policy="zero", episodes=2, max_steps=3, out=out)
    assert not (out / "run.lock").exists() and not is_locked(out)
    with RunLock(out):
        assert is_locked(out)
        r = subprocess.run(
            [ROLLBENCH, "eval", "--resume", str(out)], env=ENV, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 2 and "is being written by another rollbench process" in r.stderr
    assert not (out / "run.lock").exists() and not is_locked(out)
