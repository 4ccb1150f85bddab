"""The MCP tool ``compare_policies_sequential``: "is B better than A on this task, within this budget?".

It runs :func:`rollbench.sequential.runner.run_sequential` (both policies on the same planned episodes, pair by pair,
stopping at the first decision) in a worker thread under the server's root, and returns the decision with its
evidence: per task the decision, the pair at which it was made, the discordant counts, the log-likelihood ratios
and their thresholds, and the design's exact error rates, all recomputed from the two run directories. A
cancellation stops starting episodes; the same call with the same ``run_name`` resumes and reaches the same decision.

No ``from __future__ import annotations``: the tool's signature is evaluated when the server is built (its schema).
"""

import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.mcp.progress import Active
from rollbench.mcp.strict import rollout_spec, tool_error

DESCRIPTION = (
    "Answer 'is policy B better than policy A on this task?' with as few episodes as the answer needs: both policies "
    "run the same planned episodes (same task, seed and initial state), pair by pair, and a sequential test on the "
    "pairs where exactly one succeeds stops at the first decision: b_better or a_better (false-positive rate at most "
    "alpha, computed exactly), futility (no difference of delta), budget_exhausted (undecided after max_pairs), or "
    "insufficient_coverage (too many environment or infrastructure errors for a verdict). "
    "Repeat `summary` and `decision` to the user as they are; budget_exhausted is not evidence of equality. If the "
    "call is cancelled, call again with the same arguments and run_name to resume."
)

Decision = Literal["b_better", "a_better", "futility", "budget_exhausted", "insufficient_coverage"] | None


class TaskDecision(BaseModel):
    """One task's sequential test, recomputed from the two run directories."""

    task: str
    decision: Decision = Field(description="null: not decided yet (cancelled).")
    stopped_at: int | None = Field(description="Pairs at the deciding look.")
    pairs_counted: int
    b_only: int = Field(description="Pairs where B succeeded and A failed.")
    a_only: int
    llr_b: float = Field(description="log-likelihood ratio for 'B better' at the last look.")
    llr_a: float
    efficacy_llr: float = Field(description="Decides when a log-likelihood ratio reaches it.")
    futility_llr: float = Field(description="Futility when both are at or below it.")
    alpha: float
    type1_error: float = Field(description="Exact bound on the false-positive rate of this test.")
    power: float = Field(description="Exact power at delta (design's assumptions).")
    budget: int
    fixed_n: int = Field(description="Pairs a fixed-N exact McNemar test needs for the same power.")


class SequentialResult(BaseModel):
    summary: str
    run_id: str
    run_dir: str
    alpha_family: float
    correction: str
    tasks: list[TaskDecision]
    pooled_decision: Decision


def result_of(doc: dict[str, Any], run_id: str) -> SequentialResult:
    rows = []
    for t in doc["tasks"]:
        last: dict[str, Any] = t["looks"][-1] if t["looks"] else {"b_only": 0, "a_only": 0, "llr_b": 0.0, "llr_a": 0.0}
        d = t["design"]
        rows.append(
            TaskDecision(
                task=t["task"],
                decision=t["decision"],
                stopped_at=t["stopped_at"],
                pairs_counted=t["pairs_counted"],
                b_only=last["b_only"],
                a_only=last["a_only"],
                llr_b=last["llr_b"],
                llr_a=last["llr_a"],
                efficacy_llr=d["efficacy_llr"],
                futility_llr=d["futility_llr"],
                alpha=d["alpha"],
                type1_error=d["type1_error"],
                power=d["power"],
                budget=d["budget"],
                fixed_n=d["fixed_n"],
            )
        )
    words = {
        "b_better": "B is better than A",
        "a_better": "A is better than B",
        "futility": "no difference of delta or more",
        "budget_exhausted": "undecided within the budget",
        "insufficient_coverage": "no verdict: too many episodes errored (insufficient coverage)",
        None: "not decided yet (resume with the same run_name)",
    }
    parts = [
        f"{r.task}: {words[r.decision]}"
        + (f" after {r.stopped_at} pairs (B only {r.b_only}, A only {r.a_only}; fixed-N needs {r.fixed_n})" if r.stopped_at else "")
        for r in rows
    ]  # fmt: skip
    pooled = (doc.get("pooled") or {}).get("decision")
    if doc.get("pooled"):
        parts.append(f"pooled: {words[pooled]}")
    return SequentialResult(
        summary="; ".join(parts), run_id=run_id, run_dir=doc["out"], alpha_family=doc["alpha_family"],
        correction=doc["correction"], tasks=rows, pooled_decision=pooled,
    )  # fmt: skip


