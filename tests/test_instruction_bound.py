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
from rollbench.mcp.strict import ServerBounds, check_arguments, rollout_spec

LIMIT = 4096  # the documented bound, written here by hand


def test_an_instruction_of_the_limit_is_taken_and_one_more_character_is_refused_naming_its_size() -> None:
    ok = build_spec(env="scripted/reach", policy="zero", episodes=1, instruction="a" * LIMIT)
    assert ok.instruction == "a" * LIMIT
    with pytest.raises(ConfigError) as err:
        build_spec(env="scripted/reach", policy="zero", episodes=1, instruction="a" * (LIMIT + 1))
    said = str(err.value)
    assert said == (
        f"invalid evaluation spec: instruction: String should have at most {LIMIT} characters "
        f"(got a string of {LIMIT + 1} characters)"  # named by type and size, never its content (hostile9 F2)
    )
    with pytest.raises(ValueError, match=f"at most {LIMIT} characters"):
        InstructionVariant(name="long", instruction="b" * (LIMIT + 1))


def test_the_mcp_tool_refuses_a_longer_instruction_and_its_schema_states_the_bound(tmp_path) -> None:
    with pytest.raises(ToolError, match=f"instruction: String should have at most {LIMIT} characters"):
        rollout_spec(ServerBounds(1000), "scripted-expert", "scripted/reach", 1, 5, 0, "c" * (LIMIT + 1), False)
    server = build_server(tmp_path)
    (run,) = [t for t in anyio.run(server.list_tools) if t.name == "run_policy_rollout"]
    assert run.input_schema["properties"]["instruction"]["anyOf"][0] == {"maxLength": LIMIT, "type": "string"}
    # what a client's call meets first: the strict check of the published arguments (rollbench.mcp.strict)
    (tool,) = [t for t in server._tool_manager.list_tools() if t.name == "run_policy_rollout"]
    args = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 1, "max_steps": 5}
    with pytest.raises(ToolError, match=f"invalid argument instruction: String should have at most {LIMIT} char"):
        check_arguments(tool.name, tool.fn_metadata.arg_model, {"ctx"}, {**args, "instruction": "d" * (LIMIT + 1)})
    check_arguments(tool.name, tool.fn_metadata.arg_model, {"ctx"}, {**args, "instruction": "d" * LIMIT})
    assert list(tmp_path.iterdir()) == []
