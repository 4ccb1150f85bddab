"""Runs recorded under different benchmark protocols (success hold, horizon, success rule) are never compared nor
pooled: ``compare`` (paired and ``--unpaired``), ``summarize`` and ``report`` refuse them in one line (exit 2) naming
both runs, the field and both values; the same runs under one protocol are compared and pooled, and ``summarize --by
task,model,run`` shows each run alone with its own counts. Real CLI (in process) on the scripted reach task."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate

EPISODES = 6


def _run(out: Path, policy: str = "scripted-expert", **kw: object) -> Path:
    fields: dict[str, object] = {"episodes": EPISODES, "max_steps": 30, "seed": 0, **kw}
    evaluate(out=out, env="scripted/reach", policy=policy, host_label="h", **fields)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("protocols")
    return {
        "base": _run(root / "base"),
        "zero": _run(root / "zero", "zero"),
        "hold": _run(root / "hold", success_hold=3),
        "short": _run(root / "short", max_steps=3),
        "final": _run(root / "final", success_rule="final_step"),
    }


def _recorded_successes(run_dir: Path) -> int:
    """Successes counted straight from the run's episode files (the writer's ``rollbench/success`` column)."""
    files = sorted(run_dir.glob("meta/episodes/chunk-*/*.parquet"))
    return sum(sum(pq.read_table(f, columns=["rollbench/success"]).column(0).to_pylist()) for f in files)


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    return " ".join(stderr.split())


@pytest.mark.parametrize("unpaired", [[], ["--unpaired"]], ids=["paired", "unpaired"])
def test_compare_refuses_runs_whose_success_hold_differs_naming_the_field_and_both_values(
    runs: dict[str, Path], unpaired: list[str]
) -> None:
    proc = invoke("compare", runs["base"], runs["hold"], *unpaired)
    said = _one_line(proc.stderr)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"runs {runs['base']} and {runs['hold']} ran different protocols: " in said
    assert "success hold differs (task scripted/reach: h/point/base has 1, h/point/hold has 3)" in said
    assert "better" not in proc.stdout


@pytest.mark.parametrize(
    ("other", "words"),
    [
        ("short", "horizon differs (task scripted/reach: h/point/base has 30, h/point/short has 3)"),
        (
            "final",
            "success rule differs (task scripted/reach: h/point/base has any_step, h/point/final has final_step)",
        ),
    ],
)
def test_compare_refuses_another_horizon_or_success_rule(runs: dict[str, Path], other: str, words: str) -> None:
    proc = invoke("compare", runs["base"], runs[other])
    assert proc.returncode == 2 and words in _one_line(proc.stderr)


def test_runs_under_one_protocol_are_still_compared(runs: dict[str, Path]) -> None:
    proc = invoke("compare", runs["zero"], runs["base"], "--json", "--resamples", "200")
    assert proc.returncode == 0, proc.stderr
    pooled = json.loads(proc.stdout)["comparisons"][0]["pooled"]
    assert pooled["pairs"] == EPISODES and pooled["b"]["successes"] == _recorded_successes(runs["base"])


@pytest.mark.parametrize(
    ("other", "words"),
    [
        ("hold", "success hold differs (task scripted/reach: {base} has 1, {other} has 3)"),
        ("short", "horizon differs (task scripted/reach: {base} has 30, {other} has 3)"),
        ("final", "success rule differs (task scripted/reach: {base} has any_step, {other} has final_step)"),
    ],
)
@pytest.mark.parametrize("command", ["summarize", "report"])
def test_summarize_and_report_never_pool_two_protocols_into_one_cell(
    runs: dict[str, Path], tmp_path: Path, command: str, other: str, words: str
) -> None:
    out = tmp_path / "report.html"
    proc = invoke(command, runs["base"], runs[other], *(["--out", out] if command == "report" else []))
    said = _one_line(proc.stderr)
    assert proc.returncode == 2 and not out.exists()
    assert f"runs {runs['base']} and {runs[other]} ran different protocols and are never pooled into one cell" in said
    assert words.format(base=runs["base"], other=runs[other]) in said


def test_summarize_by_run_shows_each_protocol_alone_with_its_own_counts(runs: dict[str, Path]) -> None:
    proc = invoke("summarize", runs["base"], runs["short"], "--by", "task,model,run", "--json")
    assert proc.returncode == 0, proc.stderr
    cells = {c["run"]: c for c in json.loads(proc.stdout)["cells"]}
    assert set(cells) == {"h/point/base", "h/point/short"}
    for name in ("base", "short"):
        cell = cells[f"h/point/{name}"]
        assert (cell["episodes"], cell["successes"]) == (EPISODES, _recorded_successes(runs[name]))


@pytest.mark.slow
def test_summarize_and_report_pool_runs_under_one_protocol(runs: dict[str, Path], tmp_path: Path) -> None:
    twin = _run(tmp_path / "twin", seed=EPISODES)  # the same protocol, the next seeds
    proc = invoke("summarize", runs["base"], twin, "--json")
    assert proc.returncode == 0, proc.stderr
    (cell,) = [c for c in json.loads(proc.stdout)["cells"] if c["model"] == "scripted-expert"]
    assert cell["episodes"] == 2 * EPISODES
    assert cell["successes"] == _recorded_successes(runs["base"]) + _recorded_successes(twin)
    assert invoke("report", runs["base"], twin, "--out", tmp_path / "r.html").returncode == 0
