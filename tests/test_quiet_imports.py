"""robosuite's and gym's start-up notices are dropped when rollbench builds LIBERO/robosuite envs; nothing else is."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from rollbench.envs.libero.setup import libero_dir as libero_installed
from rollbench.envs.quiet import ROBOSUITE_LOGGER, silence_robosuite_notices


@pytest.mark.slow
def test_libero_start_up_prints_no_robosuite_or_gym_notice() -> None:
    if libero_installed() is None:  # found without importing it: its import writes ~/.libero/config.yaml
        pytest.skip("rpent-libero is not installed")
    code = (
        "from rollbench.envs.libero import setup as libero_setup\n"
        "libero_setup.prepare()\n"
        "from libero.libero.envs.env_wrapper import ControlEnv\n"
        "import robosuite, gym\n"
        "print('imported')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "imported\n"
    for noise in ("No private macro file", "robosuite_models", "mink-based", "Gym has been unmaintained", "NumPy 2.0"):
        assert noise not in r.stderr


def test_other_robosuite_log_records_still_reach_its_handlers(caplog: pytest.LogCaptureFixture) -> None:
    silence_robosuite_notices()
    silence_robosuite_notices()  # idempotent: one filter
    logger = logging.getLogger(ROBOSUITE_LOGGER)
    assert len(logger.filters) == 1
    with caplog.at_level(logging.INFO, logger=ROBOSUITE_LOGGER):
        logger.info("Loading controller configuration from: /x/robosuite/controllers/config/robots/default_panda.json")
        logger.warning("No private macro file found!")
        logger.warning("Could not import robosuite_models. Some robots may not be available.")
        logger.warning("Controller config not found: using defaults")
    assert [r.getMessage() for r in caplog.records] == ["Controller config not found: using defaults"]


@pytest.mark.slow
def test_fetch_drops_faramas_adroit_notice_and_only_it() -> None:
    """gymnasium_robotics prints Farama's Adroit reward notice on import (it reached MCP clients' stderr, issue 30
    item 22); rollbench's import drops exactly it. The oracle: a plain import in the same interpreter prints it."""
    pytest.importorskip("gymnasium_robotics")
    notice = "environment's reward functions were updated in v1.2.1"
    plain = subprocess.run(
        [sys.executable, "-c", "import gymnasium_robotics"], capture_output=True, text=True, timeout=300, check=False
    )
    if notice not in plain.stderr:
        pytest.skip("this gymnasium_robotics version prints no Farama notice")
    code = (
        "import sys\n"
        "from rollbench.envs.quiet import import_quietly\n"
        "import_quietly('gymnasium_robotics')\n"
        "import gymnasium_robotics\n"
        "print('imported', file=sys.stderr)\n"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert quiet.returncode == 0 and quiet.stderr == "imported\n", quiet.stderr
