"""Hostile round 13's JSON-reading classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``):

* F19: a value nested deeper than 64 (up to 200,000 levels), an integer of more than 4,300 digits, or a key named
  twice planted in ``run.json``, ``meta/info.json`` or ``meta/stats.json``: ``grade`` names the file in one line
  (exit 2 for run.json, a violation and exit 1 for a meta file), no traceback, the run unchanged;
* F20: ``serve-policy --obs-map FILE`` with a FILE that is not JSON, or a FIFO: the one line names ``--obs-map``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

FILES = ("run.json", "meta/info.json", "meta/stats.json")


def _payload(r: Any) -> tuple[str, str, str]:
    """(name, planted JSON text, the words grade must say), drawn from ``r.rng``."""
    kind = r.rng.choice(["deep", "digits", "twice"])
    if kind == "deep":
        n = r.rng.randrange(65, 200_000)
        return f"deep{n}", "[" * n + "]" * n, "nested too deeply: more than 64 levels"
    if kind == "digits":
        n = r.rng.randrange(4301, 20_000)
        return f"digits{n}", "7" * n, "a number of more than 4300 digits"
    return "twice", '1, "planted": 2', "an object names a key twice"


def planted_values(r: Any, n: int) -> None:
    for i in range(n):
        rel = r.rng.choice(FILES)
        name, text, words = _payload(r)

        def plant(run: Path, rel: str = rel, text: str = text) -> None:
            doc = (run / rel).read_text()
            at = doc.index("{") + 1
            (run / rel).write_text(doc[:at] + f'"planted": {text},' + doc[at:])

        cid = f"r13-{rel.replace('/', '-')}-{name}-{i}"
        r.case(cid, plant, ["grade", "RUN"], {2} if rel == "run.json" else {1}, True, words)


def obs_map_files(r: Any) -> None:
    def not_json(run: Path) -> None:
        (run / "obs.json").write_text(r.rng.choice(['{"x":', "[1, 2", "not json", '{"a": NaN}']))

    def fifo(run: Path) -> None:
        os.mkfifo(run / "obs.json")

    for cid, plant, words in (("r13-obs-map-not-json", not_json, "--obs-map"), ("r13-obs-map-fifo", fifo, "--obs-map")):
        r.case(cid, plant, ["serve-policy", "--policy", "zero", "--port", "0", "--obs-map", "RUN/obs.json"], {2}, False,
               words)  # fmt: skip


def run_all(r: Any, n: int) -> None:
    planted_values(r, max(3, n // 4))
    obs_map_files(r)
