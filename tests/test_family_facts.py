"""Env families own their facts (docs/design.md, "The env family contract"): no family name is spelled outside
``rollbench.envs``, every fact rollbench needs is declared on :class:`rollbench.EnvFamily` with a default, and a
family that does not subclass it still gets the defaults."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from rollbench.core.contracts import ConfigError, Env, TaskInfo
from rollbench.core.family import ArmLayout, EnvFamily, EnvOptions, ServedLayout, adopt

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "rollbench"

# The family names, read from pyproject's entry points (not from rollbench's registry).
FAMILY_NAMES = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["rollbench.envs"])

# A string equal to a family name that is not the family: each entry says what it names instead.
NOT_A_FAMILY: dict[str, tuple[set[str], str]] = {
    "policies/lerobot/host.py": (
        {"pusht", "aloha", "libero"},
        "LeRobot's own env types (lerobot.envs.configs PushtEnv/AlohaEnv/LiberoEnv), in LeRobot's interpreter, "
        "which cannot import rollbench",
    ),
    "policies/lerobot/observe.py": (
        {"pusht", "aloha", "libero"},
        "LeRobot's env types whose observation features a LeRobot checkpoint expects (lerobot-eval's --env.type)",
    ),
    "reproduce/protocol.py": ({"robosuite"}, "the robosuite distribution, whose version a reference protocol pins"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _family_literals() -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("envs/"):
            continue
        allowed = NOT_A_FAMILY.get(rel, (set(), ""))[0]
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and node.value in FAMILY_NAMES - allowed
            ):
                out.append(f"{rel}:{node.lineno}: {node.value!r}")
    return out


@pytest.mark.slow
def test_no_family_name_is_spelled_as_a_string_outside_envs() -> None:
    assert {"scripted", "metaworld", "libero_ref", "liberoplus", "gym"} <= FAMILY_NAMES  # the oracle is read
    assert _family_literals() == []


def test_the_check_finds_a_family_name_spelled_in_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "record").mkdir()
    (tmp_path / "record" / "x.py").write_text('"""Doc naming libero."""\nRENDERERS = {"liberoplus": "mujoco"}\n')
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "y.py").write_text('NAME = "liberoplus"\n')
    monkeypatch.setattr(__import__(__name__), "SRC", tmp_path)
    assert _family_literals() == ["record/x.py:2: 'liberoplus'"]


class _DuckFamily:
    """A plug-in family written against the duck-typed contract (no EnvFamily subclass), with one hook of its own."""

    name = "duck"
    description = "a duck-typed family"

    def missing(self) -> str | None:
        return None

    def tasks(self) -> Sequence[TaskInfo]:
        return []

    def suites(self) -> Mapping[str, Sequence[str]]:
        return {}

    def task(self, name: str) -> TaskInfo:
        raise ConfigError(f"no task {name}")

    def make(self, task: TaskInfo, options: EnvOptions) -> Env:
        raise ConfigError("cannot build")

    def run_warnings(self, spec: object) -> list[str]:
        return ["duck warning"]


def test_a_family_that_does_not_subclass_envfamily_gets_the_declared_defaults_and_keeps_its_own_hooks() -> None:
    fam = adopt(_DuckFamily())
    assert EnvFamily in type(fam).__mro__ and fam.name == "duck"
    assert fam.run_warnings(None) == ["duck warning"]  # its own
    assert (fam.robot, fam.renderer, fam.offscreen_gl, fam.sim_packages, fam.arm) == ("unknown", None, False, (), None)
    assert fam.served == ServedLayout() and fam.provenance() is None and fam.variants() == ""
    assert fam.refuse_options(None, EnvOptions()) is None and fam.registered("duck/x") is False  # type: ignore[arg-type]
    assert fam.suites() == {} and fam.missing() is None
    with pytest.raises(ConfigError, match="no task duck/x"):
        fam.task("duck/x")


def test_every_installed_family_subclasses_envfamily_and_declares_its_facts_in_range() -> None:
    from rollbench.core.registry import env_families

    families = env_families()
    assert set(families) >= FAMILY_NAMES - {"hostedgym"}  # hostedgym: once this checkout's entry points are installed
    for name, fam in families.items():
        assert EnvFamily in type(fam).__mro__, name
        assert fam.name == name
        assert all(isinstance(k, str) and isinstance(d, str) for k, d in fam.sim_packages), name
        assert fam.arm is None or isinstance(fam.arm, ArmLayout), name
        assert fam.offscreen_gl == (fam.renderer is not None and fam.renderer.startswith("mujoco")), name
