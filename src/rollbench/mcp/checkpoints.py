"""MCP ``rank_checkpoints``: the ranking of an ``OUT`` folder written by ``rollbench checkpoints``, recomputed from
its run directories (read-only).

The folder is named like a run (a name under the server's ``--root``, confined by
:meth:`rollbench.mcp.server.RolloutService.run_dir`). Its checkpoints are the run directories ``OUT/<step>`` (a
6-digit step, as the command names them; links and other entries are skipped); each is graded from its files and
ranked by :func:`rollbench.checkpoints.rank.rank` at the ``alpha`` and coverage rule the command recorded in
``OUT/checkpoints.json`` (read as a regular file, never through a link). A folder written with ``--eliminate``
gets the elimination's own decision instead (its looks replayed from the run directories: the chosen step and its
guarantee, each eliminated step's look, descriptive rates; no fixed-N p-value). Nothing is written.
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
    "with a Holm-corrected exact McNemar p, and the verdict; for a folder written with `--eliminate`, the elimination's "
    "decision instead: the chosen step with its guarantee P(chosen more than delta below the best) <= alpha, the "
    "look that eliminated each other step, descriptive rates, no p-values; recomputed from the run directories "
    "(nothing runs)."
)


def ranking(out: Path) -> dict[str, Any]:
    """The ranking document of ``out`` (see the module doc; :mod:`rollbench.checkpoints.recompute` reads it);
    ToolError naming the culprit when ``out`` holds no ``checkpoints.json``, a run directory cannot be graded, or
    two ran different protocols."""
    from rollbench.api import grade
    from rollbench.checkpoints.rank import outcomes, rank
    from rollbench.checkpoints.recompute import protocol_violation, recorded, step_runs

    try:
        doc, alpha, rule = recorded(out)
        if doc.get("elimination") is None:
            runs = [(int(d.name), str(d), outcomes(grade(d))) for d in step_runs(out)]
            if different := protocol_violation([Path(r[1]) for r in runs]):
                raise ToolError(different)
            return rank(runs, alpha=alpha, rule=rule)
    except RollbenchError as exc:
        raise ToolError(str(exc)) from None
    return _eliminated(out)


def _eliminated(out: Path) -> dict[str, Any]:
    """An ``--eliminate`` folder: the elimination's decision on the looks replayed from the run directories
    (:func:`rollbench.checkpoints.recompute.recompute`), the replayed ``elimination`` block and any
    ``violations`` (recorded numbers that differ); ToolError when it cannot be replayed."""
    from rollbench.checkpoints.recompute import recompute

    got = recompute(out)
    if got.ranking is None:
        raise ToolError("; ".join(got.violations) or f"{out}: nothing to rank")
    return {**got.ranking, "elimination": got.elimination, "violations": got.violations}


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
