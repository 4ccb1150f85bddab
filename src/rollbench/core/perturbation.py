"""A perturbed task's record (``TaskInfo.perturbation``): what a robustness study pairs and groups by.

Public as ``rollbench.Perturbation`` (:mod:`rollbench.core.public`); docs/robustness.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Perturbation:
    """What makes a task a perturbed instance of another, for robustness studies (``rollbench robustness``,
    docs/robustness.md). An env family sets it on ``TaskInfo.perturbation``; the planner records it per episode.

    Attributes:
        category: the perturbation's kind in the benchmark's terms, e.g. ``position``, ``language``, ``camera``.
        control: full name of the unperturbed task an episode of this one is paired with (same trial: same seed and
            initial-state index), or None when the benchmark names none (then the task cannot be paired).
        level: the magnitude of a graded perturbation (the benchmark's own number), else None.
        detail: a finer label (the suite, the added object, ...), shown but not grouped by.
        rule: how category, level and control were derived from the benchmark's files (recorded in run.json).
    """

    category: str
    control: str | None
    level: float | None = None
    detail: str = ""
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "level": self.level, "control": self.control, "detail": self.detail}
