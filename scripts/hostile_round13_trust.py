"""Hostile round 13's trust class for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F10: a handed-over run.json that sets a deadline or wait (``policy_timeout_s`` over the 300 s default, a policy
  option ``timeout_s``/``latency_ms``/``retries``/``backoff_s``... at any depth): ``eval --resume`` and
  ``eval --spec RUN/run.json`` refuse it in one line naming it, nothing changed, until it is typed again or
  ``--trust-run`` given; trusted, a ``gpu-standin`` ``latency_ms`` past its 60,000 maximum is still refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SAID = "a deadline or wait rollbench would hold you to"


def _planter(spec: dict[str, Any], identity: bool = False) -> Any:
    def plant(run: Path) -> None:
        log = json.loads((run / "run.json").read_text())
        log["spec"].update(spec)
        if identity:  # a consistent hand-over: only the trust check or the option's bound can refuse it
            from rollbench.core.spec import EvalSpec

            log["spec_identity"] = EvalSpec(**log["spec"]).identity()
        (run / "run.json").write_text(json.dumps(log))

    return plant


def handed_over_waits(r: Any, n: int) -> None:
    for i in range(n):
        key = r.rng.choice(["timeout_s", "connect_timeout_s", "start_timeout_s", "latency_ms", "retries", "backoff_s"])
        value = r.rng.choice([1e12, 86400, 7, 10**6])
        options: dict[str, Any] = {"inner": "zero", key: value}
        path = key
        if r.rng.random() < 0.5:
            options, path = {"inner": "zero", "nested": [{key: value}]}, f"nested[0].{key}"
        deadline = r.rng.choice([300.5, 3600.0, 86400.0])
        cases = [
            ({"policy_timeout_s": deadline}, f"policy_timeout_s={deadline:g}"),
            ({"policy": "gpu-standin", "policy_options": options}, f"{path}={value}"),
        ]
        for j, (spec, named) in enumerate(cases):
            for how, args in (("resume", ["eval", "--resume", "RUN"]),
                              ("spec", ["eval", "--spec", "RUN/run.json", "--out", "DIR/new"])):  # fmt: skip
                r.case(f"r13-waits-{how}-{i}-{j}", _planter(spec), args, {2}, True, f"{named}: {SAID}")
    big = {"policy": "gpu-standin", "policy_options": {"inner": "zero", "latency_ms": 1e12}}
    r.case("r13-waits-trusted-latency", _planter(big, identity=True), ["eval", "--resume", "RUN", "--trust-run"], {2}, True,
           "latency_ms must be from 0 to 60000")  # fmt: skip


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    handed_over_waits(r, max(2, n // 4))
