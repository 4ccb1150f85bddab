"""run.json is read within a stated bound (hostile round 15, F7): a run.json with a hole (``truncate -s``) or over
:data:`~rollbench.record.runlog.MAX_RUN_JSON_BYTES` is named as damaged without being read, a new run never plans a
run.json past the bound (and a plan over :data:`~rollbench.core.plan_size.MAX_PLANNED_EPISODES` is refused from its
size before it is built: hostile round 16, F4), and the dashboard's catalog remembers an unreadable run by its
signature so a listing does not read it again until its files change.

Oracles: the sizes the test gives the files, hand-written refusal lines and counts, a count of the catalog's reads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.record import runlog


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bounds") / "A"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=5)
    return out


def _holey(run: Path, root: Path, name: str, size: int) -> Path:
    """A copy of ``run`` whose run.json is extended to ``size`` bytes by a hole (nothing written past the JSON)."""
    copy = root / name
    shutil.copytree(run, copy)
    os.truncate(copy / "run.json", size)
    return copy


def test_a_run_json_with_a_hole_is_named_sparse_and_not_read(run: Path, tmp_path: Path) -> None:
    sound = (run / "run.json").stat().st_size
    bad = _holey(run, tmp_path, "S", 100 << 20)
    fd = os.open(bad / "run.json", os.O_RDONLY)
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)  # the end of the block holding the JSON's last byte
    finally:
        os.close(fd)
    if hole >= 100 << 20:
        pytest.skip("this file system reports no holes")
    assert sound <= hole < sound + 65536
    proc = invoke("grade", bad)
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"error: {bad / 'run.json'} is not a rollbench run log: {bad / 'run.json'} is a sparse file "
        f"(104,857,600 bytes, "
    )
    assert proc.stderr.strip().endswith(f"of them on disk, a hole at byte {hole:,}); not read")


def test_a_run_json_over_the_bound_is_named_without_being_read(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = (run / "run.json").stat().st_size
    monkeypatch.setattr(runlog, "MAX_RUN_JSON_BYTES", size - 1)
    proc = invoke("grade", run)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {run / 'run.json'} is not a rollbench run log: {run / 'run.json'} is {size:,} bytes, over the "
        f"{size - 1:,} rollbench reads; not read"
    )


def test_the_bound_holds_three_times_the_largest_plan_of_one_task() -> None:
    from rollbench.core.spec import MAX_EPISODES_PER_TASK

    measured_bytes_per_planned_episode = 870  # plan 294 + results 507 (+ a share of the rest), scripted/reach
    assert 3 * MAX_EPISODES_PER_TASK * measured_bytes_per_planned_episode <= runlog.MAX_RUN_JSON_BYTES
    assert runlog.MAX_PLAN_BYTES * 4 == runlog.MAX_RUN_JSON_BYTES


def test_a_new_run_planning_past_the_bound_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runlog, "MAX_PLAN_BYTES", 10_000)  # ~290 bytes per planned episode of scripted/reach
    proc = invoke("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "40", "--out", tmp_path / "R")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: the plan of 40 episodes would take ")
    assert proc.stderr.strip().endswith(
        "bytes of run.json, over the 10,000 a run may plan (run.json is read up to 268,435,456 bytes with its "
        "results); split it into several runs (fewer tasks, episodes or instruction variants each)"
    )
    assert not (tmp_path / "R" / "run.json").exists()
    small = invoke("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "20", "--max-steps", "2",
                   "--out", tmp_path / "Q")  # fmt: skip
    assert small.returncode == 0, small.stderr
    assert len(json.loads((tmp_path / "Q" / "run.json").read_text())["plan"]["episodes"]) == 20


def _ten_variants(root: Path) -> Path:
    path = root / "ten.txt"
    path.write_text("".join(f"variant {i}\n" for i in range(1, 11)))
    return path


def test_a_plan_over_the_episode_bound_is_refused_from_its_size_before_an_episode_is_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile round 16, F4: 2 tasks x 100,000 episodes x 10 instructions (each within its own limit) grew to 8 GB
    building the plan before the plan-bytes check refused it; the count is refused before anything is built."""
    from rollbench.core import plan as plan_module

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the plan was built")

    monkeypatch.setattr(plan_module, "PlannedEpisode", never)
    monkeypatch.setattr(plan_module, "plan_populations", never)
    proc = invoke("eval", "--env", "scripted/reach,scripted/reach-final", "--policy", "zero", "--episodes", "100000",
                  "--instructions", _ten_variants(tmp_path), "--out", tmp_path / "B")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "error: the plan of 2,000,000 episodes (2 tasks x 100,000 episodes x 10 instruction variants) is over the "
        "200,000 a run may plan (run.json records every planned episode and is read whole); split it into several "
        "runs (fewer tasks, episodes or instruction variants each)"
    )
    assert not (tmp_path / "B").exists()
    proc = invoke("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "100000",
                  "--instruction-perturb", "paraphrase,synonym", "--out", tmp_path / "B")  # fmt: skip
    assert proc.stderr.strip().startswith(
        "error: the plan of 300,000 episodes (1 task x 100,000 episodes x 3 instruction variants) is over the "
    )
    assert not (tmp_path / "B").exists()


