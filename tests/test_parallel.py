"""Local worker processes (``--workers K``): the recorded run is a pure function of the spec, whatever K is, and a
worker that dies or whose env fails never costs, duplicates or reorders an episode.

Everything here is real: spawned worker processes, real SIGKILLs, the real run directory. ``fault_policies:slow``
(tests/fault_policies.py) is the scripted expert with a sleep per action, so that a kill lands mid-run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from observers import OnEpisodeEnd
from rollbench.api import Execution, evaluate, grade
from rollbench.core.contracts import ConfigError
from rollbench.run.observer import EpisodeSummary
from run_tables import info_and_stats, last_execution, recorded_tables


def worker_processes() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name.startswith("rollbench-worker-")]


@pytest.mark.slow
def test_episode_k_starts_from_stored_initial_state_k_with_1_and_3_workers(tmp_path: Path) -> None:
    """The LIBERO protocol's indexing, through real worker processes: scripted/reach-init stands in for a LIBERO
    task (a stored table of initial states; the seed does not choose the scene)."""
    from rollbench.envs.scripted import INITIAL_STATES

    spec = dict(env="scripted/reach-init", policy="scripted-expert", episodes=7, seed=3)
    first_states = {}
    for k in (1, 3):
        out = tmp_path / f"w{k}"
        result = evaluate(**spec, out=out, execution=Execution(workers=k))
        assert result.status == "OK"
        assert [e.initial_state for e in result.episodes] == list(range(7))
        data = recorded_tables(out)[0]
        frames, states = data["frame_index"].to_pylist(), data["observation.state"].to_pylist()
        first_states[k] = [s for s, f in zip(states, frames, strict=True) if f == 0]
    expected = [pytest.approx(list(INITIAL_STATES[i]), abs=1e-6) for i in range(7)]
    assert first_states[1] == first_states[3] == expected


def test_more_episodes_than_stored_initial_states_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has 10 stored initial states; --episodes 11 would need more"):
        evaluate(env="scripted/reach-init", policy="scripted-expert", episodes=11, out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_recorded_run_is_identical_with_1_2_and_3_workers(tmp_path: Path) -> None:
    spec = dict(env="scripted/reach", policy="scripted-expert", episodes=7, seed=11, action_noise=0.3)
    runs = {}
    for k in (1, 2, 3):
        out = tmp_path / f"w{k}"
        result = evaluate(**spec, out=out, execution=Execution(workers=k))
        assert result.status == "OK" and result.episodes_recorded == 7
        runs[k] = (result.episodes, recorded_tables(out), info_and_stats(out))
        assert last_execution(out)["workers"] == k
        assert not (out / "run.live.json").exists()
        assert not (out / ".staging").exists()  # everything staged was committed and the empty folder removed
    assert [e.episode_index for e in runs[1][0]] == list(range(7))
    assert len({e.length for e in runs[1][0]}) > 1  # the noise makes episodes differ: a real comparison
    for k in (2, 3):
        assert runs[k][0] == runs[1][0]  # per-episode results
        assert runs[k][1][0].equals(runs[1][1][0])  # every recorded step, including the global index
        assert runs[k][1][1] == runs[1][1][1]  # every episode record
        assert runs[k][2] == runs[1][2]  # info.json and stats.json
    assert last_execution(tmp_path / "w3")["worker_starts"] == 3


@pytest.mark.slow
def test_sigkilled_workers_are_replaced_and_each_episode_is_recorded_exactly_once(tmp_path: Path) -> None:
    spec = dict(env="scripted/reach", episodes=12, seed=3, max_steps=10)
    ref = evaluate(**spec, policy="scripted-expert", out=tmp_path / "ref")
    killed: list[int] = []

    def kill_all_workers_once(summary: EpisodeSummary) -> None:
        # on the 3rd finished episode: the worker that reported it already holds its next episode, so at least
        # one killed worker dies with an episode in flight
        if not killed and summary.episode_index >= 2:
            for p in worker_processes():
                assert p.pid is not None
                os.kill(p.pid, signal.SIGKILL)
                killed.append(p.pid)

    out = tmp_path / "run"
    result = evaluate(
        **spec,
        policy="fault_policies:slow",
        out=out,
        execution=Execution(workers=2),
        observer=OnEpisodeEnd(kill_all_workers_once),
    )
    assert len(killed) == 2
    assert result.violations == []
    assert [e.episode_index for e in result.episodes] == list(range(12))  # exactly 0..11, each once
    # a kill that landed inside the policy's or the env's call charges that side (tests/test_worker_deaths.py);
    # every other lost episode ran again with its outcome unchanged
    charged = 0
    for episode, expected in zip(result.episodes, ref.episodes, strict=True):
        if (episode.error or "").startswith("WorkerDied: "):
            charged += 1
            side = "policy" if "while the policy's " in (episode.error or "") else "environment"
            assert episode.error_fault == side and "killed by SIGKILL" in (episode.error or "")
        else:
            assert episode == expected
    ex = last_execution(out)
    assert ex["worker_deaths"] == 2 and ex["worker_starts"] == 4
    assert 1 <= ex["episodes_rerun"] + charged <= 2 and ex["episodes_lost"] == 0
    assert grade(out) == result
    assert worker_processes() == []


@pytest.mark.slow
def test_env_failing_on_reset_in_a_worker_records_error_episodes_and_the_worker_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = evaluate(
        env="scripted/faulty", policy="scripted-expert", episodes=7, out=out, execution=Execution(workers=2)
    )
    assert result.status == "PARTIAL" and result.episodes_recorded == 7
    errors = {e.episode_index: e.error for e in result.episodes if e.termination_reason == "error"}
    assert sorted(errors) == [2, 5]  # seeds 2 and 5: seed % 3 == 2
    assert all("reset fails on purpose" in why for why in errors.values())
    assert sum(1 for e in result.episodes if e.success) == 5
    assert any("episode 2 (scripted/faulty, seed 2) ended in error" in r for r in result.reasons)
    ex = last_execution(out)
    assert ex["worker_deaths"] == 0 and ex["worker_starts"] == 2  # no worker was lost to the env errors


@pytest.mark.slow
def test_live_snapshot_shows_each_worker_and_an_eta_while_running(tmp_path: Path) -> None:
    out = tmp_path / "run"
    seen: list[dict[str, Any]] = []
    first: list[float] = []

    def read_live(summary: EpisodeSummary) -> None:
        first.append(time.monotonic())
        # the snapshot is rewritten at most once a second: 1.2 s after the first episode it has been rewritten
        if first[-1] - first[0] > 1.2 and not seen:
            seen.append(json.loads((out / "run.live.json").read_text()))

    evaluate(
        env="scripted/reach",
        policy="fault_policies:slow",
        policy_options={"sleep_s": 0.03},
        episodes=40,
        max_steps=10,
        out=out,
        execution=Execution(workers=2),
        observer=OnEpisodeEnd(read_live),
    )
    assert seen, "the run finished before the snapshot could be read"
    live = seen[0]
    assert set(live["workers"]) == {"0", "1"}
    for state in live["workers"].values():
        assert re.fullmatch(r"idle|starting|episode \d+ \(scripted/reach\)", state), state
    assert 0 < live["episodes_done"] < 40 and live["episodes_total"] == 40
    assert live["tasks"]["scripted/reach"]["total"] == 40
    assert live["eta_s"] is not None and live["eta_s"] > 0
    assert not (out / "run.live.json").exists()  # removed on completion


def test_bad_execution_choices_are_refused_with_the_valid_values() -> None:
    with pytest.raises(ConfigError, match="--workers must be between 1 and 1024, got 0"):
        Execution(workers=0)
    with pytest.raises(ConfigError, match="valid executors: local, ray"):
        Execution(executor="dask")
    with pytest.raises(ConfigError, match="--ray-address only applies to --executor ray"):
        Execution(ray_address="127.0.0.1:6379")


@pytest.mark.sim
def test_metaworld_episodes_identical_with_one_and_two_workers(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    spec = dict(env="metaworld/reach-v3", policy="random", episodes=3, max_steps=40, seed=5)
    one = evaluate(**spec, out=tmp_path / "w1")
    two = evaluate(**spec, out=tmp_path / "w2", execution=Execution(workers=2))
    assert one.status == two.status == "OK"
    assert two.episodes == one.episodes
    d1, m1 = recorded_tables(tmp_path / "w1")
    d2, m2 = recorded_tables(tmp_path / "w2")
    assert d2.equals(d1) and m2 == m1


@pytest.mark.slow
def test_script_without_a_main_guard_can_use_workers(tmp_path: Path) -> None:
    """Spawned workers must not re-run the caller's script (which would start a second evaluation per worker)."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from rollbench.api import Execution, evaluate\n"
        f"r = evaluate(env='scripted/reach', policy='scripted-expert', episodes=4, out={str(tmp_path / 'run')!r},\n"
        "             execution=Execution(workers=2))\n"
        "print(r.status, r.episodes_recorded)\n"
    )
    # a generous bound: a second evaluation per worker would never end in it; a loaded machine must not fail the test
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["OK", "4"]
