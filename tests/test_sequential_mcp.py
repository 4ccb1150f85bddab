"""The MCP tool compare_policies_sequential over a real ``rollbench mcp`` stdio server (official SDK client): the
decision and its evidence equal ``compare --sequential`` recomputed from the run directories it wrote, and bad
names are a tool error naming the valid ones."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcp_support import error_text, mcp_session, structured
from rollbench.sequential.recompute import compare_sequential


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.anyio
async def test_is_b_better_than_a_returns_the_decision_with_its_evidence_from_disk(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    args = {"policy_a": "random", "policy_b": "scripted-expert", "env": "scripted/reach", "delta": 0.3,
            "max_steps": 50, "run_name": "ab"}  # fmt: skip
    with anyio.fail_after(300):
        async with mcp_session(root) as s:
            out = structured(await s.call_tool("compare_policies_sequential", args))
            bad = await s.call_tool("compare_policies_sequential", {**args, "policy_b": "no-such", "run_name": "x"})
    (task,) = out["tasks"]
    disk = compare_sequential([root / "ab"])["tasks"][0]
    last = disk["looks"][-1]
    assert task["decision"] == disk["decision"] == "b_better"
    assert task["stopped_at"] == disk["stopped_at"] < task["fixed_n"]
    assert (task["b_only"], task["a_only"], task["llr_b"]) == (last["b_only"], last["a_only"], last["llr_b"])
    assert task["llr_b"] >= task["efficacy_llr"] and task["type1_error"] <= 0.05
    assert out["summary"].startswith(f"scripted/reach: B is better than A after {disk['stopped_at']} pairs")
    assert "no-such" in error_text(bad) and "scripted-expert" in error_text(bad)
