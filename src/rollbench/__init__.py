"""rollbench: evaluate robot policies in simulation — N independently reset episodes, recorded as a LeRobot v3
dataset and graded from disk.

The Python API (see :mod:`rollbench.api`)::

    import rollbench
    result = rollbench.evaluate(env="scripted/reach", policy="scripted-expert", episodes=5, out="runs/x")
    again = rollbench.grade("runs/x")          # the same document, recomputed from the files

Both are loaded on first use (PEP 562 module ``__getattr__``), so ``import rollbench`` stays light: no simulator,
DuckDB or pyarrow import. ``rollbench.grade`` is also the name of the grading submodule; the package serves that
submodule made callable (``rollbench.grade(run_dir)`` calls :func:`rollbench.api.grade`), so both
``rollbench.grade(run_dir)`` and ``rollbench.grade.wilson_interval`` work whatever was imported first.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollbench.api import Execution, evaluate, grade
    from rollbench.spec import EvalSpec

__all__ = ["EvalSpec", "Execution", "__version__", "evaluate", "grade"]

_LAZY = {"evaluate": "rollbench.api", "Execution": "rollbench.api", "EvalSpec": "rollbench.spec"}


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


class _CallableGradeModule(types.ModuleType):
    """The ``rollbench.grade`` submodule, callable as :func:`rollbench.api.grade`."""

    def __call__(self, run_dir: str | Path, *, check_videos: bool = True) -> dict[str, Any]:
        from rollbench.api import grade as grade_run

        return grade_run(run_dir, check_videos=check_videos)


class _Package(types.ModuleType):
    @property
    def grade(self) -> Any:
        module = importlib.import_module("rollbench.grade")
        if not isinstance(module, _CallableGradeModule):
            module.__class__ = _CallableGradeModule
        return module

    @grade.setter
    def grade(self, value: Any) -> None:
        """The import system binds the submodule here after loading it; the getter serves it (made callable)."""


if not TYPE_CHECKING:
    sys.modules[__name__].__class__ = _Package
