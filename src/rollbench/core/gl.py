"""Offscreen OpenGL back-end selection for MuJoCo-based simulators (no display on evaluation machines).

MuJoCo reads ``MUJOCO_GL`` (and PyOpenGL reads ``PYOPENGL_PLATFORM``) once, when first imported, so
:func:`configure_offscreen_gl` must run before any simulator import; every MuJoCo adapter calls it first.
Choice: an explicit ``MUJOCO_GL`` wins (``egl``, ``osmesa`` or ``glfw``); otherwise EGL if ``libEGL`` is
installed (Debian: ``libegl1 libgl1-mesa-dri``), else OSMesa if ``libOSMesa`` is (``libosmesa6``).
Source of the variable names: MuJoCo's Python bindings docs, "Rendering" (``mujoco.gl_context``).
"""

from __future__ import annotations

import ctypes.util
import os

from rollbench.core.contracts import ConfigError

_BACKENDS = ("egl", "osmesa", "glfw")


def configure_offscreen_gl() -> str:
    """Set ``MUJOCO_GL``/``PYOPENGL_PLATFORM`` if unset and return the back-end in use.

    Raises ConfigError when ``MUJOCO_GL`` names an unknown back-end, or when neither EGL nor OSMesa is installed.
    """
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        if chosen not in _BACKENDS:
            raise ConfigError(f"MUJOCO_GL={chosen!r} is not one of {', '.join(_BACKENDS)}")
    elif ctypes.util.find_library("EGL"):
        chosen = "egl"
    elif ctypes.util.find_library("OSMesa"):
        chosen = "osmesa"
    else:
        raise ConfigError(
            "no offscreen OpenGL found: install EGL (apt-get install libegl1 libgl1-mesa-dri) "
            "or OSMesa (apt-get install libosmesa6), or set MUJOCO_GL"
        )
    os.environ["MUJOCO_GL"] = chosen
    if chosen in ("egl", "osmesa"):
        os.environ.setdefault("PYOPENGL_PLATFORM", chosen)
    return chosen
