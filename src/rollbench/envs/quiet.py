"""Start-up notices of third-party simulator packages that say nothing about a run, dropped precisely.

* robosuite logs, when imported (logger ``robosuite_logs``, WARNING): "No private macro file found!" (and two lines
  on how to make one), "Could not import robosuite_models" (extra robot models; rollbench's robosuite and LIBERO
  tasks use robosuite's own Panda) and "Could not load the mink-based whole-body IK" (the GR1 humanoid's
  controller, unused); and, at INFO, "Loading controller configuration from: PATH" at every env build
  (informational: the default Panda controller). A :class:`logging.Filter` on that logger drops these records only; every other robosuite
  record is shown as before.
* The legacy ``gym`` package (which LIBERO imports) prints a notice that it is unmaintained and does not support
  NumPy 2.0 (from ``gym_notices``) on stderr. rollbench never steps a ``gym`` env (LIBERO's ``ControlEnv`` is used
  directly); :func:`import_gym_quietly` imports it once with stderr captured, removes that exact notice and writes
  anything else back to stderr.
* ``gymnasium_robotics`` (the Fetch family, and gym tasks' plug-in import) prints, when imported, Farama's notice
  that three Adroit hand envs' rewards changed (``farama_notifications``; rollbench has no Adroit task) on stderr;
  :func:`import_quietly` imports it the same way, removing exactly that notice (it reached MCP clients' terminals).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import logging
import sys

ROBOSUITE_LOGGER = "robosuite_logs"
ROBOSUITE_NOTICES = (
    "No private macro file found!",
    "It is recommended to use a private macro file",
    "To setup, run: python ",
    "Could not import robosuite_models.",
    "Could not load the mink-based whole-body IK.",
    "Loading controller configuration from:",
)


class _DropRobosuiteNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(ROBOSUITE_NOTICES)


def silence_robosuite_notices() -> None:
    """Drop robosuite's start-up notices (above) from its logger; idempotent. Call before ``import robosuite``."""
    logger = logging.getLogger(ROBOSUITE_LOGGER)
    if not any(isinstance(f, _DropRobosuiteNotices) for f in logger.filters):
        logger.addFilter(_DropRobosuiteNotices())


def _import_without(module: str, notice: str | None) -> None:
    """Import ``module`` with stderr captured; write the captured text back without ``notice`` (its first copy)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            importlib.import_module(module)
    finally:
        text = captured.getvalue()
        if notice:
            text = text.replace(notice + "\n", "", 1)
        if text:
            sys.stderr.write(text)


def import_gym_quietly() -> None:
    """Import the legacy ``gym`` package (if installed and not yet imported) without its "unmaintained" notice;
    anything else written to stderr during the import is passed on."""
    if "gym" in sys.modules or importlib.util.find_spec("gym") is None:
        return
    try:
        from gym_notices.notices import notices

        notice = notices.get(importlib.metadata.version("gym"))
    except Exception:  # no notice known: nothing to drop
        notice = None
    _import_without("gym", notice)


def import_quietly(module: str) -> None:
    """Import ``module`` (if installed and not yet imported) without the start-up notice ``farama_notifications``
    holds for its installed version (``gymnasium_robotics``: the Adroit reward notice); anything else written to
    stderr during the import is passed on. Import errors propagate as from a plain import."""
    if module in sys.modules or importlib.util.find_spec(module) is None:
        return
    try:
        from farama_notifications import notifications

        notice = notifications.get(module, {}).get(importlib.metadata.version(module.replace("_", "-")))
    except Exception:  # no notice known: nothing to drop
        notice = None
    _import_without(module, notice)
