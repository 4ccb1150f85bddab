"""A checkpoint whose policy cannot be built (a crashed save: config.json not JSON) is skipped with one warning
line, named under ``skipped`` in the ranking, and the others are evaluated and ranked, under ``--watch`` and in the
one-shot command; only when every checkpoint is skipped is it exit 2 (hostile round 11, F7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_policies import expected_success, write_checkpoint
from cli_in_process import invoke
from rollbench.checkpoints.runner import Settings
from rollbench.checkpoints.watch import Polling, watch
from rollbench.run.runners import Execution

N = 4
COMMON = ["--env", "scripted/reach", "--episodes", str(N), "--policy-template", "checkpoint_policies:make"]
OPTIONS = ["--policy-options", json.dumps({"checkpoint": "{path}"})]
SETTINGS = Settings({"env": "scripted/reach", "episodes": N, "policy_options": {"checkpoint": "{path}"}},
                    "checkpoint_policies:make")  # fmt: skip


def _rate(skill: float) -> float:
    return sum(expected_success(skill, s) for s in range(N)) / N


def _why_not_json() -> str:
    """The message rollbench gives for a factory raising json's error on ``not json`` (the error taken from json
    itself, not from rollbench)."""
    try:
        json.loads("not json")
    except json.JSONDecodeError as exc:
        error = exc
    return (
        f"policy 'checkpoint_policies:make' could not be built: its factory or its info raised JSONDecodeError: {error}"
    )


def _bad_between_good(run: Path) -> Path:
    write_checkpoint(run, 1000, 0.5)
    bad = write_checkpoint(run, 2000, 0.5)
    (bad / "config.json").write_text("not json")  # a crashed save
    write_checkpoint(run, 3000, 1.0)
    return bad


def test_watch_skips_a_bad_checkpoint_ranks_the_others_and_retries_it_once_rewritten(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    bad = _bad_between_good(run)
    polls: list[list[int]] = []

    def sleep(_: float) -> None:
        doc = json.loads((out / "checkpoints.json").read_text()) if (out / "checkpoints.json").exists() else {}
        polls.append([s["step"] for s in doc.get("skipped", [])])
        if len(polls) == 3:  # training saves step 2000 again, whole this time
            (bad / "config.json").write_text(json.dumps({"skill": 0.5}))

    clock = iter(float(t) for t in range(1000))
    polling = Polling(poll_s=0, max_checkpoints=3, until_idle_s=50)
    doc = watch(run, out, SETTINGS, Execution(), polling, sleep=sleep, clock=lambda: next(clock))
    assert polls[1:3] == [[2000], [2000]]  # poll 1 sees them new; poll 2 evaluates 1000, 3000 and skips 2000
    rows = sorted((r["step"], r["success_rate"]) for r in doc["checkpoints"])
    assert rows == [(1000, _rate(0.5)), (2000, _rate(0.5)), (3000, 1.0)] and "skipped" not in doc


def test_watch_ends_with_the_bad_checkpoint_named_as_skipped(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    _bad_between_good(run)
    clock = iter(float(t) for t in range(1000))
    polling = Polling(poll_s=0, until_idle_s=5)
    doc = watch(run, out, SETTINGS, Execution(), polling, sleep=lambda _: None, clock=lambda: next(clock))
    assert sorted((r["step"], r["success_rate"]) for r in doc["checkpoints"]) == [(1000, _rate(0.5)), (3000, 1.0)]
    assert doc["skipped"] == [{"step": 2000, "why": _why_not_json()}]
    assert json.loads((out / "checkpoints.json").read_text())["skipped"] == doc["skipped"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["001000", "003000"]


@pytest.mark.slow
def test_the_watch_command_warns_once_goes_on_and_prints_the_ranking(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    _bad_between_good(run)
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out, "--watch", "--poll-s", "0.05",
                 "--until-idle", "2", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert got.stderr.splitlines() == [f"skipped step 2000: {_why_not_json()}"]
    doc = json.loads(got.stdout)
    assert sorted(r["step"] for r in doc["checkpoints"]) == [1000, 3000]
    assert doc["skipped"] == [{"step": 2000, "why": _why_not_json()}]


@pytest.mark.slow
def test_the_one_shot_command_skips_it_too_and_names_it_with_the_incomplete_ones(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    _bad_between_good(run)
    (write_checkpoint(run, 4000, 0.5) / "model.safetensors").unlink()  # incomplete
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    assert got.returncode == 0, got.stderr
    incomplete = f"{run}/checkpoints/004000/pretrained_model lacks config.json or model.safetensors"
    assert f"skipped step 4000: {incomplete}" in got.stderr
    assert f"skipped step 2000: {_why_not_json()}" in got.stderr
    assert f"not evaluated: step 2000: {_why_not_json()}" in got.stdout
    doc = json.loads((out / "checkpoints.json").read_text())
    assert [(r["step"], r["success_rate"]) for r in doc["checkpoints"]] == [(3000, 1.0), (1000, _rate(0.5))]
    assert doc["skipped"] == [{"step": 2000, "why": _why_not_json()}, {"step": 4000, "why": incomplete}]


def test_every_checkpoint_skipped_is_exit_2_naming_the_first(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    for step in (1000, 2000):
        (write_checkpoint(run, step, 0.5) / "config.json").write_text("not json")
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out, "--json")  # --json: no progress lines
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.splitlines() == [
        f"skipped step 1000: {_why_not_json()}",
        f"skipped step 2000: {_why_not_json()}",
        f"error: no checkpoint could be evaluated (2 skipped); step 1000: {_why_not_json()}",
    ]
    assert not (out / "checkpoints.json").exists()


def test_a_second_command_on_a_folder_being_written_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """Hostile round 17 (b, F4): two ``checkpoints`` on one --out each rewrote checkpoints.json from what it alone
    saw, dropping the other's evaluated step. The folder is locked for a command's whole work: another process's
    lock (a DirLock on the folder, as a running command holds it) makes the second exit 2 before anything runs."""
    from rollbench.record.locks import DirLock

    run, out = tmp_path / "train", tmp_path / "out"
    write_checkpoint(run, 1000, 0.5)
    out.mkdir()
    other = DirLock(out)
    other.acquire()  # a separate open file description: flock refuses this process's own second lock too
    try:
        got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    finally:
        other.release()
    assert got.returncode == 2
    assert got.stderr.splitlines() == [
        f"error: {out} is being written by another rollbench checkpoints process; wait for it to end, or choose "
        "another --out"
    ]
    assert list(out.iterdir()) == []
    assert invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out).returncode == 0  # free again: it runs
