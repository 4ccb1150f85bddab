"""``rollbench checkpoints`` refuses a step whose checkpoint files were replaced after its episodes were made
(a training rerun into the same folder): exit 2, one line naming the step and what changed, OUT untouched. A copy of
the same bytes (new mtimes) resumes as before; an OUT made before the record is recorded on first sight (hostile
round 11, F6)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from checkpoint_policies import write_checkpoint
from cli_in_process import invoke

SKILLS = {1000: 0.5, 2000: 1.0}
COMMON = ["--env", "scripted/reach", "--episodes", "3", "--policy-template", "checkpoint_policies:make"]
OPTIONS = ["--policy-options", json.dumps({"checkpoint": "{path}"})]


def _evaluated(tmp_path: Path) -> tuple[Path, Path]:
    run, out = tmp_path / "train", tmp_path / "out"
    for step, skill in SKILLS.items():
        write_checkpoint(run, step, skill)
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    assert got.returncode == 0, got.stderr
    return run, out


def _snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _model(run: Path, step: int) -> Path:
    return run / "checkpoints" / f"{step:06d}" / "pretrained_model"


@pytest.mark.slow
def test_a_config_replaced_at_an_evaluated_step_is_refused_and_out_is_untouched(tmp_path: Path) -> None:
    run, out = _evaluated(tmp_path)
    before = _snapshot(out)
    (_model(run, 2000) / "config.json").write_text(json.dumps({"skill": 0.25}))  # retrained: another size
    eliminate = ["--eliminate", "--delta", "0.5", "--alpha", "0.3", "--first-look", "4"]
    for extra in ([], ["--watch", "--poll-s", "0", "--until-idle", "0"], eliminate):
        got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out, *extra)
        assert got.returncode == 2
        assert got.stderr.strip() == (
            f"error: step 2000: its checkpoint files changed since {out}/002000 was evaluated (config.json: size "
            f"{len(json.dumps({'skill': 1.0}))} -> {len(json.dumps({'skill': 0.25}))} bytes); its episodes are of the "
            f"old files: evaluate into another --out, or remove {out}/002000 to run it again"
        )
        assert _snapshot(out) == before


@pytest.mark.slow
def test_weights_rewritten_at_the_same_size_are_refused(tmp_path: Path) -> None:
    run, out = _evaluated(tmp_path)
    before = _snapshot(out)
    weights = _model(run, 1000) / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    weights.write_bytes(b"\1" * 16)  # new weights of the same shape: the same size
    os.utime(weights, ns=(mtime + 10**9, mtime + 10**9))
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out, "--json")
    assert got.returncode == 2 and got.stdout == ""
    assert "error: step 1000: its checkpoint files changed since" in got.stderr
    assert "(model.safetensors: other bytes)" in got.stderr and len(got.stderr.strip().splitlines()) == 1
    assert _snapshot(out) == before


@pytest.mark.slow
def test_the_same_bytes_with_new_mtimes_resume_as_before(tmp_path: Path) -> None:
    run, out = _evaluated(tmp_path)
    first = json.loads((out / "checkpoints.json").read_text())
    for f in _model(run, 2000).iterdir():  # a copied training folder: same bytes, other mtimes
        os.utime(f, ns=(1, 1))
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out, "--json")
    assert got.returncode == 0, got.stderr
    assert got.stderr.count("already evaluated") == 0  # --json: no progress lines
    doc = json.loads(got.stdout)
    assert [(r["step"], r["success_rate"]) for r in doc["checkpoints"]] == [
        (r["step"], r["success_rate"]) for r in first["checkpoints"]
    ]
    assert doc["checkpoints"][0]["success_rate"] == 1.0  # skill 1.0 succeeds on every episode


@pytest.mark.slow
def test_an_out_made_before_the_record_works_and_is_recorded_on_first_sight(tmp_path: Path) -> None:
    run, out = _evaluated(tmp_path)
    (out / "checkpoint_files.json").unlink()  # as an OUT written before the record existed
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    assert got.returncode == 0, got.stderr
    record = json.loads((out / "checkpoint_files.json").read_text())
    for step in SKILLS:
        folder = _model(run, step)
        files = sorted(folder.iterdir())
        assert record["steps"][str(step)] == {
            "path": str(folder),
            "files": [
                {
                    "file": f.name,
                    "size": len(f.read_bytes()),
                    "mtime_ns": f.stat().st_mtime_ns,
                    "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
                }
                for f in files
            ],
        }
    (_model(run, 1000) / "extra.bin").write_bytes(b"x")  # and now it guards that OUT
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    assert got.returncode == 2 and "step 1000: its checkpoint files changed since" in got.stderr
    assert "(extra.bin added)" in got.stderr


def test_a_damaged_record_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    write_checkpoint(run, 1000, 0.5)
    out.mkdir()
    (out / "checkpoint_files.json").write_text('{"steps": {"1000": 7}}')
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    assert got.returncode == 2
    assert got.stderr.strip() == f"error: {out}/checkpoint_files.json is damaged: 1 invalid field"
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint_files.json"]


def test_sparse_weights_are_skipped_by_name_without_reading_them(tmp_path: Path) -> None:
    """Hostile round 20 (a, F1): a 1 TiB sparse model.safetensors (``truncate -s 1T``, a few KB on disk) was hashed
    byte by byte before the first episode (hours). Now that step is skipped at once, naming the file as sparse, and
    the other checkpoint is evaluated and ranked as usual."""
    run, out = tmp_path / "train", tmp_path / "out"
    for step, skill in SKILLS.items():
        write_checkpoint(run, step, skill)
    weights = _model(run, 1000) / "model.safetensors"
    os.truncate(weights, 1 << 40)
    got = invoke("checkpoints", run, *COMMON, *OPTIONS, "--out", out)
    assert got.returncode == 0, got.stderr
    doc = json.loads((out / "checkpoints.json").read_text())
    assert [s["step"] for s in doc["skipped"]] == [1000]
    why = doc["skipped"][0]["why"]
    assert why.startswith(f"{_model(run, 1000)} cannot be read: {weights} is a sparse file (1,099,511,627,776 bytes")
    assert [r["step"] for r in doc["checkpoints"]] == [2000]
    assert not (out / "001000").exists()
