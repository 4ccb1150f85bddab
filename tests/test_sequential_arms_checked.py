"""``compare --sequential`` checks a sequential record against the arms it names (issue 42, item 14): a log whose specs
name another policy, success rule or horizon, a log listing no task, one arm's decision removed, arms whose run.json
specs differ beyond the policy, and an arm B that is another policy's run with the sequential block copied over are
refused in one line (exit 2), where they used to "agree".

One real ``rollbench sequential`` (zero against the scripted expert, 6 pairs: B better at pair 6), copied per case;
every command runs in the test process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke

pytestmark = pytest.mark.slow  # one sequential comparison and an eval (tens of seconds on 2 cores)


def rb(*args: object) -> subprocess.CompletedProcess[str]:
    """``rollbench ARGS`` in this process (tests/cli_in_process.py): the refusals are about the records, not the
    process boundary."""
    return invoke(*args, env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seq") / "cmp"
    r = rb("sequential", "--env", "scripted/reach", "--delta", "0.3", "--policy-a", "zero", "--policy-b",
           "scripted-expert", "--budget", "6", "--out", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    a = json.loads((out / "a-scripted_reach" / "run.json").read_text())["sequential"]
    assert (a["decision"], a["stopped_at"]) == ("b_better", 6)
    assert rb("compare", "--sequential", out).returncode == 0
    return out


def edit(path: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


LOG = "sequential.json"
A, B = "a-scripted_reach/run.json", "b-scripted_reach/run.json"


@pytest.mark.parametrize(
    ("where", "change", "words"),
    [
        (LOG, lambda d: d["parameters"]["spec_b"].update(policy="random"),
         'is not a rollbench sequential decision log: its parameters.spec_b.policy is "random" but the arm\'s run.json '
         'records "scripted-expert"'),
        (LOG, lambda d: d["parameters"]["spec_a"].update(success_rule="any_step"),
         'its parameters.spec_a.success_rule is "any_step" but the arm\'s run.json records null'),
        (LOG, lambda d: d["parameters"]["spec_a"].update(max_steps=9),
         "its parameters.spec_a.max_steps is 9 but the arm's run.json records null"),
        (LOG, lambda d: d["parameters"].pop("spec_b"), "its parameters.spec_b is not an object"),
        (LOG, lambda d: d.update(tasks=[]), "disagrees with the run directories: it lists no entry for task scripted/reach"),
        (A, lambda d: d["sequential"].update(decision=None, stopped_at=None),
         "record different decisions (None at None, b_better at 6): one was edited or removed"),
        (B, lambda d: d["sequential"].update(decision=None, stopped_at=None),
         "record different decisions (b_better at 6, None at None): one was edited or removed"),
        (B, lambda d: d["spec"].update(success_rule="any_step"),
         "are not paired: their run.json spec.success_rule differ"),
        (B, lambda d: d["plan"]["tasks"][0].update(max_steps=7),
         "ran different protocols: horizon differs (task scripted/reach: "),
    ],
)  # fmt: skip
def test_a_sequential_record_that_does_not_match_its_arms_is_refused_in_one_line(
    compared: Path, tmp_path: Path, where: str, change: Callable[[dict[str, Any]], Any], words: str
) -> None:
    out = Path(shutil.copytree(compared, tmp_path / "cmp"))
    edit(out / where, change)
    r = rb("compare", "--sequential", out)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stderr
    assert "agrees" not in r.stdout and "Traceback" not in r.stderr


def test_arm_b_replaced_by_another_policys_run_with_the_block_copied_is_refused(compared: Path, tmp_path: Path) -> None:
    out = Path(shutil.copytree(compared, tmp_path / "cmp"))
    real = json.loads((out / B).read_text())
    spec = {**real["spec"], "policy": "random"}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    shutil.rmtree(out / "b-scripted_reach")
    assert rb("eval", "--spec", tmp_path / "spec.json", "--out", out / "b-scripted_reach").returncode in (0, 1)
    edit(out / B, lambda d: d.update(sequential=real["sequential"], run_id=real["run_id"]))
    r = rb("compare", "--sequential", out)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert (
        'its parameters.spec_b.policy is "scripted-expert" but the arm\'s run.json records "random"' in lines[0]
        or "records b_better at pair 6 but the episodes give" in lines[0]
    ), lines[0]
