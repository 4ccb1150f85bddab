"""How a LIBERO scene is seeded and rendered: every random draw of a scene from the episode's seed, images on demand.

**Where a LIBERO scene's randomness comes from** (rpent-libero 0.2.0 on robosuite 1.5.2; read from the installed
sources):

* numpy's *global* generator: LIBERO's region samplers (``libero/libero/envs/regions/*``: ``np.random.uniform`` /
  ``randint``) place the fixtures (cabinet, stove, ...: written into ``model.body_pos``/``body_quat``, which the
  stored init state does not cover), the movable objects and the articulated objects' joints (``OpenCloseSampler``,
  ``TurnOnOffSampler``) on every ``env.reset()``. The stored init state then overwrites the joints, not the
  fixtures: unseeded, the cabinet and stove stand somewhere else in every process.
* the env's own generator ``env.rng`` (robosuite 1.5 ``MujocoEnv``; used for the robot's initialization noise,
  which LIBERO sets to none). LIBERO's ``ControlEnv.seed(seed)`` sets it to ``np.random.default_rng(seed)``: on
  robosuite 1.5 the env's ``seed`` is an attribute, so that method never reaches LIBERO's own ``seed`` (which would
  have seeded the global generator), and seeding the env alone leaves the scene random.
* robosuite's ``SequentialCompositeSampler`` gets a fresh OS-entropy generator, but only delegates to LIBERO's
  samplers (which use the global one); nothing else in a reset or a step draws random numbers (robosuite's
  observation noise and delays are off). Python's hash seed does not change a scene (tested across processes
  with different ``PYTHONHASHSEED``).

So :func:`seeded_reset` seeds both, numpy's global generator with ``np.random.seed(seed)`` and the env's with
``ControlEnv.seed(seed)``, immediately before ``env.reset()``, under a process-wide lock, and puts the global
generator's previous state back afterwards (nothing else in the process sees its draws change). The reference
client does the same draws from ``np.random.seed(7)`` once per process and ``env.seed(7)`` once per task (its
episodes then depend on the ones before); rollbench seeds every episode with its own planned seed, so an episode's
scene is a function of (task, seed) alone: the same in any process, worker, Ray actor, batch slot or resume.

**Soft resets**: LIBERO builds its env with ``hard_reset=True``: every ``reset()`` rebuilds the MuJoCo model from
XML and a new offscreen GL context (~5 s on a quiet 2-core machine). After an env's first (hard) reset rollbench
switches it to robosuite's soft reset (``sim.reset()``, i.e. ``mj_resetData``, then the same ``_reset_internal``
placement draws on the same compiled model): with the same seed the first observation (both images, the full
MuJoCo state, ``model.body_pos``/``body_quat`` of the fixtures, the solver's warm start) and the trajectory after it
are bit-identical to a hard reset's, also after another episode on the env (``tests/test_libero_scenes.py``), at a
fraction of the cost (``benchmarks/bench_libero.py``).

**Rendering on demand**: LIBERO's env is built without camera observations (``use_camera_obs=False``, the
offscreen renderer still built when a camera is needed), so a step renders nothing; :func:`render_camera` renders
one camera of the current state exactly as robosuite's camera observation does (``sim.render(camera_name, width,
height, depth=False)``, image convention ``opengl``: no flip), so the pixels equal those of a reference client
that renders every camera at every step (tested against such a loop in ``tests/test_libero_oracle.py``).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from rollbench.core.types import ConfigError

SCENE_SEEDING = (
    "per episode, immediately before env.reset(): np.random.seed(seed) (numpy's global generator, which LIBERO's "
    "placement samplers draw from) and ControlEnv.seed(seed) (the env's rng = np.random.default_rng(seed)), seed = "
    "the episode's planned seed; the global generator's state is restored after the reset"
)
"""run.json ``provenance.libero.scene_seeding``: how a scene is seeded (see the module docstring)."""

_GLOBAL_RNG = threading.Lock()


def seeded_reset(sim: Any, seed: int) -> Any:
    """``sim.reset()`` with every random draw of the scene taken from ``seed`` (see the module docstring).

    ``sim``: LIBERO's ``ControlEnv`` (``seed``, ``reset``). ``seed``: an int in ``[0, 2**32)`` (numpy's legacy
    seeding range), else ConfigError. Returns what ``sim.reset()`` returns. Numpy's global generator is left as it
    was before the call.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= int(seed) < 2**32:
        raise ConfigError(f"a LIBERO scene seed must be an integer in [0, 2**32), got {seed!r}")
    with _GLOBAL_RNG:
        saved = np.random.get_state()
        try:
            np.random.seed(int(seed))
            sim.seed(int(seed))
            return sim.reset()
        finally:
            np.random.set_state(saved)


def render_camera(sim: Any, camera: str, size: tuple[int, int], fast: bool = False) -> np.ndarray:
    """One camera of the current state, as robosuite's camera observation ``<camera>_image`` would hold it.

    ``sim``: LIBERO's ``ControlEnv``; ``size``: ``(height, width)`` in pixels; ``fast``: MuJoCo shadows and
    reflections off. Returns ``uint8 (H, W, 3)``, raw (upside down, as robosuite's ``opengl`` convention leaves it).
    """
    inner = sim.env.sim  # robosuite's MjSim
    if fast:
        import mujoco

        ctx = inner._render_context_offscreen
        ctx.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        ctx.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    h, w = size
    return np.asarray(inner.render(camera_name=camera, width=w, height=h, depth=False))


def soft_after_first(sim: Any) -> None:
    """Switch LIBERO's robosuite env under ``sim`` to soft resets (see the module docstring); call after the first
    reset. A sim without robosuite's ``hard_reset`` attribute (a test double) is left alone."""
    inner = getattr(sim, "env", None)
    if inner is not None and getattr(inner, "hard_reset", False):
        inner.hard_reset = False
