"""Everything checkable is checked before any episode: a policy that cannot drive the task, unknown or mistyped
policy options (in process too), and ``--replan-every`` beyond the policy's action chunk (a warning, recorded in
run.json and printed). Real policies and envs; nothing is run when a check fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollbench.api import evaluate
from rollbench.cli.main import app
from rollbench.core.contracts import ConfigError


@pytest.mark.parametrize(
    ("policy", "env", "message"),
    [
        ("fetch-expert", "fetch/Push", "policy fetch-expert cannot drive fetch/Push: it drives fetch/Reach only"),
        (
            "metaworld-expert",
            "robosuite/Lift",
            "policy metaworld-expert cannot drive robosuite/Lift: it drives metaworld/* only",
        ),
        (
            "scripted-expert",
            "metaworld/reach-v3",
            "policy scripted-expert cannot drive metaworld/reach-v3: it drives scripted/* only",
        ),
    ],
)
def test_a_policy_that_cannot_drive_a_task_is_refused_before_anything_is_written(
    policy: str, env: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as err:
        evaluate(env=env, policy=policy, episodes=2, max_steps=3, out=tmp_path / "run")
    assert str(err.value) == message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("policy", "options", "message"),
    [
        ("random", {"temperature": 1.0}, "policy random takes no options; got temperature"),
        ("zero", {"chunk_size": 2}, "policy zero takes no options; got chunk_size"),
        ("fetch-expert", {"gian": 2.0}, "policy fetch-expert has no option(s) gian; its options: gain"),
        ("scripted-expert", {"chunk_size": "4"}, "policy scripted-expert: option chunk_size must be int, got '4'"),
        ("scripted-expert", {"chunk_size": True}, "policy scripted-expert: option chunk_size must be int, got True"),
        # bounded memory, also for a handed-over run.json's options (hostile round 10, F1)
        (
            "scripted-expert",
            {"chunk_size": 400_000_000},
            "policy scripted-expert: chunk_size must be between 1 and 1000, got 400000000",
        ),
        ("scripted-expert", {"chunk_size": 0}, "policy scripted-expert: chunk_size must be between 1 and 1000, got 0"),
        (
            "scripted-expert",
            {"chunk_size": -3},
            "policy scripted-expert: chunk_size must be between 1 and 1000, got -3",
        ),
        ("metaworld-expert", {"obs_map": {}}, "policy metaworld-expert takes no options; got obs_map"),
    ],
)
def test_unknown_or_mistyped_policy_options_are_refused_in_process(
    policy: str, options: dict[str, Any], message: str, tmp_path: Path
) -> None:
    env = {"fetch-expert": "fetch/Reach", "metaworld-expert": "metaworld/reach-v3"}.get(policy, "scripted/reach")
    with pytest.raises(ConfigError) as err:
        evaluate(env=env, policy=policy, policy_options=options, episodes=1, max_steps=2, out=tmp_path / "run")
    assert str(err.value) == message
    assert list(tmp_path.iterdir()) == []


def eval_cli(tmp_path: Path, *args: str) -> Any:
    return CliRunner().invoke(
        app,
        [
            "eval",
            "--env",
            "scripted/reach",
            "--episodes",
            "1",
            "--max-steps",
            "3",
            "--out",
            str(tmp_path / "run"),
            *args,
        ],
    )


def test_replan_every_beyond_the_chunk_is_a_warning_printed_and_recorded(tmp_path: Path) -> None:
    r = eval_cli(
        tmp_path, "--policy", "scripted-expert", "--policy-options", '{"chunk_size": 2}', "--replan-every", "5"
    )
    assert r.exit_code == 0, r.stderr
    warning = (
        "--replan-every 5 is larger than the action chunk of policy scripted-expert (2 actions): each chunk is "
        "executed whole and the policy is asked again every 2 steps, not every 5"
    )
    assert r.stderr.count(f"warning: {warning}") == 1  # once, not again by the progress display
    assert json.loads((tmp_path / "run/run.json").read_text())["warnings"] == [warning]


def test_replan_every_within_the_chunk_gives_no_warning(tmp_path: Path) -> None:
    r = eval_cli(
        tmp_path, "--policy", "scripted-expert", "--policy-options", '{"chunk_size": 5}', "--replan-every", "5"
    )
    assert r.exit_code == 0, r.stderr
    assert "warning" not in r.stderr
    assert json.loads((tmp_path / "run/run.json").read_text())["warnings"] == []
