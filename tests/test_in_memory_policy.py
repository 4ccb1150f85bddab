"""``rollbench.evaluate(policy=<object>)``: a policy object of the caller's process (a training loop's model) runs
in this process, writes the run directory ``rollbench eval`` writes, records what it was and is never pickled.

Oracle: the same actions from the registered ``scripted-expert`` evaluated by name (its episodes, graded from disk,
must equal the object's field for field), and hand-written expectations for run.json and the refusals."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rollbench
from conftest import REPO, run_cli

EPISODE_FIELDS = ("task", "seed", "success", "length", "termination_reason", "return")


class Greedy:
    """Steps the scripted point at its goal, as the registered scripted-expert does; refuses to be pickled."""

    def __init__(self) -> None:
        self.info = rollbench.PolicyInfo(name="greedy", chunk_size=1, tasks=("scripted/*",))
        self.closed = 0

    def reset(self, task: rollbench.TaskInfo, seed: int) -> None:
        pass

    def act(self, observation: rollbench.Observation, instruction: str) -> np.ndarray:
        s = observation.state
        return np.clip((s[2:4] - s[0:2]) / 0.1, -1.0, 1.0).astype(np.float32)[None, :]

    def close(self) -> None:
        self.closed += 1

    def __reduce__(self) -> Any:
        raise AssertionError("an in-memory policy must never be pickled")


class _GreedyBatch:
    def __init__(self, policy: BatchedGreedy) -> None:
        self.policy, self.info = policy, policy.info

    def reset_slot(self, slot: int, task: rollbench.TaskInfo, seed: int) -> None:
        pass

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[rollbench.Observation], instructions: Sequence[str]
    ) -> list[Any]:
        self.policy.batch_sizes.append(len(slots))
        return [self.policy.act(o, i) for o, i in zip(observations, instructions, strict=True)]

    def close(self) -> None:
        pass


class BatchedGreedy(Greedy):
    def __init__(self) -> None:
        super().__init__()
        self.batch_sizes: list[int] = []

    def batched(self, size: int) -> _GreedyBatch:
        return _GreedyBatch(self)


def _marked_blocks(path: Path, test: str) -> list[str]:
    """The fenced blocks of ``path`` whose marker line is ``<!-- run: TEST -->`` (as tests/test_docs_examples reads
    them)."""
    lines, found = path.read_text().split("\n"), []
    for i, line in enumerate(lines):
        if line.strip() == f"<!-- run: {test} -->" and lines[i + 1].startswith("```"):
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            found.append("\n".join(lines[i + 2 : end]))
    return found


def _episodes(result: rollbench.GradeDocument) -> list[tuple[Any, ...]]:
    return [tuple(e.to_json()[f] for f in EPISODE_FIELDS) for e in result.episodes]


def test_an_object_runs_the_episodes_the_same_policy_by_name_runs(tmp_path: Path) -> None:
    policy = Greedy()
    got = rollbench.evaluate(env="scripted/reach", policy=policy, episodes=5, seed=7, out=tmp_path / "obj")
    want = rollbench.evaluate(env="scripted/reach", policy="scripted-expert", episodes=5, seed=7, out=tmp_path / "name")
    assert _episodes(got) == _episodes(want)
    assert _episodes(rollbench.grade(tmp_path / "obj")) == _episodes(got)  # the result is the directory's
    assert got.status == "OK" and policy.closed == 0  # the caller's object is not closed


def test_run_json_names_the_class_and_the_checkpoint_id(tmp_path: Path) -> None:
    rollbench.evaluate(env="scripted/reach", policy=Greedy(), checkpoint_id="step-000200", episodes=2, out=tmp_path)
    log = json.loads((tmp_path / "run.json").read_text())
    assert log["spec"]["policy"] == "in-memory:test_in_memory_policy.Greedy@step-000200"
    assert log["plan"]["policy"]["provenance"]["in_memory"] == {
        "class": "test_in_memory_policy.Greedy",
        "checkpoint_id": "step-000200",
    }


def test_batching_uses_the_objects_batched_form_and_changes_no_episode(tmp_path: Path) -> None:
    policy = BatchedGreedy()
    one = rollbench.evaluate(env="scripted/reach", policy=Greedy(), episodes=6, out=tmp_path / "b1")
    three = rollbench.evaluate(
        env="scripted/reach",
        policy=policy,
        episodes=6,
        out=tmp_path / "b3",
        execution=rollbench.Execution(batch_size=3),
    )
    assert _episodes(three) == _episodes(one)
    assert max(policy.batch_sizes) == 3


@pytest.mark.parametrize(
    ("execution", "policy", "says"),
    [
        ({"workers": 2}, Greedy, "workers=2 would run it in other processes, and rollbench never pickles it"),
        ({"batch_size": 2}, Greedy, "without batched(size): it cannot hold 2 episodes' state at once"),
    ],
)
def test_what_an_object_cannot_do_is_refused_before_anything_is_written(
    tmp_path: Path, execution: dict[str, int], policy: type[Greedy], says: str
) -> None:
    with pytest.raises(rollbench.ConfigError, match=r"^policy in-memory:test_in_memory_policy\.Greedy is ") as err:
        rollbench.evaluate(
            env="scripted/reach",
            policy=policy(),
            episodes=2,
            out=tmp_path / "run",
            execution=rollbench.Execution(**execution),
        )
    assert says in str(err.value) and not (tmp_path / "run").exists()


def test_a_checkpoint_id_without_an_object_and_a_non_policy_are_refused(tmp_path: Path) -> None:
    with pytest.raises(rollbench.ConfigError, match="give it with policy=<the object>"):
        rollbench.evaluate(env="scripted/reach", policy="zero", checkpoint_id="x", episodes=1, out=tmp_path / "a")
    with pytest.raises(rollbench.ConfigError, match=r"got a dict, which is not a rollbench\.Policy"):
        rollbench.evaluate(env="scripted/reach", policy={"act": 1}, episodes=1, out=tmp_path / "b")


@pytest.mark.slow
def test_a_partial_run_resumes_only_with_the_object_again(tmp_path: Path) -> None:
    run = tmp_path / "run"

    class StopAfterOne(rollbench.RunObserver):
        def __init__(self) -> None:
            self.calls = iter(range(100))

        def should_stop(self) -> bool:
            return next(self.calls) >= 1

    first = rollbench.evaluate(env="scripted/reach", policy=Greedy(), episodes=4, out=run, observer=StopAfterOne())
    done = len(first.episodes)
    assert 0 < done < 4
    for trusted in ((), ("--trust-run",)):  # with or without --trust-run: the object cannot be rebuilt from a name
        cli = run_cli("eval", "--resume", str(run), *trusted)
        assert cli.returncode == 2 and "resume the run with rollbench.evaluate(policy=<the object>" in cli.stderr
        assert "would import" not in cli.stderr and len(cli.stderr.strip().splitlines()) == 1
    whole = rollbench.evaluate(env="scripted/reach", policy=Greedy(), episodes=4, out=run)
    fresh = rollbench.evaluate(env="scripted/reach", policy="scripted-expert", episodes=4, out=tmp_path / "fresh")
    assert _episodes(whole) == _episodes(fresh)


def test_documented_training_loop_example_runs_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = _marked_blocks(
        REPO / "docs" / "checkpoints.md",
        "test_in_memory_policy.py::test_documented_training_loop_example_runs_as_written",
    )
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, "docs/checkpoints.md", "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(here)
    assert capsys.readouterr().out.splitlines() == ["1000 1.0", "2000 1.0"]
    assert json.loads((tmp_path / "runs/loop/002000/run.json").read_text())["spec"]["policy"] == (
        "in-memory:__main__.Greedy@step-2000"
    )


def test_another_spec_into_an_in_memory_run_says_how_to_resume_from_python(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rollbench.evaluate(env="scripted/reach", policy=Greedy(), episodes=2, out=run)
    with pytest.raises(rollbench.ConfigError) as err:
        rollbench.evaluate(env="scripted/reach", policy=Greedy(), episodes=3, out=run)
    assert str(err.value).endswith(
        "choose another output directory (--out), or resume it with the same options "
        "(evaluate() with the same spec and policy object)"
    )
    assert "rollbench eval --resume" not in str(err.value)
