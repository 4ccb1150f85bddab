"""The MCP tool rank_checkpoints, called on the server rollbench mcp builds (in this process, so the worktree's
code runs): the ranking of a folder written by ``rollbench checkpoints``, recomputed from its run directories, with
hand-counted rates; names outside the root and folders the command did not write are tool errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from checkpoint_policies import expected_success, write_checkpoint
from cli_in_process import invoke
from rollbench.mcp.server import build_server

SKILLS = {1000: 0.3, 2000: 0.9}
N = 8
ARGS = ["--env", "scripted/reach", "--episodes", str(N), "--policy-template", "checkpoint_policies:make"]
OPTIONS = ["--policy-options", json.dumps({"checkpoint": "{path}"})]


def _call(root: Path, name: str) -> Any:
    async def go() -> Any:
        return await build_server(root).call_tool("rank_checkpoints", {"out_name": name})

    return anyio.run(go)


@pytest.mark.slow
def test_rank_checkpoints_recomputes_the_ranking_from_the_run_directories(tmp_path: Path) -> None:
    root, train = tmp_path / "root", tmp_path / "train"
    for step, skill in SKILLS.items():
        write_checkpoint(train, step, skill)
    got = invoke("checkpoints", train, *ARGS, *OPTIONS, "--out", root / "ckpts", "--json")
    assert got.returncode == 0, got.stderr
    (root / "ckpts" / "checkpoints.json").write_text(
        json.dumps({**json.loads((root / "ckpts" / "checkpoints.json").read_text()), "best": "edited"})
    )  # the tool recomputes: an edited ranking file does not reach the answer
    before = sorted((p, p.stat().st_mtime_ns) for p in (root / "ckpts").rglob("*"))
    doc = _call(root, "ckpts").structured_content
    rates = {s: sum(expected_success(k, seed) for seed in range(N)) / N for s, k in SKILLS.items()}
    order = sorted(SKILLS, key=lambda s: (-rates[s], s))
    assert [(r["step"], r["success_rate"]) for r in doc["checkpoints"]] == [(s, rates[s]) for s in order]
    # step 1000 lost 7 pairs step 2000 won, none the other way: exact McNemar p = 2 * 0.5**7 < 0.05, so best
    assert sum(expected_success(SKILLS[2000], k) and not expected_success(SKILLS[1000], k) for k in range(N)) == 7
    assert doc["best"] == order[0] == 2000 and doc["checkpoints"][1]["paired"]["p_value"] == 2 * 0.5**7
    assert sorted((p, p.stat().st_mtime_ns) for p in (root / "ckpts").rglob("*")) == before  # read-only


@pytest.mark.parametrize(
    ("name", "says"),
    [("../outside", "invalid run name"), ("link", "resolves outside"), ("plain", "holds no checkpoints.json")],
)
def test_rank_checkpoints_refuses_names_outside_the_root_and_other_folders(
    tmp_path: Path, name: str, says: str
) -> None:
    root = tmp_path / "root"
    (root / "plain").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "link")
    with pytest.raises(ToolError, match=says):
        _call(root, name)
