"""MCP ``rank_checkpoints``: the ranking of an ``OUT`` folder written by ``rollbench checkpoints``, recomputed from
its run directories (read-only).

The folder is named like a run (a name under the server's ``--root``, confined by
:meth:`rollbench.mcp.server.RolloutService.run_dir`). Its checkpoints are the run directories ``OUT/<step>`` (a
6-digit step, as the command names them; links and other entries are skipped); each is graded from its files and
ranked by :func:`rollbench.checkpoints.rank.rank` at rollbench's default alpha (0.05) and coverage rule, never
at the ``alpha`` and rule ``OUT/checkpoints.json`` records (read as a regular file, never through a link), which only
check the recorded numbers (``level_note`` names them where they differ). A folder written with ``--eliminate``
gets the elimination's own decision instead (its looks replayed from the run directories: the chosen step and its
guarantee, each eliminated step's look, descriptive rates; no fixed-N p-value). Nothing is written.

The folder is read by :func:`rollbench.checkpoints.recompute.recompute`, as ``rollbench report`` and the dashboard
read it, so every surface gives the same answer: a folder that cannot be ranked (a step run damaged, not the run
of its step, or of another protocol) is a tool error naming each violation, never a ranking.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

DESCRIPTION = (
    "Rank the checkpoints of a folder written by `rollbench checkpoints --out` under the server's root: each "
    "checkpoint's success rate with its 95% interval and scored/attempted episodes, its paired difference to the best "
    "with a Holm-corrected exact McNemar p, and the verdict; for a folder written with `--eliminate`, the elimination's "
    "decision instead: the chosen step with its guarantee P(chosen more than delta below the best) <= alpha, the "
    "look that eliminated each other step, descriptive rates, no p-values; recomputed from the run directories "
    "(nothing runs). A folder with a damaged step run, or a step directory that is not its step's run (renamed, "
    "swapped, copied), is not ranked: a tool error naming each violation."
)


def ranking(out: Path) -> dict[str, Any]:
    """The ranking document of ``out``, read by :func:`rollbench.checkpoints.recompute.recompute` (the reader
    ``rollbench report`` and the dashboard use: the same answer on every surface) with the replayed ``elimination``
    block (None without ``--eliminate``) and ``violations`` (recorded numbers of checkpoints.json that differ from
    the recomputation). ToolError "OUT is not ranked: VIOLATION; ..." naming every violation when nothing can be
    ranked: no ``checkpoints.json``, a step run that cannot be graded, is damaged (grade names violations) or is not
    the run of its step (renamed, swapped, copied), two that ran different protocols, looks that cannot be
    replayed."""
    from rollbench.checkpoints.recompute import recompute

    got = recompute(out)
    if got.ranking is None:
        raise ToolError(f"{out} is not ranked: " + ("; ".join(got.violations) or "nothing to rank"))
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
