"""Every call into an in-process env of a plug-in family or of ``gym:MODULE:ID`` has the env deadline
(``rollbench.run.env_deadline``, ``$ROLLBENCH_ENV_TIMEOUT_S``; hostile round 10, F16), whose value is checked
(F17). Real parts: rollbench's gym family and episode loop over the gymnasium test doubles of ``tests/hang_envs.py``,
the CLI as a subprocess; the wrapper alone over ``hang_envs.Gate``. Oracles: the doubles' own call logs, gymnasium's
own loop replaying the recorded actions, and the same run with the env called inline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from hang_envs import Gate
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError, ExpectsImages, TaskInfo
from rollbench.core.env_timeout import env_timeout_s
from rollbench.envs.gym import FAMILY as GYM
from rollbench.run.env_deadline import EnvDeadline, EnvTimeout
from run_tables import recorded_tables, same_run

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))
TASK = TaskInfo("plug/gate", "", 10, ("cam",), "any_step", 1, 1, (-1.0,), (1.0,), has_instruction=False)


def keeping(inner: list[Gate], gate: threading.Event, **options: object) -> Callable[[], Gate]:
    """A build function making a Gate and keeping it in ``inner`` (the test reads its call log)."""

    def build() -> Gate:
        inner.append(Gate(TASK, gate, **options))  # type: ignore[arg-type]
        return inner[-1]

    return build


GONE = "env.{}() did not return within the env deadline of 0.2 s ($ROLLBENCH_ENV_TIMEOUT_S)"


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # the abandoned calls return and their threads end


def test_a_call_past_the_deadline_is_an_environment_error_and_the_env_is_never_called_again(
    gate: threading.Event,
) -> None:
    inner: list[Gate] = []
    env = EnvDeadline(keeping(inner, gate, blocks=("step",)), 0.2, "plug/gate")
    assert env.task is TASK and env.reset(3, None).state.tolist() == [3.0]
    with pytest.raises(EnvTimeout) as missed:
        env.step(np.array([0.5], dtype=np.float32))
    assert str(missed.value) == "plug/gate: " + GONE.format("step") + "; the env was abandoned"
    assert missed.value.fault == "environment" and env.abandoned == "step"
    with pytest.raises(EnvTimeout) as later:
        env.reset(4, None)
    assert str(later.value) == (
        "plug/gate: env.reset() not called: this env was abandoned after its step() missed the env deadline of 0.2 s"
    )
    env.close()  # skipped: it could block behind the hung step
    assert [c for c, _ in inner[0].calls] == ["make", "reset", "step"]


def test_a_live_envs_close_is_bounded_and_happens_once(gate: threading.Event) -> None:
    inner: list[Gate] = []
    env = EnvDeadline(keeping(inner, gate, blocks=("close",)), 0.2, "plug/gate")
    with pytest.raises(EnvTimeout) as missed:
        env.close()
    assert str(missed.value) == GONE.format("close") + "; rollbench went on without it"
    env.close()
    assert [c for c, _ in inner[0].calls] == ["make", "close"]


def test_a_build_past_the_deadline_is_an_environment_error(gate: threading.Event) -> None:
    def build() -> Gate:
        gate.wait()
        raise AssertionError("never reached while the test runs")

    with pytest.raises(EnvTimeout) as missed:
        EnvDeadline(build, 0.2, "plug/gate")
    assert str(missed.value) == "plug/gate: " + GONE.format("make") + "; the env was abandoned"


def test_every_call_runs_on_the_thread_that_built_the_env_and_hooks_and_errors_pass_through(
    gate: threading.Event,
) -> None:
    inner: list[Gate] = []
    env = EnvDeadline(keeping(inner, gate, expects=True), 60, "plug/gate")
    assert isinstance(env, ExpectsImages)
    env.expect_images(("cam",))
    env.reset(0, None)
    result = env.step(np.array([0.25], dtype=np.float32))
    assert (result.reward, result.success, result.observation.state.tolist()) == (0.5, True, [0.25])
    assert env.render("cam").tolist() == [[[7, 7, 7]] * 2] * 2 and env.success() is False
    with pytest.raises(ValueError, match=r"^Gate: a negative action$"):  # the env's own exception, unchanged
        env.step(np.array([-1.0], dtype=np.float32))
    env.close()
    calls = inner[0].calls
    assert [c for c, _ in calls] == ["make", "expect_images", "reset", "step", "render", "success", "step", "close"]
    assert len({t for _, t in calls}) == 1 and calls[0][1] != threading.get_ident()
    plain = EnvDeadline(lambda: Gate(TASK, gate), 60, "plug/gate")
    assert not isinstance(plain, ExpectsImages)  # an env without the hook: the wrapper has none either
    plain.close()


@pytest.mark.parametrize("name", ["ROLLBENCH_ENV_TIMEOUT_S", "ROLLBENCH_ENV_HOST_TIMEOUT_S"])
@pytest.mark.parametrize("raw", ["inf", "1e400", "nan", "-1", "0", "86400.5", "-inf"])
def test_an_env_deadline_that_is_not_a_finite_positive_number_of_seconds_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    monkeypatch.delenv("ROLLBENCH_ENV_TIMEOUT_S", raising=False)
    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError) as refused:
        env_timeout_s()
    assert str(refused.value) == f"{name}={raw!r} must be a number of seconds above 0 and at most 86400"


def test_the_env_deadline_defaults_to_120_s_and_the_new_name_wins_over_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROLLBENCH_ENV_TIMEOUT_S", raising=False)
    monkeypatch.delenv("ROLLBENCH_ENV_HOST_TIMEOUT_S", raising=False)
    assert env_timeout_s() == 120.0
    monkeypatch.setenv("ROLLBENCH_ENV_HOST_TIMEOUT_S", "7.5")
    assert env_timeout_s() == 7.5
    monkeypatch.setenv("ROLLBENCH_ENV_TIMEOUT_S", "86400")
    assert env_timeout_s() == 86400.0
    monkeypatch.setenv("ROLLBENCH_ENV_TIMEOUT_S", "two")
    with pytest.raises(ConfigError, match=r"^ROLLBENCH_ENV_TIMEOUT_S='two' is not a number of seconds$"):
        env_timeout_s()


def _eval(out: Path, env_id: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    variables = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
        "ROLLBENCH_ENV_TIMEOUT_S": "2",
        **env,
    }
    command = [ROLLBENCH, "eval", "--env", f"gym:hang_envs:{env_id}", "--policy", "zero", "--out", str(out), *args]
    return subprocess.run(command, env=variables, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(("call", "length"), [("step", 2), ("reset", 0)])
def test_an_env_call_that_never_returns_ends_its_episode_and_the_next_gets_a_fresh_env(
    tmp_path: Path, workers: str, call: str, length: int
) -> None:
    builds = tmp_path / "builds"
    env_id = f"RollbenchHang{call.title()}-v0"
    r = _eval(tmp_path / "run", env_id, "--episodes", "3", "--seed", "100", "--workers", workers, "--json",
              HANG_ENVS_BUILDS=str(builds))  # fmt: skip
    assert r.returncode == 1, r.stderr  # PARTIAL: some episodes errored (docs/status.md)
    result = json.loads(r.stdout)
    assert result["status"] == "PARTIAL"
    episodes = [(e["seed"], e["termination_reason"], e["length"], e["error_fault"]) for e in result["episodes"]]
    assert episodes == [(100, "truncated", 5, None), (101, "error", length, "environment"), (102, "truncated", 5, None)]
    assert result["episodes"][1]["error"] == (
        f"EnvTimeout: gym/hang_envs:{env_id}: env.{call}() did not return within the env deadline of 2 s "
        "($ROLLBENCH_ENV_TIMEOUT_S); the env was abandoned"
    )
    if workers == "1":  # one process: the check before the run, the first env, the fresh one after the hang
        assert len(builds.read_text().splitlines()) == 3


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_env_close_that_never_returns_is_a_warning_after_the_episodes_are_recorded(
    tmp_path: Path, workers: str
) -> None:
    r = _eval(
        tmp_path / "run", "RollbenchHangClose-v0", "--episodes", "3", "--seed", "100", "--workers", workers, "--json"
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["status"] == "OK" and [e["termination_reason"] for e in result["episodes"]] == ["truncated"] * 3
    assert (
        "warning: env gym/hang_envs:RollbenchHangClose-v0: env.close() did not return within the env deadline of 2 s "
        "($ROLLBENCH_ENV_TIMEOUT_S); rollbench went on without it"
    ) in r.stderr.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("call", ["reset", "step", "close"])
def test_a_gym_env_that_hangs_while_it_is_checked_is_refused_before_the_run(tmp_path: Path, call: str) -> None:
    r = _eval(tmp_path / "run", f"RollbenchHangProbe{call.title()}-v0", "--episodes", "1", "--json")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: gymnasium env 'hang_envs:RollbenchHangProbe{call.title()}-v0': its {call}() did not return within "
        "the env deadline of 2 s ($ROLLBENCH_ENV_TIMEOUT_S) while rollbench checked the env before the run"
    )
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ROLLBENCH_ENV_TIMEOUT_S", "ROLLBENCH_ENV_HOST_TIMEOUT_S"])
def test_an_infinite_env_deadline_is_refused_with_one_line_before_anything_runs(tmp_path: Path, name: str) -> None:
    env = {"ROLLBENCH_ENV_TIMEOUT_S": ""} | {name: "inf"}
    r = _eval(tmp_path / "run", "RollbenchHangNever-v0", "--episodes", "1", **env)
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", f"error: {name}='inf' must be a number of seconds above 0 and at most 86400\n"
    )  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_a_wrapped_env_records_what_gymnasium_steps_and_what_an_inline_env_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = {"env": "gym:hang_envs:RollbenchHangNever-v0", "policy": "random", "episodes": 2, "seed": 100}
    wrapped = evaluate(out=tmp_path / "wrapped", **common)
    monkeypatch.setattr(type(GYM), "inline", True)  # the same env called inline, as rollbench's own families are
    inline = evaluate(out=tmp_path / "inline", **common)
    assert [e.length for e in wrapped.episodes] == [e.length for e in inline.episodes] == [5, 5]
    same_run(tmp_path / "wrapped", tmp_path / "inline")
    data, _ = recorded_tables(tmp_path / "wrapped")
    rows = data.to_pydict()
    for episode, seed in enumerate((100, 101)):  # gymnasium's own loop replaying the recorded actions
        mine = [i for i, e in enumerate(rows["episode_index"]) if e == episode]
        env = gymnasium.make("hang_envs:RollbenchHangNever-v0")
        obs, _ = env.reset(seed=seed)
        for i in mine:
            assert np.array_equal(np.asarray(rows["observation.state"][i], dtype=np.float32), obs)
            obs, reward, _, _, info = env.step(np.asarray(rows["action"][i], dtype=np.float32))
            assert (np.float32(reward), bool(info["is_success"])) == (rows["next.reward"][i], rows["next.success"][i])
        env.close()
