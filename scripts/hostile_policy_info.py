"""Hostile round 12's input classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F4/F6: a plug-in policy whose ``PolicyInfo`` field has the wrong type or is out of bounds (``chunk_size`` -1, "3",
  True, NaN; ``replan_every`` 0; ``tasks`` a string; ``image_sizes`` odd or text; ``provenance`` not JSON): exit 2,
  one line naming the field, no run directory;
* F3: ``compare --power`` with an option only a comparison of runs reads: exit 2, one line naming it;
* F8: an ``--instruction`` that is not UTF-8: exit 2, named as text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PLANTED = """\
import os
import numpy as np
from rollbench import PolicyInfo
FIELDS = eval(os.environ["RBH12_FIELDS"], {"np": np, "nan": float("nan"), "inf": float("inf")})
class P:
    info = PolicyInfo(**{"name": "rbh12", "tasks": ("scripted/*",), **FIELDS})
    def reset(self, task, seed): pass
    def act(self, obs, instruction): return np.zeros((1, 2), np.float32)
    def close(self): pass
def make(name, options): return P()
"""

RUN_ONLY = [["--sequential"], ["--unpaired"], ["--seed", "1"], ["--resamples", "500"], ["--min-coverage", "0.5"],
            ["--exclude-policy-errors"], ["--allow-damaged"]]  # fmt: skip


def _nothing(run: Path) -> None:
    pass


def _bad_fields(rng: Any) -> list[tuple[str, str]]:
    """(field, a Python expression of a value that field must refuse), drawn from ``rng``."""
    k = rng.randrange(2, 64)
    pools = {
        "chunk_size": [str(-k), "0", str(1000 + k), f"{k}.5", f"'{k}'", "True", "None", "nan", "inf", f"np.int64({k})"],
        "replan_every": ["0", str(-k), "False", f"'{k}'", f"{k}.0", "10**7"],
        "needs_images": ["'yes'", "1", "None"],
        "tasks": ["'scripted/*'", "None", "('scripted/*', 1)", "b'scripted/*'"],
        "image_sizes": ["{'scripted': 'x'}", f"{{'scripted': ({2 * k + 1}, 32)}}", "{'scripted': (8, 8)}",
                        "{'scripted': (32,)}", "{1: (32, 32)}", "{'scripted': (True, 32)}", "[('scripted', (32, 32))]"],
        "provenance": ["'notadict'", "{'k': object()}", "{'k': nan}", "{1: 'x'}", "{'k': b'x'}", "{'k': {1, 2}}",
                       "{'k': 'x' * 2_000_000}"],
        "warnings": ["None", "'one warning'"],
    }  # fmt: skip
    return [(field, rng.choice(values)) for field, values in pools.items()]


def policy_info_fields(r: Any, n: int) -> None:
    (r.planted / "rbh12_pinfo.py").write_text(PLANTED)
    for i in range(n):
        for field, value in _bad_fields(r.rng):
            r.env = {**r.env, "RBH12_FIELDS": f"{{{field!r}: {value}}}"}
            r.case(f"r12-policy-info-{field}-{i}", _nothing,
                   ["eval", "--env", "scripted/reach", "--policy", "rbh12_pinfo:make", "--episodes", "1",
                    "--max-steps", "3", "--out", "DIR/new"], {2}, True, f"its PolicyInfo {field}=")  # fmt: skip
            if (r.work / "cases" / f"r12-policy-info-{field}-{i}" / "new").exists():
                r.failures.append(f"r12-policy-info-{field}-{i}: a run directory was made for a refused policy")


def power_with_run_options(r: Any, n: int) -> None:
    for i in range(n):
        extra = [a for flags in r.rng.sample(RUN_ONLY, r.rng.randrange(1, 4)) for a in flags]
        r.case(f"r12-power-run-option-{i}", _nothing, ["compare", "--power", "--p-a", "0.5", "--p-b", "0.7", *extra],
               {2}, True, "to a comparison of runs; --power plans one")  # fmt: skip


def instruction_not_utf8(r: Any, n: int) -> None:
    for i in range(n):
        raw = bytes(r.rng.choice([0xFF, 0xFE, 0xC0, 0xED]) for _ in range(r.rng.randrange(1, 4)))
        text = os.fsdecode(b"go " + raw + b" now")
        form = ["--instruction", text] if i % 2 else [f"--instruction={text}"]
        r.case(f"r12-instruction-utf8-{i}", _nothing,
               ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", "DIR/new", *form],
               {2}, True, "--instruction: not valid UTF-8 text")  # fmt: skip


def run_all(r: Any, n: int) -> None:
    policy_info_fields(r, max(1, n // 4))
    power_with_run_options(r, max(2, n // 2))
    instruction_not_utf8(r, max(2, n // 2))
