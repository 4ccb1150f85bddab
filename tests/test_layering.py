"""The package layout's rules (docs/design.md, "Layers"): imports only go down the layers, and no import cycle exists
between modules or between packages. Computed from the source with the standard library's ``ast``: every ``import``
and ``from … import`` counts, at module level, inside functions and under ``TYPE_CHECKING`` alike."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top; a module may import its own package and any package of a strictly lower layer.
LAYERS: list[tuple[str, ...]] = [
    ("core",),
    ("wire", "record"),
    ("envs",),
    ("policies",),
    ("testing", "run", "grading"),
    ("api", "reproduce"),
    ("sequential",),
    ("checkpoints",),
    ("dashboard",),
    ("analysis", "release", "optimize", "serve", "mcp"),
    ("cli",),
    ("__main__", "__init__", "types", "registry"),  # types, registry: deprecated old paths (rollbench.core.public)
]
LAYER_OF = {pkg: i for i, pkgs in enumerate(LAYERS) for pkg in pkgs}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in (SRC / "rollbench").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The rollbench modules ``name`` imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            candidates = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for cand in candidates:
            # the deepest rollbench module the dotted name refers to
            while cand and cand not in mods:
                cand = cand.rpartition(".")[0]
            if cand and cand != name:
                found.add(cand)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))  # restored below: other tests depend on the default
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in _graph()}
    assert packages - set(LAYER_OF) == set()


def test_imports_only_go_down_the_layers() -> None:
    upward = [
        f"{m} -> {t}"
        for m, targets in _graph().items()
        for t in targets
        if _package(m) != _package(t) and LAYER_OF[_package(t)] >= LAYER_OF[_package(m)]
    ]
    assert upward == []


def test_no_module_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_no_package_import_cycle() -> None:
    by_package: dict[str, set[str]] = defaultdict(set)
    for m, targets in _graph().items():
        by_package[_package(m)] |= {_package(t) for t in targets if _package(t) != _package(m)}
    assert _cycles(by_package) == []


def test_no_module_over_400_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in (SRC / "rollbench").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}


MAX_PARAMETERS = 8  # more travel together in a typed record (issue 41, item 5)
# Parameter lists that are a user interface (docs/design.md, "Parameters"): the public ``rollbench.evaluate``
# (keyword arguments of the public API: changing them needs a deprecation) and the MCP tools (their arguments are the
# tool's published JSON schema). Typer commands (cli.main.COMMANDS) are exempt too: their parameters are the flags.
WIDE_BY_DESIGN = {
    ("rollbench.api", "evaluate"),
    ("rollbench.mcp.server", "_add_run_tool.<locals>.run_policy_rollout"),
    ("rollbench.mcp.sequential", "add_sequential_tool.<locals>.compare_policies_sequential"),
}


def _functions(node: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function under ``node`` with its ``__qualname__`` (methods and nested functions included)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((prefix + child.name, child))
            found += _functions(child, f"{prefix}{child.name}.<locals>.")
        elif isinstance(child, ast.ClassDef):
            found += _functions(child, f"{prefix}{child.name}.")
        else:
            found += _functions(child, prefix)
    return found


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Its parameters, ``*args`` and ``**kwargs`` included, ``self`` and ``cls`` not."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + [p.arg for p in (a.vararg, a.kwarg) if p]
    return len([n for n in names if n not in ("self", "cls")])


def test_no_function_takes_more_than_8_parameters_outside_the_user_interfaces() -> None:
    from rollbench.cli.main import COMMANDS

    commands = {(f.__module__, f.__qualname__) for _, f in COMMANDS}
    seen: set[tuple[str, str]] = set()
    wide = []
    for module, path in sorted(_modules().items()):
        for qualname, fn in _functions(ast.parse(path.read_text(), str(path))):
            seen.add((module, qualname))
            if (n := _parameters(fn)) > MAX_PARAMETERS and (module, qualname) not in commands | WIDE_BY_DESIGN:
                wide.append(f"{path.relative_to(SRC)}:{fn.lineno} {qualname} ({n} parameters)")
    assert wide == []
    assert WIDE_BY_DESIGN - seen == set()  # an exemption names a function that exists


MAX_FUNCTION_LINES = 80  # the standards' "no function over ~80 lines"


def test_no_function_is_over_80_lines_outside_the_typer_commands() -> None:
    """Lines from ``def`` to the last statement, docstring included. Typer commands are exempt: their signature is
    the option table (one ``Annotated`` declaration per flag)."""
    from rollbench.cli.main import COMMANDS

    commands = {(f.__module__, f.__qualname__) for _, f in COMMANDS}
    long = []
    for module, path in sorted(_modules().items()):
        for qualname, fn in _functions(ast.parse(path.read_text(), str(path))):
            lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if lines > MAX_FUNCTION_LINES and (module, qualname) not in commands:
                long.append(f"{path.relative_to(SRC)}:{fn.lineno} {qualname} ({lines} lines)")
    assert long == []


def test_import_rollbench_stays_light() -> None:
    """``import rollbench`` (and the CLI's module) pulls in no simulator, torch, ray, fastapi, duckdb or pyarrow."""
    heavy = ["mujoco", "metaworld", "robosuite", "torch", "ray", "fastapi", "duckdb", "pyarrow", "libero"]
    code = f"import sys, rollbench; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "[]"


@pytest.mark.parametrize("package", ["core", "wire", "record"])
def test_lowest_layers_import_no_heavy_dependency_at_module_level(package: str) -> None:
    """The bottom layers can be imported without a simulator or a web framework."""
    mods = sorted(m for m in _modules() if _package(m) == package)
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in mods)
    code += "print(sorted(m for m in ['mujoco', 'torch', 'ray', 'fastapi', 'uvicorn'] if m in sys.modules))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "[]"


def test_package_level_evaluate_and_grade_stay_functions_after_every_module_is_imported() -> None:
    """``rollbench.evaluate`` / ``rollbench.grade`` are functions even once every submodule has been imported (a
    subpackage named like them would replace them as attributes of the package)."""
    mods = sorted(m for m in _modules() if _package(m) in ("core", "grading", "record", "run", "api"))
    code = "import importlib, rollbench\n" + "".join(f"importlib.import_module({m!r})\n" for m in mods)
    code += "print(callable(rollbench.grade), callable(rollbench.evaluate))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "True True"
