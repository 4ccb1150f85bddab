"""The parts of seeding ``lerobot-eval`` and of the checkpoint-version check that need no lerobot (main suite).

The behaviour itself, against the real ``lerobot-eval`` command: tests/compat/test_lerobot_eval_exact.py (LeRobot
venv). Here: which runs :func:`rollbench.run.prepare.check_one_stream` refuses (oracle: the issue's list), the model
card row the host reads (written by hand as lerobot 0.6.1's template renders it:
``src/lerobot/templates/lerobot_modelcard_template.md``, "| LeRobot version | {{ training.lerobot_version }} |"), and
the mismatch the policy names.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from rollbench.core.contracts import ConfigError, PolicyInfo
from rollbench.core.plan import make_plan
from rollbench.core.spec import build_spec
from rollbench.policies.lerobot.policy import version_check
from rollbench.run.prepare import check_one_stream
from rollbench.run.runners import Execution

HOST_DIR = Path(__file__).resolve().parents[1] / "src" / "rollbench" / "policies" / "lerobot"
ONE = PolicyInfo(name="lerobot:x", one_stream="seeding lerobot-eval reproduces one stream")


def _host_module():
    sys.path.insert(0, str(HOST_DIR))  # host.py imports its sibling frames.py as a top-level module
    try:
        spec = importlib.util.spec_from_file_location("rollbench_lerobot_host", HOST_DIR / "host.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(HOST_DIR))


@pytest.mark.parametrize(
    ("execution", "resuming", "fields", "said"),
    [
        (Execution(workers=2), False, {}, "--workers 2 (give 1)"),
        (Execution(batch_size=3), False, {}, "--batch-size 3 (give 1)"),
        (Execution(), True, {}, "a resume (give a new --out)"),
        (Execution(), False, {"first_trial": 2}, "--first-trial 2 (its stream starts at trial 0)"),
        (Execution(), False, {"env": "scripted/reach,scripted/clock"}, "2 tasks (give one)"),
    ],
)
def test_what_would_change_the_single_stream_is_refused_naming_it(
    execution: Execution, resuming: bool, fields: dict, said: str
) -> None:
    spec = build_spec(**{"env": "scripted/reach", "policy": "zero", "episodes": 3, **fields})
    with pytest.raises(ConfigError) as err:
        check_one_stream(ONE, spec, make_plan(spec), execution, resuming)
    assert str(err.value) == f"{ONE.one_stream}, so it cannot run with {said}"


def test_one_worker_one_slot_one_task_from_trial_0_is_accepted() -> None:
    spec = build_spec(env="scripted/reach", policy="zero", episodes=3)
    check_one_stream(ONE, spec, make_plan(spec), Execution(), resuming=False)


def test_the_host_reads_the_lerobot_version_from_the_model_card(tmp_path: Path) -> None:
    host = _host_module()
    assert host.saved_by(tmp_path) is None  # no card: save_pretrained alone writes none
    card = tmp_path / "README.md"
    card.write_text("---\nlibrary_name: lerobot\n---\n| Field | Value |\n|---|---|\n| LeRobot version | 0.6.1 |\n")
    assert host.saved_by(tmp_path) == "0.6.1"
    card.write_text("# A card that names no version\n| Policy | act |\n")
    assert host.saved_by(tmp_path) is None
    card.unlink()
    (tmp_path / "elsewhere.md").write_text("| LeRobot version | 0.4.4 |\n")
    card.symlink_to(tmp_path / "elsewhere.md")
    assert host.saved_by(tmp_path) is None  # never read through a link


def test_a_version_mismatch_is_named_and_an_unknown_version_is_not_compared() -> None:
    info = {"checkpoint": {"saved_by_lerobot": "0.4.4"}, "versions": {"lerobot": "0.6.1"}}
    assert version_check(info) == {"version_mismatch": "checkpoint saved by lerobot 0.4.4, run by lerobot 0.6.1"}
    assert version_check({**info, "checkpoint": {"saved_by_lerobot": "0.6.1"}}) == {}
    assert version_check({**info, "checkpoint": {"saved_by_lerobot": None}}) == {}
