"""An instruction override has a stated upper bound, :data:`rollbench.core.spec.MAX_INSTRUCTION_CHARS` (4096
characters), wherever it arrives: ``eval --instruction``, a sweep variant, the MCP tool's argument (whose published
schema states it). A longer one is refused in one line that names its size instead of echoing it."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from rollbench.core.contracts import ConfigError
from rollbench.core.spec import InstructionVariant, build_spec
from rollbench.mcp.server import build_server
from rollbench.mcp.strict import rollout_spec

LIMIT = 4096  # the documented bound, written here by hand


def test_an_instruction_of_the_limit_is_taken_and_one_more_character_is_refused_naming_its_size() -> None:
    ok = build_spec(env="scripted/reach", policy="zero", episodes=1, instruction="a" * LIMIT)
    assert ok.instruction == "a" * LIMIT
    with pytest.raises(ConfigError) as err:
        build_spec(env="scripted/reach", policy="zero", episodes=1, instruction="a" * (LIMIT + 1))
    said = str(err.value)
    assert said == (
        f"invalid evaluation spec: instruction: String should have at most {LIMIT} characters "
        f"(got '{'a' * 59}... ({LIMIT + 1} characters))"
    )
    with pytest.raises(ValueError, match=f"at most {LIMIT} characters"):
        InstructionVariant(name="long", instruction="b" * (LIMIT + 1))


def test_the_mcp_tool_refuses_a_longer_instruction_and_its_schema_states_the_bound(tmp_path) -> None:
    with pytest.raises(ToolError, match=f"instruction: String should have at most {LIMIT} characters"):
        rollout_spec(1000, "scripted-expert", "scripted/reach", 1, 5, 0, "c" * (LIMIT + 1), False)
    tools = anyio.run(build_server(tmp_path).list_tools)
    (run,) = [t for t in tools if t.name == "run_policy_rollout"]
    prop = run.input_schema["properties"]["instruction"]
    assert prop["maxLength"] == LIMIT
    assert list(tmp_path.iterdir()) == []