def add_sequential_tool(server: MCPServer, svc: Any, call_result: Callable[[str, BaseModel], CallToolResult]) -> None:
    """Register compare_policies_sequential on ``server``; ``svc`` is the server's RolloutService (its ``bounds``,
    its ``run_dir``, which confines run names to the root, and its rollout ``slots``), ``call_result`` its result
    shape."""
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)

    @server.tool(annotations=writes, structured_output=True, description=DESCRIPTION)
    async def compare_policies_sequential(
        policy_a: Annotated[str, Field(description="Policy A, the baseline (a name from list_policies or a URL).")],
        policy_b: Annotated[str, Field(description="Policy B, the candidate.")],
        env: Annotated[str, Field(description="Task or suite from list_envs (a suite: one decision per task).")],
        delta: Annotated[
            float, Field(gt=0, lt=1, description="Smallest difference in success rate worth detecting (0.2 = 20 pts).")
        ],
        max_steps: Annotated[int, Field(ge=1, description="Horizon of every episode.")],
        max_pairs: Annotated[
            int | None, Field(ge=1, le=5000, description="Budget: most pairs per task (default: equal power).")
        ] = None,
        alpha: Annotated[float, Field(gt=0, lt=0.5, description="Family-wise level of the decisions.")] = 0.05,
        p_a: Annotated[
            float, Field(gt=0, lt=1, description="Expected success rate of A; sets the design (as the CLI's --p-a).")
        ] = 0.5,
        seed: Annotated[int, Field(ge=0, le=2**31 - 1, description="Base seed of both arms.")] = 0,
        run_name: Annotated[str | None, Field(description="Directory under the root; reuse it to resume.")] = None,
    ) -> Annotated[CallToolResult, SequentialResult]:
        from rollbench.run.runners import Execution
        from rollbench.sequential.runner import SequentialConfig, SequentialObserver, run_sequential

        spec_a = rollout_spec(svc.bounds, policy_a, env, 1, max_steps, seed, None, False)
        spec_b = rollout_spec(svc.bounds, policy_b, env, 1, max_steps, seed, None, False)
        run_id = run_name if run_name is not None else f"sequential-{uuid.uuid4().hex[:8]}"
        out = svc.run_dir(run_id)
        active = Active()  # its stop flag and its work's life (rollbench.mcp.slots: cancellation never waits in vain)

        class Cancelled(SequentialObserver):
            """Stops starting episodes once the peer cancelled the call."""

            def should_stop(self) -> bool:
                return active.stop.is_set()

        def work() -> dict[str, Any]:
            config = SequentialConfig(delta=delta, alpha=alpha, p_a=p_a, budget=max_pairs, execution=Execution())
            return run_sequential(spec_a, spec_b, out, config, Cancelled())

        try:  # one rollout slot of the server's --max-rollouts (both arms run in the one thread)
            doc = await svc.slots.run(active, work)
        except ConfigError as exc:  # the names' hint only where a name was wrong (a design error is about numbers)
            hint = " (list_envs and list_policies give every valid name)" if "unknown " in str(exc) else ""
            raise tool_error(exc, (policy_a, policy_b), hint) from None
        except RollbenchError as exc:
            raise tool_error(exc, (policy_a, policy_b)) from None
        res = result_of(doc, run_id)
        return call_result(res.summary, res)
