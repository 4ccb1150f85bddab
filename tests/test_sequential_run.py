"""``rollbench sequential`` and ``compare --sequential`` on the scripted family (real runs through api.evaluate): the
decision equals a hand replay of the rule from ``rollbench grade`` of both arms, each arm is an ordinary graded run
with its sequential block in run.json, a SIGKILL, a SIGTERM and resumes give the same looks and decision, a suite gets
per-task decisions and a pooled one at alpha / (m + 1) each, and damaged, edited or mismatched inputs are refused (exit 2, one
line)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rollbench.api import Execution, grade
from rollbench.core.contracts import ConfigError
from rollbench.core.runlog_model import RunLog
from rollbench.core.spec import build_spec
from rollbench.sequential.recompute import compare_sequential
from rollbench.sequential.runner import SequentialConfig, run_sequential
from sequential_support import ROLLBENCH, invoke, replay, sequential_argv

# Real sequential runs of both arms (tens of seconds each on 2 cores): outside the contributors' fast tier.
pytestmark = pytest.mark.slow


def _specs(noise_a: float = 6.0, noise_b: float = 0.0, env: str = "scripted/reach", seed: int = 0):
    a = build_spec(env=env, policy="scripted-expert", action_noise=noise_a, episodes=1, seed=seed)
    b = build_spec(env=env, policy="scripted-expert", action_noise=noise_b, episodes=1, seed=seed)
    return a, b


# Base seed of the decided comparison: with it A's failures come early (B is decided better at pair 13 instead of
# 21 with seed 0; every round of one pair is the cost, and each look grades both arms again), with concordant and
# discordant pairs mixed and the decision after both interruption points of the resume test.
SEED = 40


@pytest.fixture(scope="module")
def decided(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("seq") / "cmp"
    a, b = _specs(seed=SEED)
    return out, run_sequential(a, b, out, SequentialConfig(delta=0.2, look_every=1))


def test_b_better_is_decided_early_and_equals_a_hand_replay_of_both_graded_arms(decided):
    out, doc = decided
    (task,) = doc["tasks"]
    a_dir, b_dir = out / "a-scripted_reach", out / "b-scripted_reach"
    hand = replay(a_dir, b_dir, task["design"])
    assert hand["decision"] == "b_better"
    assert (task["decision"], task["stopped_at"]) == (hand["decision"], hand["stopped_at"])
    assert (task["looks"][-1]["b_only"], task["looks"][-1]["a_only"]) == (hand["b_only"], hand["a_only"])
    assert task["stopped_at"] < task["design"]["fixed_n"] < task["design"]["budget"]
    assert [lk["pairs"] for lk in task["looks"]] == list(range(1, task["stopped_at"] + 1))  # every pair a look
    # one worker, one pair per round: no episode beyond the deciding pair was spent
    assert task["episodes_recorded"] == {"a": task["stopped_at"], "b": task["stopped_at"]}


def test_each_arm_is_an_ordinary_run_whose_run_json_names_the_rule_and_the_deciding_look(decided):
    out, doc = decided
    task = doc["tasks"][0]
    for arm, other in (("a", "b"), ("b", "a")):
        run_dir = out / f"{arm}-scripted_reach"
        graded = grade(run_dir)
        # gradeable as any run: no violation; OK, the budget's remaining episodes were not needed (issue 40 item 5)
        assert (graded.status, graded.violations) == ("OK", [])
        left = task["design"]["budget"] - task["stopped_at"]
        assert graded.reasons == [
            f"stopped by the sequential rule at pair {task['stopped_at']}: B better ({left} planned episodes after "
            "it were not needed)"
        ]
        log = RunLog.model_validate_json((run_dir / "run.json").read_text())
        assert log.sequential is not None
        assert (log.sequential.arm, log.sequential.partner) == (arm, f"{other}-scripted_reach")
        assert log.sequential.rule == "truncated-sprt-discordant"
        assert (log.sequential.decision, log.sequential.stopped_at) == ("b_better", task["stopped_at"])
        assert log.sequential.design.model_dump() == task["design"]


def test_compare_sequential_recomputes_every_look_and_agrees_with_the_log(decided):
    out, doc = decided
    logged = json.loads((out / "sequential.json").read_text())
    r = invoke(["compare", "--sequential", str(out / "a-scripted_reach"), str(out / "b-scripted_reach"), "--json"])
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["tasks"][0]["looks"] == logged["tasks"][0]["looks"] == doc["tasks"][0]["looks"]
    assert again["log"] == {"path": str(out / "sequential.json"), "agrees": True, "up_to_date": True}


def _copy(out: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(out, dst, ignore=shutil.ignore_patterns("run.lock"))
    return dst


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("decision", "records a_better at pair"),
        ("threshold", "sequential.design.efficacy_llr is"),
        ("log", "sequential.json disagrees with the run directories on task scripted/reach at look 2"),
        ("partner", "is not an arm of rollbench sequential"),
        ("episode", "b-scripted_reach is damaged (1 violation(s) by rollbench grade: episode 3: recorded seed {s3} "),
        ("plan", "arms are not paired: trial {t133} of scripted/reach has seed {s133} in"),
    ],
)
def test_compare_sequential_refuses_edited_or_mismatched_arms_with_one_line(decided, tmp_path, damage, message):
    out = _copy(decided[0], tmp_path)
    a_json, b_json = out / "a-scripted_reach" / "run.json", out / "b-scripted_reach" / "run.json"
    if damage == "decision":
        _edit_json(a_json, lambda d: d["sequential"].update(decision="a_better"))
    elif damage == "threshold":
        _edit_json(b_json, lambda d: d["sequential"]["design"].update(efficacy_llr=1.0))
    elif damage == "log":
        _edit_json(out / "sequential.json", lambda d: d["tasks"][0]["looks"][1].update(b_only=7))
    elif damage == "partner":
        _edit_json(b_json, lambda d: d.pop("sequential"))
    elif damage == "episode":
        _edit_json(b_json, lambda d: d["plan"]["episodes"][3].update(seed=999))
    elif damage == "plan":  # a planned episode not run yet: only the pairing check sees it
        _edit_json(b_json, lambda d: d["plan"]["episodes"][133].update(seed=999))
    planned = json.loads(a_json.read_text())["plan"]["episodes"]  # the shuffled plan's trials and seeds
    message = message.format(s3=planned[3]["seed"], t133=planned[133]["trial"], s133=planned[133]["seed"])
    r = invoke(["compare", "--sequential", str(out)])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_compare_sequential_refuses_arms_of_two_different_comparisons(decided, tmp_path):
    other = tmp_path / "other"
    a, b = _specs(noise_a=3.0, seed=SEED)
    run_sequential(a, b, other, SequentialConfig(delta=0.2, look_every=5, budget=10))
    with pytest.raises(ConfigError, match=r"record different sequential\.design"):
        compare_sequential([decided[0] / "a-scripted_reach", other / "b-scripted_reach"])


def test_a_better_when_the_arms_are_swapped_and_budget_exhausted_when_it_is_small(tmp_path):
    a, b = _specs(noise_a=0.0, noise_b=6.0, seed=8)  # decided at the third look (pair 15), with seed 0 the fourth
    doc = run_sequential(a, b, tmp_path / "swap", SequentialConfig(delta=0.2, look_every=5))
    assert doc["tasks"][0]["decision"] == "a_better"
    assert doc["tasks"][0]["stopped_at"] % 5 == 0  # looks only every 5 pairs
    small = run_sequential(a, b, tmp_path / "small", SequentialConfig(delta=0.2, look_every=2, budget=3))
    assert [lk["pairs"] for lk in small["tasks"][0]["looks"]] == [2, 3]  # the budget is always a look
    assert small["tasks"][0]["decision"] == "budget_exhausted"


def test_resuming_with_other_parameters_is_refused_before_anything_runs(decided):
    out, _ = decided
    a, b = _specs(seed=SEED)
    before = (out / "sequential.json").read_bytes()
    with pytest.raises(ConfigError, match="holds a sequential comparison with other parameters \\(delta"):
        run_sequential(a, b, out, SequentialConfig(delta=0.25))
    assert (out / "sequential.json").read_bytes() == before


def test_a_comparison_killed_before_its_first_log_is_resumed_by_the_same_call(decided, tmp_path):
    """Hostile round 17 (b, F1): a SIGKILL before the first look left ``out`` with arm directories and no
    sequential.json, which the same command refused ("holds no sequential.json"). Only this comparison's arm
    directories: resumed, to the looks and decision of the uninterrupted run; anything else beside them: refused."""
    out = tmp_path / "killed"
    shutil.copytree(decided[0], out)
    (out / "sequential.json").unlink()
    whole = decided[1]["tasks"][0]
    a, b = _specs(seed=SEED)
    resumed = run_sequential(a, b, out, SequentialConfig(delta=0.2, look_every=1))["tasks"][0]
    assert (resumed["looks"], resumed["decision"]) == (whole["looks"], whole["decision"])
    (out / "sequential.json").unlink()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"exists and holds no sequential\.json; choose another --out"):
        run_sequential(a, b, out, SequentialConfig(delta=0.2, look_every=1))


def _interrupt(out: Path, sig: int, at_pair: int) -> int:
    """Start (or resume) the command, send ``sig`` to its process group once pair ``at_pair`` is logged, mid-round
    (the next episodes are being run or committed), and return the exit status."""
    proc = subprocess.Popen(sequential_argv(out, "--seed", str(SEED)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if f"pair {at_pair}:" in line:
            break
    time.sleep(0.3)
    os.killpg(proc.pid, sig)
    proc.wait(timeout=60)
    return proc.returncode


def test_sigkill_then_sigterm_then_resume_reach_the_same_looks_and_decision(decided, tmp_path):
    """Both interruptions on one comparison (they reach different code: a SIGKILL leaves a RUNNING arm with a stale
    lock and whatever was mid-commit; a SIGTERM is caught, the arm is marked INTERRUPTED and the process exits 143):
    SIGKILL once pair 4 is logged, resume, SIGTERM that resumed process once pair 8 is logged, resume to the end.
    After the SIGTERM the decision log already holds the looks of the uninterrupted run up to where it stopped (the
    SIGKILL's resume was exact); the final looks and decision are those of the uninterrupted run."""
    out = tmp_path / "cut"
    whole = decided[1]["tasks"][0]
    assert whole["stopped_at"] > 9  # both interruptions happen before the decision
    assert _interrupt(out, signal.SIGKILL, 4) == -signal.SIGKILL
    assert _interrupt(out, signal.SIGTERM, 8) == 143
    partial = json.loads((out / "sequential.json").read_text())["tasks"][0]
    assert len(partial["looks"]) >= 8 and partial["looks"] == whole["looks"][: len(partial["looks"])]
    r = invoke(sequential_argv(out, "--seed", str(SEED), "--json")[len(ROLLBENCH) :])  # the last resume: no signal
    assert r.returncode == 0, r.stderr
    resumed = json.loads(r.stdout)["tasks"][0]
    assert resumed["looks"] == whole["looks"]
    assert (resumed["decision"], resumed["stopped_at"]) == (whole["decision"], whole["stopped_at"])


def test_workers_and_batches_give_the_decision_of_one_worker(decided, tmp_path):
    a, b = _specs(seed=SEED)
    doc = run_sequential(
        a, b, tmp_path / "w", SequentialConfig(delta=0.2, execution=Execution(workers=2, batch_size=2))
    )
    whole = decided[1]["tasks"][0]
    got = doc["tasks"][0]
    assert got["looks"] == whole["looks"] and got["decision"] == whole["decision"]
    assert got["episodes_recorded"]["a"] >= got["stopped_at"]  # in-flight episodes beyond it are kept, not counted


def test_a_suite_gets_per_task_and_pooled_decisions_at_alpha_over_m_plus_one(tmp_path):
    a, b = _specs(env="scripted/all")
    doc = run_sequential(a, b, tmp_path / "suite", SequentialConfig(delta=0.2, look_every=5))
    assert doc["family"] == ["scripted/reach", "scripted/reach-final"]
    assert doc["correction"] == "bonferroni-tasks-and-pooled"
    for t in doc["tasks"]:
        assert t["design"]["alpha"] == pytest.approx(0.05 / 3)
        assert t["design"]["type1_error"] <= 0.05 / 3
        hand = replay(Path(t["a"]), Path(t["b"]), t["design"])
        assert (t["decision"], t["stopped_at"]) == (hand["decision"], hand["stopped_at"])
        assert t["episodes_recorded"]["a"] == t["stopped_at"]  # a decided task spent no more episodes
    pooled = doc["pooled"]
    assert pooled["design"]["alpha"] == pytest.approx(0.05 / 3) and pooled["complete"]
    counted = sum(t["stopped_at"] for t in doc["tasks"])
    assert pooled["looks"][-1]["pairs"] <= counted
    assert compare_sequential([tmp_path / "suite"])["pooled"] == pooled