def test_a_plan_of_exactly_the_episode_bound_is_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollbench.core import plan_size

    monkeypatch.setattr(plan_size, "MAX_PLANNED_EPISODES", 6)
    args = ("eval", "--env", "scripted/reach,scripted/reach-final", "--policy", "zero", "--max-steps", "1")
    over = invoke(*args, "--episodes", "4", "--out", tmp_path / "O")
    assert over.returncode == 2
    assert over.stderr.startswith("error: the plan of 8 episodes (2 tasks x 4 episodes) is over the 6 a run may plan")
    at = invoke(*args, "--episodes", "3", "--out", tmp_path / "A")
    assert at.returncode == 0, at.stderr
    assert len(json.loads((tmp_path / "A" / "run.json").read_text())["plan"]["episodes"]) == 6


def test_a_plan_under_the_episode_bound_stays_under_the_plan_bytes_bound(tmp_path: Path) -> None:
    """Measured: the bytes one more planned episode adds to run.json's plan (two tasks, a ten-line sweep), times the
    episode bound, fit in the bytes a run may plan."""
    from rollbench.core.plan_size import MAX_PLANNED_EPISODES
    from rollbench.record.files import json_bytes

    proc = invoke("eval", "--env", "scripted/reach,scripted/reach-final", "--policy", "zero", "--episodes", "5",
                  "--max-steps", "1", "--instructions", _ten_variants(tmp_path), "--out", tmp_path / "M")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((tmp_path / "M" / "run.json").read_text())["plan"]
    assert len(plan["episodes"]) == 100
    per_episode = (len(json_bytes(plan)) - len(json_bytes({**plan, "episodes": []}))) / 100
    assert 250 < per_episode < 330  # ~300: the measured 294 of docs/design.md plus a variant's name
    assert MAX_PLANNED_EPISODES * per_episode <= runlog.MAX_PLAN_BYTES


def test_running_out_of_memory_while_planning_ends_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollbench.core import plan as plan_module
    from rollbench.run import prepare

    def no_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    args = ("eval", "--env", "scripted/reach,scripted/reach-final", "--policy", "zero", "--episodes", "3")
    with monkeypatch.context() as m:
        m.setattr(plan_module, "PlannedEpisode", no_memory)
        proc = invoke(*args, "--out", tmp_path / "P")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: out of memory while planning the run (3 episodes of each task and instruction variant); split it "
        "into several runs (fewer tasks, episodes or instruction variants each) or free memory"
    )
    monkeypatch.setattr(prepare, "check_plan_bytes", no_memory)
    proc = invoke(*args, "--out", tmp_path / "Q")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: out of memory while planning the run (6 planned episodes); split")
    assert not (tmp_path / "P").exists() and not (tmp_path / "Q").exists()


def test_the_catalog_names_an_unreadable_run_on_every_listing_but_reads_it_once_per_change(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.dashboard import catalog as catalog_module

    shutil.copytree(run, tmp_path / "A")
    bad = _holey(run, tmp_path, "S", 50 << 20)
    reads: list[Path] = []
    real_read_run = catalog_module.read_run

    def counting(run_dir: Path) -> catalog_module.RunRecord:
        reads.append(run_dir)
        return real_read_run(run_dir)

    monkeypatch.setattr(catalog_module, "read_run", counting)
    cat = catalog_module.Catalog([tmp_path], sync_budget_s=600)
    for _ in range(3):
        records, pending = cat.records()
        assert [r.run_dir.name for r in records] == ["A"] and pending == []
        [error] = cat.errors
        assert error.startswith(f"{bad.resolve()}: cannot read the run (ConfigError: ")
    assert sorted(p.name for p in reads) == ["A", "S"]  # each read once in three listings
    (bad / "run.json").write_text("{}")  # its files change: read again
    cat.records()
    assert sorted(p.name for p in reads) == ["A", "S", "S"]
