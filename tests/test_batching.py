"""``--batch-size B``: B episodes per worker in lockstep, one batched policy call per step.

The oracle is ``--batch-size 1``: every recorded step and episode record (minus measured durations) must be equal
for B = 3 and 8, with episodes of very different lengths in one batch, with a slot whose env raises, with worker
processes and Ray actors, and across a SIGKILL and resume. Everything is real: simulators, processes, Ray.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rollbench.api import Execution, evaluate, grade
from rollbench.core.contracts import ConfigError
from run_tables import info_and_stats, last_execution, recorded_tables

TESTS = Path(__file__).resolve().parent
# action noise makes episodes of one batch end at very different steps (lengths 3..20 here)
NOISY = dict(env="scripted/reach", policy="scripted-expert", episodes=13, seed=5, action_noise=0.6, max_steps=20)


def _run(tmp_path: Path, name: str, spec: dict[str, Any], **execution: Any) -> tuple[dict[str, Any], Any]:
    out = tmp_path / name
    result = evaluate(**spec, out=out, execution=Execution(**execution))
    return result, (result.episodes, recorded_tables(out), info_and_stats(out))


@pytest.mark.slow
def test_batch_sizes_3_and_8_record_exactly_what_batch_size_1_records(tmp_path: Path) -> None:
    base, expected = _run(tmp_path, "b1", NOISY)
    lengths = [e.length for e in base.episodes]
    assert base.episodes_recorded == 13 and max(lengths) - min(lengths) >= 5  # a real spread of lengths
    for b in (3, 8):
        result, got = _run(tmp_path, f"b{b}", NOISY, batch_size=b)
        assert result.status == base.status and result.episodes_recorded == 13
        assert got[0] == expected[0]  # per-episode results
        assert got[1][0].equals(expected[1][0])  # every recorded step, global index included
        assert got[1][1] == expected[1][1]  # every episode record
        assert got[2] == expected[2]  # info.json and stats.json
        assert last_execution(tmp_path / f"b{b}")["batch_size"] == b


def test_a_slot_whose_env_raises_errors_only_that_episode(tmp_path: Path) -> None:
    spec = dict(env="scripted/faulty", policy="scripted-expert", episodes=9, seed=0)
    _base, expected = _run(tmp_path, "b1", spec)
    result, got = _run(tmp_path, "b4", spec, batch_size=4)
    errored = [e.trial for e in result.episodes if e.termination_reason == "error"]
    assert errored == [2, 5, 8]  # seed % 3 == 2 fails at reset; its batch-mates go on
    assert result.tasks["scripted/faulty"].successes == 6
    assert got[0] == expected[0] and got[1][0].equals(expected[1][0])


def test_a_batch_answered_with_too_few_actions_errors_those_episodes_clearly(tmp_path: Path) -> None:
    sys.path.insert(0, str(TESTS))
    result = evaluate(
        env="scripted/reach",
        policy="fault_policies:short_batch",
        episodes=3,
        out=tmp_path / "r",
        execution=Execution(batch_size=3),
    )
    assert result.status == "FAILED" and result.episodes_recorded == 3
    for e in result.episodes:
        assert e.termination_reason == "error" and e.length == 0
        assert e.error == "EpisodeError: the policy returned 2 answers for a batch of 3 observations"


@pytest.mark.slow
def test_metaworld_expert_batched_equals_unbatched(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    spec = dict(env="metaworld/reach-v3,metaworld/button-press-v3", policy="metaworld-expert", episodes=3, seed=1)
    spec["max_steps"] = 60
    base, expected = _run(tmp_path, "b1", spec)
    assert base.status == "OK"
    _result, got = _run(tmp_path, "b4", spec, batch_size=4)
    assert got[0] == expected[0] and got[1][0].equals(expected[1][0]) and got[1][1] == expected[1][1]


@pytest.mark.slow
def test_workers_times_batch_sizes_give_the_same_dataset(tmp_path: Path) -> None:
    _base, expected = _run(tmp_path, "w1b1", NOISY)
    for workers, b in ((2, 1), (2, 3)):
        _result, got = _run(tmp_path, f"w{workers}b{b}", NOISY, workers=workers, batch_size=b)
        assert got[0] == expected[0] and got[1][0].equals(expected[1][0]) and got[1][1] == expected[1][1]


@pytest.mark.slow
def test_ray_actor_with_batch_size_3_gives_the_same_dataset(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    _base, expected = _run(tmp_path, "local", NOISY)
    _result, got = _run(tmp_path, "ray", NOISY, workers=1, executor="ray", batch_size=3)
    assert got[0] == expected[0] and got[1][0].equals(expected[1][0]) and got[1][1] == expected[1][1]


def test_batch_size_out_of_range_is_refused() -> None:
    with pytest.raises(ConfigError, match="--batch-size must be between 1 and 256, got 0"):
        Execution(batch_size=0)


@pytest.mark.slow
def test_sigkill_mid_run_with_batch_size_4_then_resume_records_exactly_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", "--env", "scripted/reach", "--policy", "fault_policies:slow", "--policy-options"]
    args += ['{"sleep_s": 0.03}', "--episodes", "40", "--max-steps", "10", "--seed", "2", "--batch-size", "4"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "rollbench", *args, "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(list(out.glob("meta/episodes/chunk-000/*.parquet"))) < 6:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = len(list(out.glob("meta/episodes/chunk-000/*.parquet")))
    assert 6 <= killed_at < 40
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # the oracle: the same plan unbatched and uninterrupted, in this process; its policy does not sleep (the sleep
    # only gives the SIGKILL time to land mid-run; it changes no action, and the episode records name no option)
    reference = tmp_path / "reference"
    sys.path.insert(0, str(TESTS))
    spec = dict(env="scripted/reach", policy="fault_policies:slow", policy_options={"sleep_s": 0}, episodes=40)
    assert evaluate(**spec, max_steps=10, seed=2, out=reference).status == "OK"
    resumed, clean = grade(out), grade(reference)
    assert resumed.status == "OK" and resumed.episodes_recorded == 40
    assert resumed.episodes == clean.episodes
    assert recorded_tables(out)[0].equals(recorded_tables(reference)[0])
