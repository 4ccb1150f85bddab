"""An MCP peer reaches only the policy servers and agents the MCP server was started with, never reads a foreign
reply back, and asks for a bounded number of episodes (issue 42, items 2 and 15).

A real ``python -m rollbench mcp`` over stdio (the official SDK's client) and a loopback "internal service" that
records every request and answers with a secret body (:mod:`recording_service`): the oracle for "connected" and
"echoed".
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import rollbench
from recording_service import SECRET, recording_service

anyio = pytest.importorskip("anyio")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from rollbench.mcp.strict import MAX_EPISODES, ServerBounds, rollout_spec  # noqa: E402

SRC = str(Path(rollbench.__file__).resolve().parents[1])
TOKEN = "tok-mcp-operator-0123456789"


@asynccontextmanager
async def session(root: Path, errlog: Path, *extra: str) -> AsyncIterator[ClientSession]:
    env = {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONPATH": SRC, "ROLLBENCH_SERVER_TOKEN": TOKEN}
    params = StdioServerParameters(command=sys.executable, args=["-m", "rollbench", "mcp", "--root", str(root), *extra],
                                   env=env)  # fmt: skip
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s


def _text(res: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in res.content)


ROLLOUT = {"env": "scripted/reach", "n_episodes": 1, "max_steps": 3}


@pytest.mark.parametrize(
    "policy",
    ["http://127.0.0.1:{port}/act", "ws://127.0.0.1:{port}", "https://localhost:{port}/act", "wss://127.0.0.1:{port}/x",
     "agent:openai/gpt-4o"],
)  # fmt: skip
@pytest.mark.slow
def test_a_peer_cannot_make_the_server_connect_to_a_url_it_was_not_started_with(tmp_path: Path, policy: str) -> None:
    with recording_service() as (port, seen):
        name = policy.format(port=port)

        async def main() -> tuple[str, str]:
            async with session(tmp_path / "runs", tmp_path / "err.txt") as s:
                one = await s.call_tool("run_policy_rollout", {"policy": name, **ROLLOUT})
                two = await s.call_tool("compare_policies_sequential", {"policy_a": "zero", "policy_b": name,
                                                                        "env": "scripted/reach", "delta": 0.3,
                                                                        "max_steps": 3})  # fmt: skip
                assert one.is_error and two.is_error
                return _text(one), _text(two)

        for said in anyio.run(main):
            assert (
                f"policy {name!r} is not one of the policy servers and agents this server was started with: none "
                in said
            )
            assert "(start it with --allow-policy NAME); a client never chooses a path to read, an address to" in said
        assert seen == []
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_an_allowed_server_is_reached_but_its_reply_never_comes_back_to_the_peer(tmp_path: Path) -> None:
    with recording_service() as (port, seen):
        url, other = f"http://127.0.0.1:{port}/act", f"http://127.0.0.1:{port}/other"

        async def main() -> tuple[str, str]:
            async with session(tmp_path / "runs", tmp_path / "err.txt", "--allow-policy", url) as s:
                allowed = await s.call_tool("run_policy_rollout", {"policy": url, **ROLLOUT})
                refused = await s.call_tool("run_policy_rollout", {"policy": other, **ROLLOUT})
                return _text(allowed), _text(refused)

        allowed, refused = anyio.run(main)
        assert seen and {path for path, _ in seen} == {"/act"} and seen[0][1] == f"Bearer {TOKEN}"
    assert SECRET not in allowed and SECRET not in refused
    assert allowed == (
        f"Error executing tool run_policy_rollout: policy {url!r} could not be used (ConfigError); the MCP server's log has the reason (what a policy server "
        "or provider answered is never passed to a client)"
    )
    assert (
        f"policy {other!r} is not one of the policy servers and agents this server was started with: {url};" in refused
    )
    assert SECRET not in (tmp_path / "err.txt").read_text()  # a foreign body is never echoed, not even to the log


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("zero", "--allow-policy 'zero': give a policy server URL"),
        ("lerobot:/srv/ckpt", "--allow-policy 'lerobot:/srv/ckpt': give a policy server URL"),
        ("my.module:make", "--allow-policy 'my.module:make': give a policy server URL"),
    ],
)
@pytest.mark.slow
def test_allow_policy_takes_only_servers_and_agents(tmp_path: Path, value: str, words: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "rollbench", "mcp", "--root", str(tmp_path / "runs"), "--allow-policy", value],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC}, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("n", [MAX_EPISODES + 1, 100_000, 0, -3])
def test_the_episode_count_of_a_rollout_is_bounded(n: int) -> None:
    with pytest.raises(ToolError) as caught:
        rollout_spec(ServerBounds(100), "zero", "scripted/reach", n, 10, 0, None, False)
    assert str(caught.value) == (
        f"n_episodes must be between 1 and 1000 (got {n}): it is the number of independently reset episodes to "
        "record per task"
    )
    assert rollout_spec(ServerBounds(100), "zero", "scripted/reach", MAX_EPISODES, 10, 0, None, False).episodes == 1000


def test_the_rollout_schema_states_the_episode_bound(tmp_path: Path) -> None:
    from rollbench.mcp.server import build_server

    server = build_server(tmp_path)
    tool = next(t for t in server._tool_manager.list_tools() if t.name == "run_policy_rollout")
    prop = tool.parameters["properties"]["n_episodes"]
    assert prop["minimum"] == 1 and prop["maximum"] == 1000 and "(1 to 1000)" in prop["description"]
