"""A decided sequential study's records under a re-run and under an edited trial population (hostile round 20, b).

F1: re-running the command of a decided study used to write ``decision: null`` into both arms' run.json (regraded
PARTIAL) and write the decision back only after the recompute: a kill in between left a decided study PARTIAL with
no decision. Now a recorded decision is never rewritten before the recompute; a crash in that window leaves both
arms' bytes as they were.

F2: ``plan.trial_order.populations`` (``[first, end)`` per task) was unbounded: ``[55, 0]`` gave StopIteration,
``[0, 10**12]`` a numpy MemoryError after GBs, in ``compare --sequential``, ``report`` and the resume (which first
wiped the unedited arm's decision). Now run.json's model refuses it in one line, before anything is written.

One real ``rollbench sequential`` (zero against the scripted expert, its design's
budget of 55 pairs: B better at pair 8), copied per case.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from rollbench.api import grade

pytestmark = pytest.mark.slow  # one sequential comparison (seconds), then copies of it

A, B = "a-scripted_reach", "b-scripted_reach"
STUDY = ("sequential", "--env", "scripted/reach", "--delta", "0.3", "--policy-a", "zero", "--policy-b",
         "scripted-expert")  # fmt: skip


def rb(*args: object) -> subprocess.CompletedProcess[str]:
    return invoke(*args, env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seq") / "cmp"
    r = rb(*STUDY, "--out", out)
    assert r.returncode == 0, r.stderr
    for arm in (A, B):
        doc = json.loads((out / arm / "run.json").read_text())
        assert (doc["status"], doc["sequential"]["decision"], doc["sequential"]["stopped_at"]) == ("OK", "b_better", 8)
    return out


def copy(decided: Path, tmp_path: Path) -> Path:
    out = tmp_path / "cmp"
    shutil.copytree(decided, out, symlinks=True)
    return out


def arm_bytes(out: Path) -> dict[str, bytes]:
    return {arm: (out / arm / "run.json").read_bytes() for arm in (A, B)}


def edit(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


# ---- F1 -----------------------------------------------------------------------------------------------------------


def test_a_rerun_of_a_decided_study_that_dies_in_its_recompute_leaves_both_arms_bytes_and_grades_unchanged(
    decided: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = copy(decided, tmp_path)
    before = arm_bytes(out)
    calls = []

    def dies(*args: object, **kwargs: object) -> None:  # a kill -9 / crash in the recompute's window
        calls.append(args)
        raise KeyboardInterrupt

    monkeypatch.setattr("rollbench.sequential.runner.compare_sequential", dies)
    r = rb(*STUDY, "--out", out)
    assert calls and r.returncode != 0  # the runner started and died where the old one had erased the decisions
    assert arm_bytes(out) == before
    for arm in (A, B):
        assert grade(out / arm, check_videos=False).status == "OK"


def test_a_rerun_of_a_decided_study_writes_nothing_and_keeps_its_decision(decided: Path, tmp_path: Path) -> None:
    out = copy(decided, tmp_path)
    before = arm_bytes(out)
    r = rb(*STUDY, "--out", out)
    assert r.returncode == 0, r.stderr
    assert arm_bytes(out) == before


def test_a_study_stopped_between_its_two_arms_decision_writes_resumes_to_both_decided(
    decided: Path, tmp_path: Path
) -> None:
    out = copy(decided, tmp_path)
    edit(out / B / "run.json", lambda d: d["sequential"].update(decision=None, stopped_at=None))  # B not yet written
    assert "one was edited or removed" in rb("compare", "--sequential", out).stderr  # a reader still says so
    a_before = (out / A / "run.json").read_bytes()
    r = rb(*STUDY, "--out", out)
    assert r.returncode == 0, r.stderr
    assert (out / A / "run.json").read_bytes() == a_before  # the decided arm is not rewritten
    b = json.loads((out / B / "run.json").read_text())
    assert (b["sequential"]["decision"], b["sequential"]["stopped_at"]) == ("b_better", 8)
    assert len(grade(out / B, check_videos=False).episodes) == 8  # no episode more
    assert rb("compare", "--sequential", out).returncode == 0


def test_a_resume_refuses_an_edited_recorded_decision_and_writes_nothing(decided: Path, tmp_path: Path) -> None:
    out = copy(decided, tmp_path)
    edit(out / A / "run.json", lambda d: d["sequential"].update(decision="a_better"))
    before = arm_bytes(out)
    r = rb(*STUDY, "--out", out)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"error: {out}/{A}/run.json records a_better at pair 8 but the episodes give b_better at pair 8 (edited or "
        "damaged)"
    )
    assert arm_bytes(out) == before


# ---- F2 -----------------------------------------------------------------------------------------------------------

BAD_POPULATIONS = [[55, 0], [2**63, 55], [0, 10**12], [1], [0, 1, 2], ["0", 55], [0.0, 55], [True, 55], None, {}]


def refusal(out: Path, value: Any) -> str:
    return (
        f"error: {out}/{A}/run.json is not a rollbench run log: plan.trial_order.populations.scripted/reach: is "
        f"{value!r}: not a population [first, end) of trials (two integers, 0 <= first <= 100,000, first <= end <= "
        "first + 200,000)"
    )


def set_population(out: Path, value: Any) -> None:
    edit(out / A / "run.json", lambda d: d["plan"]["trial_order"]["populations"].update({"scripted/reach": value}))


@pytest.mark.parametrize("value", BAD_POPULATIONS, ids=repr)
def test_a_damaged_trial_population_is_one_line_in_compare_report_and_the_resume_with_nothing_written(
    decided: Path, tmp_path: Path, value: Any
) -> None:
    from rollbench.dashboard.service import sequential_of

    out = copy(decided, tmp_path)
    set_population(out, value)
    before = arm_bytes(out)
    for args in (
        ("compare", "--sequential", out),
        ("report", out, "--out", tmp_path / "r.html"),
        (*STUDY, "--out", out),
    ):
        r = rb(*args)
        assert (r.returncode, r.stderr.strip()) == (2, refusal(out, value)), args
    assert arm_bytes(out) == before
    assert not (tmp_path / "r.html").exists()
    assert sequential_of(out / B, A) == {"error": refusal(out, value).removeprefix("error: ")}  # the dashboard's
    assert grade(out / B, check_videos=False).status == "OK"


def test_a_population_too_small_for_the_planned_trials_is_named_as_edited(decided: Path, tmp_path: Path) -> None:
    out = copy(decided, tmp_path)
    set_population(out, [0, 1])  # inside the bounds, but one trial for 55 planned
    before = arm_bytes(out)
    want = (
        f"error: {out}/{A}/run.json: plan.trial_order.populations['scripted/reach'] holds 1 trial(s) [0, 1), fewer "
        "than the 55 planned from it (edited)"
    )
    for args in (("compare", "--sequential", out), (*STUDY, "--out", out)):
        r = rb(*args)
        assert (r.returncode, r.stderr.strip()) == (2, want), args
    assert arm_bytes(out) == before


def _two_gib() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_a_trillion_trial_population_is_refused_within_two_gib_of_address_space(decided: Path, tmp_path: Path) -> None:
    out = copy(decided, tmp_path)
    set_population(out, [0, 10**12])
    r = subprocess.run(
        [sys.executable, "-m", "rollbench", "compare", "--sequential", str(out)],
        capture_output=True, text=True, timeout=120, preexec_fn=_two_gib, check=False,
    )  # fmt: skip
    assert (r.returncode, r.stderr.strip()) == (2, refusal(out, [0, 10**12]))
