"""run.json ``provenance``: the versions of what ran (LIBERO's distribution is rpent-libero) and the OpenGL back-end
the run rendered with (``gl``: ``MUJOCO_GL``, and ``PYOPENGL_PLATFORM`` when set)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from rollbench.api import evaluate
from rollbench.record.runlog import provenance


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
