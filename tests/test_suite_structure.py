"""The test suite's own rules (issue 29): shared helpers live in helper modules, so no test module imports another
test module (each can be run, moved or deleted alone); and every marker a test uses is one pyproject declares, so the
tiers (``-m "not sim and not ray and not browser and not venv and not slow"`` for the fast loop) mean what they say.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
BUILTIN_MARKS = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout", "anyio"}


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _marks_used(path: Path) -> set[str]:
    marks: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        # pytest.mark.NAME
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "pytest"
        ):
            marks.add(node.attr)
    return marks


@pytest.mark.slow
def test_no_test_module_imports_another_test_module() -> None:
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    offenders = {str(p.relative_to(TESTS)): sorted(_imported_modules(p) & test_modules) for p in TESTS.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_marker_used_is_declared_in_pyproject() -> None:
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())
    declared = {m.split(":")[0].strip() for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    used = {m for p in TESTS.rglob("*.py") for m in _marks_used(p)}
    assert used - BUILTIN_MARKS - declared == set()
