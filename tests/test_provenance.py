"""run.json ``provenance``: the versions of what ran (LIBERO's distribution is rpent-libero) and the OpenGL back-end
the run rendered with (``gl``: ``MUJOCO_GL``, and ``PYOPENGL_PLATFORM`` when set)."""

from __future__ import annotations

import importlib.metadata
import json
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from rollbench.api import evaluate
from rollbench.core.family import EnvFamily, adopt
from rollbench.core.registry import env_family
from rollbench.record.runlog import provenance as provenance_of


def _family(name: str) -> EnvFamily:
    """The family ``name`` from the installed entry points, else from pyproject's (a checkout installed before the
    family was added)."""
    found = env_family(name)
    if found is None:
        value = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["rollbench.envs"][name]
        found = adopt(EntryPoint(name, value, "rollbench.envs").load())
    return found


def provenance(names: set[str]) -> dict:
    """run.json ``provenance`` for the families ``names`` (their declared facts)."""
    return provenance_of([_family(n) for n in sorted(names)])


def test_libero_version_is_rpent_libero_s_installed_version() -> None:
    pytest.importorskip("libero.libero")
    versions = provenance({"libero"})["versions"]
    assert versions["libero"] == importlib.metadata.version("rpent-libero") == "0.2.0"
    assert versions["mujoco"] == importlib.metadata.version("mujoco")


def test_run_json_records_the_gl_back_end_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "osmesa")
    evaluate(out=tmp_path / "run", env="scripted/reach", policy="zero", episodes=1, max_steps=2)
    log = json.loads((tmp_path / "run/run.json").read_text())
    assert log["provenance"]["gl"] == {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}


def test_gl_records_pyopengl_platform_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    assert provenance({"scripted"})["gl"] == {"MUJOCO_GL": "egl"}
    monkeypatch.delenv("MUJOCO_GL")
    assert provenance({"scripted"})["gl"] == {"MUJOCO_GL": None}  # not a MuJoCo family: nothing is chosen


def test_a_mujoco_family_records_the_back_end_rollbench_chooses_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from rollbench.core import gl

    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    monkeypatch.setattr(gl.ctypes.util, "find_library", lambda name: None if name == "EGL" else f"lib{name}.so")
    assert provenance({"metaworld"})["gl"] == {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}


# Every family's simulator packages, written out by hand from each adapter's imports (the oracle is this table and
# importlib.metadata, not the families' sim_packages): run.json must name each with its installed version.
FAMILY_PACKAGES = {
    "metaworld": {"metaworld": "metaworld", "mujoco": "mujoco"},
    "robosuite": {"robosuite": "robosuite", "mujoco": "mujoco"},
    "pusht": {"gym-pusht": "gym-pusht", "pymunk": "pymunk", "pygame": "pygame"},
    "fetch": {"gymnasium-robotics": "gymnasium-robotics", "mujoco": "mujoco"},
    "libero": {"libero": "rpent-libero", "robosuite": "robosuite", "bddl": "bddl", "mujoco": "mujoco"},
    "aloha": {"gym-aloha": "gym-aloha", "dm-control": "dm_control", "mujoco": "mujoco"},
    "gym": {},
    "scripted": {},
    # in their own interpreter: the far side's versions come from the family's provenance() hook (test_env_libero_ref)
    "libero_ref": {},
    "liberoplus": {},
    "hostedgym": {},  # the user's interpreter: its gymnasium and numpy versions by the provenance() hook
}
HOSTED = {"libero_ref", "liberoplus"}
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_every_registered_family_has_its_simulator_packages_listed() -> None:
    from rollbench.core.registry import env_families

    assert set(env_families()) <= set(FAMILY_PACKAGES), "a new env family needs its simulator packages here"


@pytest.mark.parametrize("family", sorted(FAMILY_PACKAGES))
def test_each_family_records_its_simulator_versions_and_gl(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "egl")
    prov = provenance({family})
    expected = {"rollbench", "numpy", "gymnasium", *FAMILY_PACKAGES[family]}
    assert set(prov["versions"]) == expected
    for key, dist in FAMILY_PACKAGES[family].items():
        assert prov["versions"][key] == _installed(dist), key
    assert prov["gl"]["MUJOCO_GL"] == "egl"
    mujoco = "mujoco" in FAMILY_PACKAGES[family]
    if family == "hostedgym":
        assert prov["renderers"][family] == "the env's own render() (rgb_array) in the user's interpreter"
    elif family != "gym":
        assert prov["renderers"][family] == (
            "mujoco (OpenGL, MUJOCO_GL) in the family's own interpreter"
            if family in HOSTED
            else "mujoco (OpenGL, MUJOCO_GL)"
            if mujoco
            else "pygame (software, no OpenGL)"
            if family == "pusht"
            else "none"
        )


@pytest.mark.sim
def test_an_aloha_run_records_gl_and_gym_aloha_dm_control_mujoco(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run the issue found with ``gl.MUJOCO_GL: null`` and no versions: a real gym-aloha episode of 2 steps."""
    pytest.importorskip("gym_aloha")
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    evaluate(out=tmp_path / "run", env="aloha/AlohaInsertion-v0", policy="zero", episodes=1, max_steps=2)
    prov = json.loads((tmp_path / "run/run.json").read_text())["provenance"]
    assert prov["gl"]["MUJOCO_GL"] in ("egl", "osmesa")
    for key, dist in FAMILY_PACKAGES["aloha"].items():
        assert prov["versions"][key] == _installed(dist) is not None, key
