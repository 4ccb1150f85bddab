"""MCP tool arguments are taken exactly as the published schema says, and mistakes are answered in plain words:
no string or boolean is coerced to a number, no string to a boolean, an unknown or misspelled argument is refused
(naming the valid ones), nothing is written on a refusal; ``list_envs`` is short unless more is asked for. The
official SDK's client against a real ``python -m rollbench mcp`` subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_support import error_text, mcp_session, structured

pytestmark = pytest.mark.anyio
README_RUN = ("--env", "metaworld/reach-v3", "--policy", "metaworld-expert")  # its episodes last long enough for steps
OK = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 1, "max_steps": 5}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"n_episodes": "3"}, ["invalid argument n_episodes", "valid integer", "got '3'"]),
        ({"n_episodes": True}, ["invalid argument n_episodes", "valid integer", "got True"]),
        ({"max_steps": 5.0}, ["invalid argument max_steps", "valid integer", "got 5.0"]),
        ({"video": "yes"}, ["invalid argument video", "valid boolean", "got 'yes'"]),
        ({"seed": "0"}, ["invalid argument seed", "got '0'"]),
        ({"workers": 2}, ["unknown argument 'workers'"]),
        ({"n_episode": 2}, ["unknown argument 'n_episode'"]),
    ],
)
@pytest.mark.slow
async def test_a_wrong_argument_is_refused_in_plain_words_and_nothing_is_written(
    change: dict[str, Any], words: list[str], tmp_path: Path
) -> None:
    with anyio.fail_after(60):
        async with mcp_session(tmp_path) as s:
            text = error_text(await s.call_tool("run_policy_rollout", {**OK, **change}))
    for w in [*words, "valid arguments: policy, env, n_episodes, max_steps, seed, instruction, video, run_name"]:
        assert w in text, text
    assert "pydantic" not in text and "errors.pydantic.dev" not in text and "\n" not in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
async def test_list_envs_is_short_by_default_and_detailed_on_request(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with mcp_session(tmp_path) as s:
            short = await s.call_tool("list_envs", {})
            metaworld = structured(await s.call_tool("list_envs", {"family": "metaworld"}))["result"]
            scripted = structured(await s.call_tool("list_envs", {"family": "scripted", "detail": True}))["result"]
            unknown = error_text(await s.call_tool("list_envs", {"family": "metawrld"}))
    families = structured(short)["result"]
    assert len(json.dumps(families)) < 8000  # the full table is ~79,000 characters
    by_name = {f["family"]: f for f in families}
    assert {"metaworld", "scripted", "libero", "robosuite"} <= set(by_name)
    assert by_name["metaworld"]["tasks"] == 50 and "metaworld/MT10" in by_name["metaworld"]["suites"]
    assert set(by_name["metaworld"]) == {"family", "description", "installed", "missing", "tasks", "suites"}
    (mw,) = metaworld
    assert len(mw["tasks"]) == 50 and set(mw["tasks"][0]) == {"name", "instruction"}
    assert mw["suites"]["metaworld/MT10"] == 10
    (sc,) = scripted
    reach = next(t for t in sc["tasks"] if t["name"] == "scripted/reach")
    assert (reach["max_steps"], reach["success_rule"], reach["cameras"]) == (50, "any_step", ["top"])
    assert "unknown env family 'metawrld'" in unknown and "metaworld" in unknown


@pytest.mark.sim
def test_the_documented_client_example_prints_progress_for_every_episode(tmp_path: Path) -> None:
    """docs/examples/mcp_client.py (linked from the README) as a user runs it: one progress line per episode, also
    when episodes last long enough for the run's in-episode step events (which once crashed the server's
    progress handler)."""
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "mcp_client.py"
    r = subprocess.run(
        [sys.executable, str(example), "--root", str(tmp_path), "--episodes", "3", "--max-steps", "150", *README_RUN],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:4]] == ["progress 0/3", "progress 1/3", "progress 2/3", "progress 3/3"]
    assert "Recorded 3 of 3 requested episodes" in lines[4] and "Status OK" in lines[4]
