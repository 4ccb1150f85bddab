"""A minimal MCP client for rollbench with progress: the official MCP SDK (``pip install mcp``; rollbench's
``[mcp]`` extra has it) starts ``rollbench mcp`` over stdio, runs a policy and prints one line per finished episode.

    .venv/bin/python docs/examples/mcp_client.py --env metaworld/reach-v3 --policy metaworld-expert --episodes 5

Any MCP client works the same way: call ``run_policy_rollout`` and pass a progress callback (an ``async``
function; Strands Agents, the OpenAI Agents SDK and others take one too). The tool's result is the graded run.
"""

from __future__ import annotations

import argparse
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main(env: str, policy: str, episodes: int, max_steps: int, root: str) -> int:
    server = StdioServerParameters(command=sys.executable, args=["-m", "rollbench", "mcp", "--root", root])

    async def progress(done: float, total: float | None, message: str | None) -> None:
        print(f"progress {done:.0f}/{total:.0f}: {message}", flush=True)

    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        args = {"env": env, "policy": policy, "n_episodes": episodes, "max_steps": max_steps}
        result = await session.call_tool("run_policy_rollout", args, progress_callback=progress)
    if result.is_error:
        print("error:", " ".join(getattr(c, "text", "") for c in result.content), file=sys.stderr)
        return 2
    run = result.structured_content or {}
    print(run["summary"])
    return 0 if run["status"] == "OK" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="scripted/reach")
    parser.add_argument("--policy", default="scripted-expert")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--root", default="runs/mcp")
    a = parser.parse_args()
    sys.exit(anyio.run(main, a.env, a.policy, a.episodes, a.max_steps, a.root))
