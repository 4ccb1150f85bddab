"""``rollbench report`` on a ``rollbench checkpoints`` OUT folder: the "Checkpoints" section's ranking, figure and
verdict, recomputed from the run directories; a checkpoints.json that disagrees with them is a violation.

Oracle: ``checkpoint_policies.expected_success`` says in advance which planned episode each checkpoint wins (seeds
0..N-1 in plan order), so rates and discordant pairs are hand counts; intervals come from statsmodels' Wilson
interval, p-values from scipy's binomtest and statsmodels' Holm, directly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from checkpoint_policies import expected_success, write_checkpoint
from checkpoints_html import assert_no_generic_statistics, checkpoints_section, html_report, table_rows
from cli_in_process import invoke

SKILLS = {1000: 0.3, 2000: 0.9, 3000: 0.6}
N = 12
ARGS = ["--env", "scripted/reach", "--policy-template", "checkpoint_policies:make"]
OPTIONS = ["--policy-options", json.dumps({"checkpoint": "{path}"})]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ckpt")
    for step, skill in SKILLS.items():
        write_checkpoint(root / "train", step, skill)
    got = invoke("checkpoints", root / "train", *ARGS, *OPTIONS, "--episodes", N, "--out", root / "out")
    assert got.returncode == 0, got.stderr
    return root / "out"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


@pytest.mark.slow
def test_report_shows_the_ranking_figure_and_verdict_of_a_checkpoints_folder(out: Path, tmp_path: Path) -> None:
    section = checkpoints_section(html_report(tmp_path, out.parent))  # a folder holding the OUT folder
    wins = {s: [expected_success(k, seed) for seed in range(N)] for s, k in SKILLS.items()}
    rate = {s: sum(w) / N for s, w in wins.items()}
    order = sorted(SKILLS, key=lambda s: (-rate[s], s))
    best = order[0]
    raw = []
    for s in order[1:]:
        b_only = sum(x and not y for x, y in zip(wins[best], wins[s], strict=True))
        s_only = sum(y and not x for x, y in zip(wins[best], wins[s], strict=True))
        raw.append(binomtest(s_only, b_only + s_only, 0.5).pvalue if b_only + s_only else 1.0)
    holm = dict(zip(order[1:], multipletests(raw, method="holm")[1], strict=True))
    expected = []
    for s in order:
        lo, hi = proportion_confint(sum(wins[s]), N, method="wilson")
        row = [str(s), "OK", _pct(rate[s]), f"{_pct(lo)} – {_pct(hi)}", f"{N}/{N}"]
        if s == best:
            row += ["best", "—", "—"]
        else:
            p = holm[s]
            shown = f"{p:.3g}" if p >= 0.001 else f"{p:.1e}"
            row += [f"{100 * (rate[s] - rate[best]):+.1f}", shown + (" worse" if p <= 0.05 else ""), str(N)]
        expected.append(row)
    assert table_rows(section) == expected
    # by hand: step 2000 wins 12 of 12, 3000 wins 6, 1000 wins 4; both others worse at Holm alpha 0.05
    assert [r[2] for r in expected] == ["100.0%", "50.0%", "33.3%"]
    assert "<strong>Verdict:</strong> step 2000: best: better than every other checkpoint" in section
    assert f"3 checkpoints on the same planned episodes; {3 * N} episodes attempted, {3 * N} scored" in section
    assert "Holm-corrected over the 2 comparisons at alpha 0.05" in section
    assert section.count('src="data:image/png;base64,') == 1
    assert "Violation" not in section


@pytest.mark.slow
def test_a_checkpoints_json_that_disagrees_with_the_runs_is_a_violation(out: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited"
    import shutil

    shutil.copytree(out, edited)
    doc = json.loads((edited / "checkpoints.json").read_text())
    row = next(r for r in doc["checkpoints"] if r["step"] == 3000)
    row["success_rate"] = 0.75  # the runs give 6 of 12
    (edited / "checkpoints.json").write_text(json.dumps(doc))
    got = invoke("report", edited, "--out", tmp_path / "r.html")
    assert got.returncode == 0, got.stderr
    html = (tmp_path / "r.html").read_text()
    section = checkpoints_section(html)
    said = f"{edited / 'checkpoints.json'}: step 3000 success_rate 0.75 differs from its run directory's 0.5"
    assert f"<strong>Violation:</strong> {said.replace(chr(39), '&#39;')}" in section
    assert f"<strong>Warning:</strong> {edited}: {said.replace(chr(39), '&#39;')}" in html  # also at the top
    assert f"warning: {edited}: {said}" in " ".join(got.stderr.split())  # and on stderr (wrapped at any width)
    assert table_rows(section)[1][:3] == ["3000", "OK", "50.0%"]  # the table shows the recomputed numbers


def test_a_damaged_checkpoints_json_is_named_and_nothing_is_ranked(out: Path, tmp_path: Path) -> None:
    import shutil

    edited = tmp_path / "damaged"
    shutil.copytree(out, edited)
    (edited / "checkpoints.json").write_text('{"alpha": 0.05}')
    section = checkpoints_section(html_report(tmp_path, edited))
    assert f"<strong>Violation:</strong> {edited / 'checkpoints.json'} is damaged: rule: Field required" in section
    assert "<strong>Verdict:</strong>" not in section and "<th>step</th>" not in section


@pytest.mark.slow
def test_checkpoint_runs_are_reported_in_the_checkpoints_section_only(out: Path, tmp_path: Path) -> None:
    html = html_report(tmp_path, out)
    assert_no_generic_statistics(html)
    runs = html[html.index("<h2>Runs</h2>") : html.index("<h2>Checkpoints</h2>")]
    assert [f"{step:06d}" for step in SKILLS] == re.findall(r"<td>[^<]*/(\d{6})</td>", runs)  # the run list stays


@pytest.mark.slow
def test_plain_runs_beside_a_checkpoints_folder_are_pooled_and_compared_without_the_checkpoints(
    out: Path, tmp_path: Path
) -> None:
    for name, skill in (("low", 0.2), ("high", 0.8)):
        folder = write_checkpoint(tmp_path / name, 1, skill, lerobot_layout=False)
        options = ["--policy-options", json.dumps({"checkpoint": str(folder)})]
        got = invoke("eval", "--env", "scripted/reach", "--policy", "checkpoint_policies:make", *options,
                     "--episodes", N, "--out", tmp_path / "plain" / name)  # fmt: skip
        assert got.returncode == 0, got.stderr
    html = html_report(tmp_path, out, tmp_path / "plain")
    cells = html[html.index("<h2>Success rate per task</h2>") : html.index("<h2>Checkpoints</h2>")]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", cells)]
    wins = sum(expected_success(k, seed) for k in (0.2, 0.8) for seed in range(N))
    assert [(r[4], r[8]) for r in rows if r] == [(str(2 * N), str(wins))]  # the two plain runs only
    keys = re.findall(r"Reported under Checkpoints instead \(not pooled here\): ([^<]*)\.</p>", cells)
    assert len(keys) == 1 and [k.rsplit("/", 1)[1] for k in keys[0].split(", ")] == [f"{s:06d}" for s in SKILLS]
    comparison = html[html.index("<h2>Comparison</h2>") :]
    assert f"Reported under Checkpoints instead (not compared here): {keys[0]}." in comparison
    assert not any(k in comparison.replace(keys[0], "") for k in keys[0].split(", "))


def test_a_plain_run_folder_has_no_checkpoints_section(out: Path, tmp_path: Path) -> None:
    html = html_report(tmp_path, out / "001000")  # a run directory alone: its parent is not among the inputs' folders
    assert "<h2>Checkpoints</h2>" not in html


@pytest.mark.slow
def test_a_checkpoint_run_recorded_under_another_horizon_is_a_violation_and_nothing_is_ranked(
    out: Path, tmp_path: Path
) -> None:
    import shutil

    from rollbench.checkpoints.recompute import recompute
    from rollbench.mcp.checkpoints import ranking

    edited = tmp_path / "horizon"
    shutil.copytree(out, edited)
    spec = json.loads((edited / "003000" / "run.json").read_text())["spec"]
    shutil.rmtree(edited / "003000")
    (tmp_path / "spec.json").write_text(json.dumps({**spec, "max_steps": 7}))
    assert invoke("eval", "--spec", tmp_path / "spec.json", "--out", edited / "003000").returncode == 0
    got = recompute(edited)
    said = (
        f"checkpoint runs {edited / '001000'} and {edited / '003000'} ran different protocols: horizon differs "
        f"(task scripted/reach: {edited / '001000'} has "
    )
    assert got.ranking is None and len(got.violations) == 1 and got.violations[0].startswith(said)
    assert got.violations[0].endswith(f"{edited / '003000'} has 7); they are not ranked")
    from mcp.server.mcpserver.exceptions import ToolError

    with pytest.raises(ToolError, match="ran different protocols: horizon differs"):
        ranking(edited)


@pytest.mark.slow
def test_two_checkpoints_folders_under_one_root_are_refused_with_the_fix_named(out: Path, tmp_path: Path) -> None:
    """Two OUT folders over the same training run (a fixed-N one and a second, shorter one) hold step runs of the
    same names: reading both at once is refused in one line that says to report each folder on its own."""
    got = invoke("checkpoints", out.parent / "train", *ARGS, *OPTIONS, "--episodes", 2, "--out", tmp_path / "short")
    assert got.returncode == 0, got.stderr
    for command in (["report", "--out", tmp_path / "r.html"], ["summarize"]):
        refused = invoke(*command, out, tmp_path / "short")
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, refused.stderr
        assert "duplicate run identities" in lines[0] and f"{tmp_path / 'short' / '001000'}" in lines[0]
        assert lines[0].endswith("both are rollbench checkpoints folders (their step runs share names): report each "
                                 "folder on its own")  # fmt: skip
        assert not (tmp_path / "r.html").exists()
    assert html_report(tmp_path, tmp_path / "short").count("<h2>Checkpoints</h2>") == 1  # each on its own is fine
