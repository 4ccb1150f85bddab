"""The level of a checkpoints folder's verdict is the reader's, never the one its ``checkpoints.json`` records (a
neighbour of hostile round 15, F5): a folder handed over with its ``alpha`` edited from 0.05 to 0.5 (and its verdict
forged to match, so that every recorded number agrees at 0.5) gets the verdict at rollbench's default alpha 0.05 on
``rollbench report``, the dashboard's API and the MCP tool ``rank_checkpoints``, with one line naming the recorded
level; the sound folder reads as before, with no such line.

Oracle: hand counts. ``checkpoint_policies.expected_success`` gives skill 0.9 a win and skill 0.2 a loss on each of
seeds 0..3, so step 2000 wins 4 of 4 and step 1000 none: 4 discordant pairs, all one way, exact McNemar
p = 2 * 0.5**4 = 0.125, "worse" at alpha 0.5 and not at 0.05."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from checkpoint_policies import expected_success, write_checkpoint
from checkpoints_html import checkpoints_section, html_report
from cli_in_process import invoke
from rollbench.cli.dashboard import DashboardOptions, build_dashboard
from rollbench.dashboard.app import create_app
from rollbench.mcp.server import build_server

SKILLS = {1000: 0.2, 2000: 0.9}
N = 4
ARGS = ["--env", "scripted/reach", "--episodes", str(N), "--policy-template", "checkpoint_policies:make"]
OPTIONS = ["--policy-options", json.dumps({"checkpoint": "{path}"})]
TIED = "step 2000: highest rate, not separated from step 1000"
NOTE = (
    "checkpoints.json records the level its ranking was made at (alpha 0.5, min coverage 0.95, policy errors counted "
    "as failures); the verdict here is stated at alpha 0.05, min coverage 0.95, policy errors counted as failures (the "
    "reader's options, else rollbench's defaults: a handed-over file never sets the level of a verdict); the recorded "
    "numbers are checked at the recorded level"
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``root/sound``: the command's folder at the default alpha; ``root/edited``: a copy whose checkpoints.json
    says alpha 0.5, with the verdict and the "worse" flag that level gives (a consistent forgery)."""
    base = tmp_path_factory.mktemp("level")
    for step, skill in SKILLS.items():
        write_checkpoint(base / "train", step, skill)
    got = invoke("checkpoints", base / "train", *ARGS, *OPTIONS, "--out", base / "root" / "sound")
    assert got.returncode == 0, got.stderr
    shutil.copytree(base / "root" / "sound", base / "root" / "edited")
    path = base / "root" / "edited" / "checkpoints.json"
    doc = json.loads(path.read_text())
    assert (doc["alpha"], doc["verdict"], doc["best"]) == (0.05, "best_not_separated", 2000)
    doc.update(alpha=0.5, verdict="best", says="step 2000: best: better than every other checkpoint")
    doc["checkpoints"][1]["paired"]["worse"] = True
    path.write_text(json.dumps(doc))
    return base / "root"


def test_the_hand_counts_behind_the_fixture() -> None:
    wins = {s: [expected_success(k, seed) for seed in range(N)] for s, k in SKILLS.items()}
    assert wins == {1000: [False] * N, 2000: [True] * N}  # 4 discordant pairs: p = 2 * 0.5**4 = 0.125


def _mcp(root: Path, name: str) -> dict[str, Any]:
    async def go() -> Any:
        return await build_server(root).call_tool("rank_checkpoints", {"out_name": name})

    return dict(anyio.run(go).structured_content)


def _api(root: Path, name: str) -> tuple[dict[str, Any], str]:
    """The document ``/api/checkpoints/NAME`` and the page ``/checkpoints/NAME`` (unescaped) of a dashboard on
    ``root/NAME`` alone (the edited folder's runs are byte-copies of the sound one's: one dashboard lists one)."""
    folder = root / name
    dash = build_dashboard([folder], root.parent / "labels.json", DashboardOptions(cache_dir=root.parent / name))
    with TestClient(create_app(dash), base_url="http://127.0.0.1:8301") as client:
        got, page = client.get(f"/api/checkpoints/{name}"), client.get(f"/checkpoints/{name}")
        assert (got.status_code, page.status_code) == (200, 200)
        return dict(got.json()), html.unescape(page.text)


