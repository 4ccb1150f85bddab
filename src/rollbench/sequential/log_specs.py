"""The decision log's ``spec_a``/``spec_b`` checked against the arms' run.json ``spec``: a log naming another
policy, success rule or horizon than the arms ran is not the log of these arms (issue 42, item 14)."""

from __future__ import annotations

import json
from typing import Any

from rollbench.core.format import quoted

ARM_SET = ("env", "episodes", "trial_order_seed")
"""What ``rollbench sequential`` sets per arm (one task, the budget, the seeded order): not the log's to match."""


def shown(value: Any) -> str:
    """``value`` as JSON, quoted by the one length rule (:func:`rollbench.core.format.quoted`)."""
    return quoted(json.dumps(value, default=str), as_text=True)  # as the JSON file writes it


def log_spec_problem(params: dict[str, Any], specs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> str | None:
    """What in the log's ``spec_a``/``spec_b`` differs from the arms' run.json ``spec`` (``specs``: task -> (A's,
    B's)), :data:`ARM_SET` aside: another policy,
    success rule or horizon named there than the arms ran (issue 42, item 14)."""
    for arm, i in (("a", 0), ("b", 1)):
        logged = params.get(f"spec_{arm}")
        if not isinstance(logged, dict):
            return f"its parameters.spec_{arm} is not an object"
        for spec in (pair[i] for pair in specs.values()):
            key = next(
                (k for k in sorted({*logged, *spec}) if k not in ARM_SET and logged.get(k) != spec.get(k)),
                None,
            )
            if key is not None:
                return f"its parameters.spec_{arm}.{key} is {shown(logged.get(key))} but the arm's run.json records {shown(spec.get(key))}"
    return None
