"""The MCP tool compare_policies_sequential over a real ``rollbench mcp`` stdio server (official SDK client): the
decision and its evidence equal ``compare --sequential`` recomputed from the run directories it wrote, and bad
names are a tool error naming the valid ones.

One server serves the module (:func:`calls`): every tool call of both tests is made in one session, and each test
checks the answers it is about."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult
from typer.testing import CliRunner

from mcp_support import error_text, mcp_session, structured
from rollbench.cli.main import app
from rollbench.sequential.recompute import compare_sequential

AB = {"policy_a": "random", "policy_b": "scripted-expert", "env": "scripted/reach", "delta": 0.3, "max_steps": 50,
      "run_name": "ab"}  # fmt: skip
PA = {**AB, "run_name": "pa", "p_a": 0.2}


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, CallToolResult]]:
    """The server's root and its answers: ``ab`` and ``pa`` (two comparisons), ``bad`` (an unknown policy B) and
    ``refused`` (an impossible delta with ``p_a``)."""
    root = tmp_path_factory.mktemp("mcp") / "runs"

    async def session() -> dict[str, CallToolResult]:
        with anyio.fail_after(600):
            async with mcp_session(root) as s:
                return {
                    "ab": await s.call_tool("compare_policies_sequential", AB),
                    "bad": await s.call_tool(
                        "compare_policies_sequential", {**AB, "policy_b": "no-such", "run_name": "x"}
                    ),
                    "pa": await s.call_tool("compare_policies_sequential", PA),
                    "refused": await s.call_tool("compare_policies_sequential", {**PA, "delta": 0.95, "run_name": "z"}),
                }

    return root, anyio.run(session)


@pytest.mark.slow
def test_is_b_better_than_a_returns_the_decision_with_its_evidence_from_disk(calls: Any) -> None:
    root, answers = calls
    out = structured(answers["ab"])
    (task,) = out["tasks"]
    disk = compare_sequential([root / "ab"])["tasks"][0]
    last = disk["looks"][-1]
    assert task["decision"] == disk["decision"] == "b_better"
    assert task["stopped_at"] == disk["stopped_at"] < task["fixed_n"]
    assert (task["b_only"], task["a_only"], task["llr_b"]) == (last["b_only"], last["a_only"], last["llr_b"])
    assert task["llr_b"] >= task["efficacy_llr"] and task["type1_error"] <= 0.05
    assert out["summary"].startswith(f"scripted/reach: B is better than A after {disk['stopped_at']} pairs")
    bad = error_text(answers["bad"])
    assert "no-such" in bad and "scripted-expert" in bad


@pytest.mark.slow
def test_p_a_sets_the_design_as_the_clis_and_a_design_refusal_names_no_list_tools(calls: Any, tmp_path: Path) -> None:
    """Issue 30 (h-cli 4): the tool takes the CLI's ``p_a`` (recorded in sequential.json's parameters, and the design
    is the CLI's for the same arguments); an impossible delta is refused with the design's own words, without the
    list_envs/list_policies hint (which is for wrong names)."""
    root, answers = calls
    out = structured(answers["pa"])
    params = json.loads((root / "pa/sequential.json").read_text())["parameters"]
    assert params["p_a"] == 0.2
    cli_out = tmp_path / "cli"
    r = CliRunner().invoke(app, ["sequential", "--env", "scripted/reach", "--policy-a", "random", "--policy-b",
                                 "scripted-expert", "--delta", "0.3", "--p-a", "0.2", "--max-steps", "50",
                                 "--out", str(cli_out), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    design = json.loads(r.stdout)["tasks"][0]["design"]
    assert design["p_a"] == 0.2
    mine = out["tasks"][0]
    assert (mine["fixed_n"], mine["efficacy_llr"], mine["futility_llr"]) == (
        design["fixed_n"], design["efficacy_llr"], design["futility_llr"],
    )  # fmt: skip
    text = error_text(answers["refused"])
    assert "delta" in text and "list_envs" not in text and not (root / "z").exists()
