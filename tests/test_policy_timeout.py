"""``--policy-timeout``: a policy call past its deadline ends that episode as ``error`` and the run goes on, in this
process and in worker processes (where the worker is replaced).

``fault_policies:hang`` (tests/fault_policies.py) is the scripted expert stuck in ``act`` on one seed: a test double
of the policy under evaluation. The envs, worker processes and recording are real.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from rollbench import GradeDocument
from rollbench.api import Execution, evaluate
from rollbench.core.registry import make_policy
from rollbench.run.deadline import Deadline, PolicyTimeout
from run_tables import recorded_tables

TESTS = Path(__file__).resolve().parent
HANG = {"bad_seed": 1, "hang_s": 120}


def check_hung_run(result: GradeDocument, seconds: float) -> None:
    eps = result.episodes
    assert [e.termination_reason for e in eps] == ["success", "error", "success", "success"]
    assert eps[1].error == "PolicyTimeout: policy.act did not return within --policy-timeout 1 s"
    assert eps[1].error_fault == "policy"  # an in-process policy that hangs is the policy's fault
    assert eps[1].length == 0
    assert result.overall.errors_by_fault == {"policy": 1, "environment": 0, "infrastructure": 0}
    assert seconds < 60  # one 1 s deadline, not the 120 s hang


def test_a_hanging_in_process_policy_errors_its_episode_and_the_run_goes_on(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = evaluate(env="scripted/reach", policy="fault_policies:hang", policy_options=HANG, episodes=4,
                 policy_timeout_s=1.0, out=tmp_path / "r")  # fmt: skip
    check_hung_run(r, time.monotonic() - t0)
    log = json.loads((tmp_path / "r" / "run.json").read_text())
    assert log["spec"]["policy_timeout_s"] == 1.0


@pytest.mark.slow
def test_a_hanging_policy_in_a_worker_process_is_replaced_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    t0 = time.monotonic()
    r = evaluate(env="scripted/reach", policy="fault_policies:hang", policy_options=HANG, episodes=4,
                 policy_timeout_s=1.0, out=tmp_path / "w", execution=Execution(workers=2))  # fmt: skip
    check_hung_run(r, time.monotonic() - t0)
    execution = json.loads((tmp_path / "w" / "run.json").read_text())["executions"][-1]
    assert execution["workers_replaced"] == 1 and execution["worker_deaths"] == 0
    # the same episodes as in this process
    evaluate(env="scripted/reach", policy="fault_policies:hang", policy_options=HANG, episodes=4,
             policy_timeout_s=1.0, out=tmp_path / "p")  # fmt: skip
    (_, meta_w), (_, meta_p) = recorded_tables(tmp_path / "w"), recorded_tables(tmp_path / "p")
    assert meta_w == meta_p


def test_a_policy_past_its_deadline_is_abandoned_and_a_fresh_one_serves_later_episodes() -> None:
    from rollbench.core.contracts import Observation
    from rollbench.envs.scripted import TASKS
    from rollbench.run.lockstep import PolicyLoop

    task, built = TASKS["scripted/reach"], []

    def build() -> PolicyLoop:
        built.append(make_policy("fault_policies:hang", {"bad_seed": 0, "hang_s": 120}))
        return PolicyLoop([built[-1]])

    policy = Deadline(build, 0.2, "policy")
    obs = Observation(state=np.asarray([0.1, 0.1, 0.5, 0.5], np.float32))
    policy.reset_slot(0, task, 0)
    with pytest.raises(PolicyTimeout, match=r"did not return within --policy-timeout 0\.2 s") as missed:
        policy.act_batch([0], [obs], [""])
    assert missed.value.fault == "policy" and policy.misses == 1
    t0 = time.monotonic()
    (answer,) = policy.act_batch([0], [obs], [""])  # the episode reset on the abandoned policy cannot go on
    assert isinstance(answer, PolicyTimeout) and "was abandoned" in str(answer)
    assert time.monotonic() - t0 < 0.1 and len(built) == 1  # not called, nothing built
    policy.reset_slot(0, task, 1)  # the next episode: a fresh policy
    (chunk,) = policy.act_batch([0], [obs], [""])
    assert len(built) == 2
    np.testing.assert_array_equal(chunk, [[1.0, 1.0]])
    policy.close()


@pytest.mark.slow
def test_a_served_policy_past_the_deadline_is_an_infrastructure_fault(tmp_path: Path) -> None:
    """The client's own per-call timeout (30 s here) is longer than the deadline (1 s): the deadline fires, and a
    round trip that hangs is the transport's fault, not the model's."""
    from served_policy import served

    with served(tmp_path, "scripted-expert", "ws", "--inject", "slow:4") as (url, _, _):
        r = evaluate(env="scripted/reach", policy=url, episodes=1, policy_timeout_s=1.0, out=tmp_path / "r",
                     policy_options={"timeout_s": 30})  # fmt: skip
    (e,) = r.episodes
    assert (e.termination_reason, e.error_fault) == ("error", "infrastructure")
    assert "did not return within --policy-timeout 1 s" in e.error


def test_with_batch_size_2_the_missed_call_ends_the_episodes_it_was_for_and_later_ones_get_a_fresh_policy(
    tmp_path: Path,
) -> None:
    """Episodes 0 and 1 run in lockstep: the one batched call that hangs (on seed 1) was for both."""
    r = evaluate(env="scripted/reach", policy="fault_policies:hang", policy_options=HANG, episodes=4,
                 policy_timeout_s=1.0, out=tmp_path / "b", execution=Execution(batch_size=2))  # fmt: skip
    eps = r.episodes
    assert [e.termination_reason for e in eps] == ["error", "error", "success", "success"]
    assert {e.error for e in eps[:2]} == {"PolicyTimeout: policy.act did not return within --policy-timeout 1 s"}
    assert r.overall.errors_by_fault["policy"] == 2


def test_builtin_bounded_policies_run_inline_and_any_other_policy_on_the_deadline_thread() -> None:
    """Built-in arithmetic policies (PolicyInfo.bounded) skip the helper thread's hand-offs; a user policy never does."""
    import threading

    from rollbench.core.contracts import Observation, PolicyInfo
    from rollbench.envs.scripted import TASKS
    from rollbench.run.lockstep import PolicyLoop

    seen: list[str] = []

    class Spy:
        def __init__(self, bounded: bool) -> None:
            self.inner = make_policy("scripted-expert", {})
            self.info = PolicyInfo(name="spy", bounded=bounded)

        def reset(self, task, seed):  # type: ignore[no-untyped-def]
            self.inner.reset(task, seed)

        def act(self, observation, instruction):  # type: ignore[no-untyped-def]
            seen.append(threading.current_thread().name)
            return self.inner.act(observation, instruction)

        def close(self) -> None:
            pass

    assert all(make_policy(n, {}).info.bounded for n in ("zero", "random", "scripted-expert", "metaworld-expert"))
    obs = Observation(state=np.array([0.0, 0.0, 0.5, 0.5], np.float32))
    for bounded, thread in ((True, threading.current_thread().name), (False, "rollbench-policy-call")):
        seen.clear()
        d = Deadline(lambda b=bounded: PolicyLoop([Spy(b)]), 5.0, "policy")  # type: ignore[misc]
        d.reset_slot(0, TASKS["scripted/reach"], 0)
        d.act_batch([0], [obs], [""])
        d.close()
        assert seen == [thread]
