"""MCP ``rank_checkpoints``: the ranking of an ``OUT`` folder written by ``rollbench checkpoints``, recomputed from
its run directories (read-only).

The folder is named like a run (a name under the server's ``--root``, confined by
:meth:`rollbench.mcp.server.RolloutService.run_dir`). Its checkpoints are the run directories ``OUT/<step>`` (a
6-digit step, as the command names them; links and other entries are skipped); each is graded from its files and
ranked by :func:`rollbench.checkpoints.rank.rank` at the ``alpha`` and coverage rule the command recorded in
``OUT/checkpoints.json`` (read as a regular file, never through a link). Nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from rollbench.core.contracts import RollbenchError

DESCRIPTION = (
    "Rank the checkpoints of a folder written by `rollbench checkpoints --out` under the server's root: each "
    "checkpoint's success rate with its 95% interval and scored/attempted episodes, its paired difference to the best "
    "with a Holm-corrected exact McNemar p, and the verdict; recomputed from the run directories (nothing runs)."
)


def ranking(out: Path) -> dict[str, Any]:
    """The ranking document of ``out`` (see the module doc; :mod:`rollbench.checkpoints.recompute` reads it);
    ToolError naming the culprit when ``out`` holds no ``checkpoints.json``, a run directory cannot be graded, or
    two ran different protocols."""
    from rollbench.api import grade
    from rollbench.checkpoints.rank import outcomes, rank
    from rollbench.checkpoints.recompute import protocol_violation, recorded, step_runs

    try:
        _, alpha, rule = recorded(out)
        runs = [(int(d.name), str(d), outcomes(grade(d))) for d in step_runs(out)]
        if different := protocol_violation([Path(r[1]) for r in runs]):
            raise ToolError(different)
        return rank(runs, alpha=alpha, rule=rule)
    except RollbenchError as exc:
        raise ToolError(str(exc)) from None


def add_checkpoints_tool(server: MCPServer, svc: Any) -> None:
    """Register ``rank_checkpoints`` on ``server``; ``svc`` is the server's RolloutService (its ``run_dir`` confines
    the folder's name to the root)."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), description=DESCRIPTION)
    def rank_checkpoints(
        out_name: Annotated[
            str, Field(description="The folder under the root that `rollbench checkpoints --out` wrote.")
        ],
    ) -> dict[str, Any]:
        return ranking(svc.run_dir(out_name))
