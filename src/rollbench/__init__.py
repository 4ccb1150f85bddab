"""rollbench: evaluate robot policies in simulation — N independently reset episodes, recorded as a LeRobot v3
dataset and graded from disk.

The Python API (see :mod:`rollbench.api`)::

    import rollbench
    result = rollbench.evaluate(env="scripted/reach", policy="scripted-expert", episodes=5, out="runs/x")
    again = rollbench.grade("runs/x")          # the same document, recomputed from the files

Both are loaded on first use (PEP 562 module ``__getattr__``), so ``import rollbench`` stays light: no simulator,
DuckDB or pyarrow import. The grading code itself is :mod:`rollbench.grading.grade`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollbench.api import Execution, evaluate, grade
    from rollbench.core.spec import EvalSpec

__all__ = ["EvalSpec", "Execution", "__version__", "evaluate", "grade"]

_LAZY = {
    "evaluate": "rollbench.api",
    "grade": "rollbench.api",
    "Execution": "rollbench.api",
    "EvalSpec": "rollbench.core.spec",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "__version__":
        from importlib.metadata import version

        return version("rollbench")
    raise AttributeError(f"module 'rollbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