@pytest.mark.slow
def test_an_alpha_edited_upward_gets_the_default_level_verdict_and_a_note_on_every_surface(
    root: Path, tmp_path: Path
) -> None:
    doc = _mcp(root, "edited")
    assert (doc["verdict"], doc["best"], doc["alpha"], doc["says"]) == ("best_not_separated", 2000, 0.05, TIED)
    assert doc["checkpoints"][1]["paired"]["p_holm"] == 0.125 and doc["checkpoints"][1]["paired"]["worse"] is False
    assert (doc["level_note"], doc["recorded_alpha"], doc["violations"]) == (NOTE, 0.5, [])
    api, page = _api(root, "edited")
    assert (api["ranking"]["verdict"], api["level_note"], api["violations"]) == (doc["verdict"], NOTE, [])
    assert api["ranking"]["level_note"] == NOTE and api["ranking"]["recorded_alpha"] == 0.5
    assert f"<b>Verdict:</b> {TIED}" in page and f"<li>{NOTE}</li>" in page and "better than every" not in page
    got = invoke("report", root / "edited", "--out", tmp_path / "r.html")
    assert got.returncode == 0, got.stderr
    assert NOTE in " ".join(got.stderr.split())  # the report's warnings, on stderr too
    section = html.unescape(checkpoints_section((tmp_path / "r.html").read_text()))
    assert f"<strong>Verdict:</strong> {TIED}" in section and "best: better than every other" not in section
    assert f"<li>{NOTE}</li>" in section and "Violation" not in section


@pytest.mark.slow
def test_the_sound_folder_reads_as_recorded_with_no_level_note(root: Path, tmp_path: Path) -> None:
    doc = _mcp(root, "sound")
    assert (doc["verdict"], doc["says"], doc["level_note"], doc["violations"]) == ("best_not_separated", TIED, None, [])
    api, page = _api(root, "sound")
    assert (api["ranking"]["verdict"], api["level_note"], api["violations"]) == ("best_not_separated", None, [])
    assert f"<b>Verdict:</b> {TIED}" in page and "records the level" not in page
    section = html.unescape(checkpoints_section(html_report(tmp_path, root / "sound")))
    assert f"<strong>Verdict:</strong> {TIED}" in section and "records the level" not in section


@pytest.mark.slow
def test_a_recorded_number_that_disagrees_at_the_recorded_level_is_still_a_violation(
    root: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "root" / "forged"
    shutil.copytree(root / "edited", folder)
    path = folder / "checkpoints.json"
    doc = json.loads(path.read_text())
    doc["checkpoints"][1]["paired"]["worse"] = False  # at the recorded alpha 0.5, p 0.125 is worse
    path.write_text(json.dumps(doc))
    got = _mcp(folder.parent, "forged")
    [said] = got["violations"]
    assert said.startswith(f"{path}: step 1000 paired an object of 6 keys differs from its run directory's {{")
    assert "'p_holm': 0.125, 'worse': True}" in said and got["verdict"] == "best_not_separated"


@pytest.mark.slow
def test_an_elimination_run_at_a_looser_alpha_decides_nothing_at_the_default_level(tmp_path: Path) -> None:
    """Steps 1000 (skill 0) and 2000 (skill 1), ``--eliminate --delta 0.5 --alpha 0.3 --first-look 4``. By hand:
    N_max = ceil(8 ln(2 * 4 / 0.3)) = 27, looks 4, 8, 16, 27 (L = 4, level 0.075); at look 1 the 4 paired differences
    are all 1 and the Hoeffding radius sqrt(2 ln(2 / 0.075) / 4) = 1.281, so the lower bound is -0.281 >= -0.5: the
    rule stops and chooses step 2000 with its guarantee at 0.3. At the default 0.05 that choice is not made: no
    decision, nothing eliminated, and the line naming the recorded level; the recorded looks stay as they ran."""
    train, root = tmp_path / "train", tmp_path / "root"
    write_checkpoint(train, 1000, 0.0), write_checkpoint(train, 2000, 1.0)
    more = ["--eliminate", "--delta", "0.5", "--alpha", "0.3", "--first-look", "4"]
    got = invoke("checkpoints", train, *ARGS[:2], *ARGS[4:], *OPTIONS, *more, "--out", root / "el")
    assert got.returncode == 0, got.stderr
    doc = _mcp(root, "el")
    assert (doc["verdict"], doc["chosen"], doc["guarantee"], doc["violations"]) == ("undecided", None, None, [])
    assert doc["says"] == (
        "no decision at alpha 0.05: the elimination ran at alpha 0.3 and its recorded looks do not decide at alpha "
        "0.05 (run it with --alpha 0.05 to decide at that level)"
    )
    assert [(r["step"], r["decision"]) for r in doc["checkpoints"]] == [(2000, "kept"), (1000, "kept")]
    note = NOTE.replace("alpha 0.5", "alpha 0.3")
    assert doc["level_note"] == note and doc["recorded_alpha"] == 0.3
    looks = doc["elimination"]["looks"]  # the record of what ran: one look of 4 episodes, step 2000 chosen at 0.3
    assert [(look["trials"], look["best"]) for look in looks] == [(4, 2000)] and doc["elimination"]["chosen"] == 2000
    assert doc["elimination"]["design"]["looks"] == [4, 8, 16, 27]
    api, page = _api(root, "el")
    assert (api["ranking"]["verdict"], api["level_note"]) == ("undecided", note)
    assert f"<b>Verdict:</b> {doc['says']}" in page and f"<li>{note}</li>" in page
    section = html.unescape(checkpoints_section(html_report(tmp_path, root / "el")))
    assert f"<strong>Verdict:</strong> {doc['says']}" in section and f"<li>{note}</li>" in section
