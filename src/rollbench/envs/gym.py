"""The ``gym`` family: any registered gymnasium env whose ``info`` reports success, plus the shared gymnasium adapter.

Names: ``gym:<id>`` or ``gym/<id>``, e.g. ``gym:FetchReach-v4``, ``gym/gym_pusht/PushT-v0``,
``gym:gymnasium_robotics:FetchPush-v4`` (gymnasium's own ``module:id`` form imports ``module`` first). The task's
canonical name is ``gym/<id>`` because every task name is ``family/task`` (:class:`rollbench.core.contracts.TaskInfo`). An id
with a namespace (``gym_pusht/PushT-v0``) must be given as ``gym/<ns>/<id>`` on the command line:
``registry.family_of`` reads ``gym:gym_pusht/...`` as family ``gym:gym_pusht``. If
``<id>`` is not registered, the known plug-in packages ``gymnasium_robotics`` and ``gym_pusht`` are imported (each
registers its ids on import) and the id is looked up again.

What a ``gym`` task must offer (checked once by :meth:`GymFamily.task`, which builds the env, resets it with seed 0
and takes one step with the mid-range action; the result is cached per process):

* a flat ``Box`` action space ``(action_dim,)`` with finite bounds (else ConfigError);
* a ``Box`` or ``Dict``-of-``Box`` observation space; ``state`` is ``gymnasium.spaces.flatten`` of the observation as
  ``float32 (state_dim,)`` (``Dict`` keys in gymnasium's sorted order);
* ``info["is_success"]`` or ``info["success"]`` after a step: the success signal (any truthy number counts). An env
  reporting neither is a ConfigError naming the env and the keys it did report, raised by ``task()`` and again by
  ``step()`` should an env drop the key later. Success at reset is read from the same keys of the *reset* info
  (:meth:`GymnasiumEnv._success_at_reset`), so an env that starts solved is flagged ``success_at_reset``; an env
  whose reset info has neither key is taken as not successful at reset (gymnasium does not require reset info).

Horizon: the env's own ``spec.max_episode_steps`` (its TimeLimit), else 1000. Success rule ``any_step``. No
instruction (``has_instruction=False``). fps: ``metadata["render_fps"]``, else ``1 / env.dt``, else 10. Camera
``render`` (the env's ``render()`` in ``rgb_array`` mode) when the env supports ``rgb_array``; ``width``/``height``
are passed to ``gymnasium.make`` when the env accepts them (MuJoCo envs do), otherwise the frame is resized to
``options.image_size`` by nearest neighbour.

:class:`GymnasiumEnv` is the adapter the ``fetch`` and ``pusht`` families reuse, overriding ``_state``,
``_render_rgb`` and ``success``.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rollbench.core.call_thread import CallThread
from rollbench.core.contracts import ConfigError, EpisodeError, Observation, StepResult, TaskInfo, describe
from rollbench.core.env_timeout import TIMEOUT_ENV, env_timeout_s
from rollbench.core.family import EnvFamily, ServedLayout
from rollbench.core.registry import EnvOptions, unknown_name_error

DEFAULT_MAX_STEPS = 1000  # horizon when the env registers no max_episode_steps
SUCCESS_KEYS = ("is_success", "success")  # info keys read as the env's own success signal, in this order
PLUGIN_MODULES = ("gymnasium_robotics", "gym_pusht")  # imported to register their ids when an id is unknown
RENDER_CAMERA = "render"


def configure_gl_quietly(strict: bool = False) -> None:
    """Pick an offscreen GL back-end before any MuJoCo import.

    With ``strict=False`` a machine without GL can still build envs that do not render; with ``strict=True``
    (cameras requested) the ConfigError from :func:`rollbench.core.gl.configure_offscreen_gl` propagates.
    """
    from rollbench.core.gl import configure_offscreen_gl

    try:
        configure_offscreen_gl()
    except ConfigError:
        if strict:
            raise


def resize_nearest(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``uint8 (h, w, 3)`` -> ``uint8 (H, W, 3)`` for ``size = (H, W)`` by nearest neighbour (no new dependency)."""
    h, w = size
    if img.shape[:2] == (h, w):
        return img
    rows = (np.arange(h) * img.shape[0] // h).clip(0, img.shape[0] - 1)
    cols = (np.arange(w) * img.shape[1] // w).clip(0, img.shape[1] - 1)
    return img[rows][:, cols]


def scalar_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar (bool/int/float) entries of a gymnasium ``info`` dict, as plain Python values."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, bool | int | float | np.bool_ | np.integer | np.floating) or (
            isinstance(v, np.ndarray) and v.shape == ()
        ):
            out[str(k)] = np.asarray(v).item()
    return out


def _success_flag(env_id: str, key: str, value: Any) -> bool:
    """``value`` as a success flag: a bool, or the number 0 or 1 (a 0-d array of one); anything else ("False",
    "0", NaN, -1, 0.5, an array of several values, an object) is an environment error naming it, never truthiness
    (``bool("False")`` is True) and never its ``__bool__`` (which may raise)."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "biuf":
        value = value.item()
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.integer | np.floating) and value in (0, 1):
        return bool(value == 1)
    shown = repr(value)[:60] if isinstance(value, str | int | float | np.generic) else f"a {type(value).__name__}"
    raise EpisodeError(
        f"gymnasium env {env_id!r}: its step info {key!r} is {shown}, not a success flag (true/false or 0/1)",
        "environment",
    )


def success_from_info(env_id: str, info: Mapping[str, Any]) -> bool:
    """``info["is_success"]`` or ``info["success"]`` as a bool (:func:`_success_flag`: EpisodeError, fault
    environment, for a value that is not a flag); ConfigError naming the keys reported when it has neither."""
    for key in SUCCESS_KEYS:
        if key in info:
            return _success_flag(env_id, key, info[key])
    raise ConfigError(
        f"gymnasium env {env_id!r} reports no success signal: its step info has neither 'is_success' nor "
        f"'success' (it reported {sorted(map(str, info)) or 'no keys'}); rollbench needs one of them to grade"
    )


class GymnasiumEnv:
    """:class:`rollbench.core.contracts.Env` over a gymnasium env built by ``factory(**render_kwargs)``.

    ``state``: ``float32 (state_dim,)`` from :meth:`_state`; ``images`` are filled by the episode loop via
    :meth:`render`. ``raw`` is the native gymnasium observation.
    """

    def __init__(
        self,
        task: TaskInfo,
        options: EnvOptions,
        env_id: str,
        factory: Callable[..., Any],
        render_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.task = task
        self.env_id = env_id
        self.image_size = options.image_size
        self.cameras = tuple(options.cameras)
        for cam in self.cameras:
            if cam not in task.cameras:
                raise ConfigError(f"{task.name} has no camera {cam!r}; its cameras: {list(task.cameras)}")
        self.env = factory(**(render_kwargs or {})) if self.cameras else factory()
        self._success = False
        self._last_obs: Any = None

    # hooks -----------------------------------------------------------------------------------------------
    def _state(self, obs: Any) -> np.ndarray:
        from gymnasium import spaces

        return np.asarray(spaces.flatten(self.env.observation_space, obs), dtype=np.float32)

    def _success_from(self, info: Mapping[str, Any]) -> bool:
        return success_from_info(self.env_id, info)

    def _success_at_reset(self, info: Mapping[str, Any]) -> bool:
        """Success right after reset, from the reset info's success key (the step source); False without one.

        Families with their own success check (``fetch``, ``pusht``) override :meth:`success` instead."""
        return self._success_from(info) if any(k in info for k in SUCCESS_KEYS) else False

    def _render_rgb(self) -> np.ndarray:
        return np.asarray(self.env.render())

    # Env protocol ----------------------------------------------------------------------------------------
    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if initial_state is not None:
            raise ConfigError(f"{self.task.name} has no stored initial states (got initial_state={initial_state})")
        obs, info = self.env.reset(seed=int(seed))
        self._success = self._success_at_reset(info)
        self._last_obs = obs
        return Observation(state=self._state(obs), raw=obs)

    def step(self, action: np.ndarray) -> StepResult:
        dtype = getattr(self.env.action_space, "dtype", np.float32)
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(action, dtype=dtype))
        self._last_obs = obs
        self._success = self._success_from(info)
        return StepResult(
            Observation(state=self._state(obs), raw=obs),
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
            success=self._success,
            info=scalar_info(info),
        )

    def success(self) -> bool:
        return self._success

    def render(self, camera: str) -> np.ndarray:
        if camera not in self.task.cameras:
            raise ValueError(f"unknown camera {camera!r}; {self.task.name} has {self.task.cameras}")
        if camera not in self.cameras:
            raise ValueError(f"camera {camera!r} was not requested when {self.task.name} was built (EnvOptions)")
        img = self._render_rgb()
        if img.ndim != 3 or img.shape[2] < 3:
            raise RuntimeError(f"{self.task.name}: render returned shape {img.shape}, expected (H, W, 3)")
        return np.ascontiguousarray(resize_nearest(img[..., :3], self.image_size), dtype=np.uint8)

    def close(self) -> None:
        self.env.close()


# the gym family ----------------------------------------------------------------------------------------------
def gym_id(name: str) -> str:
    """``gym:<id>`` or ``gym/<id>`` -> ``<id>``; ConfigError otherwise."""
    for prefix in ("gym:", "gym/"):
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    raise ConfigError(f"{name!r} is not a gym task; write gym:<gymnasium id>, e.g. gym:FetchReach-v4")


def _make_factory(env_id: str, size: tuple[int, int] | None = None) -> Callable[..., Any]:
    import gymnasium

    def factory(**kwargs: Any) -> Any:
        if "render_mode" in kwargs and size is not None:
            try:
                return gymnasium.make(env_id, width=size[1], height=size[0], **kwargs)
            except TypeError:  # the env takes no width/height: render at its own size, resize afterwards
                pass
        return gymnasium.make(env_id, **kwargs)

    return factory


def _register_plugins(env_id: str) -> None:
    import gymnasium

    base = env_id.split(":", 1)[1] if ":" in env_id else env_id
    if ":" in env_id or base in gymnasium.registry:
        return
    from rollbench.envs.quiet import import_quietly

    for mod in PLUGIN_MODULES:
        try:
            import_quietly(mod)
        except ImportError:
            continue


def _probe_within(env_id: str) -> TaskInfo:
    """:func:`_probe` on a helper thread, waiting at most the env deadline (``env_timeout_s``): an env whose
    constructor, reset, step or close never returns is a ConfigError naming that call, before the run."""
    timeout_s = env_timeout_s()
    doing = ["gymnasium.make"]
    thread = CallThread("rollbench-env-probe")
    try:
        info: TaskInfo = thread.call(timeout_s, _probe, env_id, doing)
        return info
    except queue.Empty:
        raise ConfigError(
            f"gymnasium env {env_id!r}: its {doing[0]} did not return within the env deadline of {timeout_s:g} s "
            f"(${TIMEOUT_ENV}) while rollbench checked the env before the run"
        ) from None
    finally:
        thread.stop()


def _probe(env_id: str, doing: list[str]) -> TaskInfo:
    """Build ``env_id`` once, check its spaces and success key, and describe it as a TaskInfo; ``doing[0]`` names
    the env's call under way."""
    configure_gl_quietly()
    import gymnasium
    from gymnasium import spaces

    _register_plugins(env_id)
    try:
        env = gymnasium.make(env_id)
    except gymnasium.error.Error as exc:
        raise unknown_name_error("gymnasium env id", env_id, sorted(gymnasium.registry)) from exc
    except ImportError as exc:  # ``module:ID``: the module (or something it imports) is missing
        raise ConfigError(f"gymnasium env {env_id!r} cannot be imported: {exc}") from None
    except Exception as exc:  # the env's own constructor failed
        raise ConfigError(f"gymnasium env {env_id!r} failed to build: {type(exc).__name__}: {exc}") from None
    try:
        act = env.action_space
        if not isinstance(act, spaces.Box) or len(act.shape) != 1:
            raise ConfigError(f"gymnasium env {env_id!r} has action space {act}; rollbench needs a flat Box")
        low, high = np.asarray(act.low, dtype=np.float64), np.asarray(act.high, dtype=np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ConfigError(f"gymnasium env {env_id!r} has unbounded actions {act}; rollbench needs finite bounds")
        obs_space = env.observation_space
        boxes = obs_space.spaces.values() if isinstance(obs_space, spaces.Dict) else [obs_space]
        if not all(isinstance(b, spaces.Box) for b in boxes):
            raise ConfigError(f"gymnasium env {env_id!r} has observation space {obs_space}; need Box or Dict of Box")
        try:
            doing[0] = "reset()"
            env.reset(seed=0)
            doing[0] = "step()"
            _obs, _r, _te, _tr, info = env.step(((low + high) / 2).astype(act.dtype))
        except Exception as exc:  # the env's own code (or gymnasium's checks of what it returned) raised
            raise ConfigError(f"gymnasium env {env_id!r}: its {doing[0]} raised {describe(exc)}") from None
        try:
            success_from_info(env_id, info)  # raises ConfigError naming the keys it did report
        except EpisodeError as exc:
            raise ConfigError(str(exc)) from None
        except (ConfigError, KeyboardInterrupt):
            raise
        except Exception as exc:  # an info mapping whose reading raises (hostile round 11, F11)
            raise ConfigError(f"gymnasium env {env_id!r}: reading its step info raised {describe(exc)}") from None
        spec = env.spec
        fps = env.metadata.get("render_fps") or (1.0 / env.unwrapped.dt if hasattr(env.unwrapped, "dt") else 10)
        return TaskInfo(
            name=f"gym/{env_id}",
            instruction="",
            has_instruction=False,
            max_steps=int(spec.max_episode_steps) if spec and spec.max_episode_steps else DEFAULT_MAX_STEPS,
            cameras=(RENDER_CAMERA,) if "rgb_array" in env.metadata.get("render_modes", ()) else (),
            success_rule="any_step",
            action_dim=int(act.shape[0]),
            state_dim=int(spaces.flatdim(obs_space)),
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
            fps=max(1, round(float(fps))),
            source=f"gymnasium registry entry {env_id!r} (spaces, TimeLimit, render_fps); success from step info",
        )
    finally:
        doing[0] = "close()"
        env.close()


class GymFamily(EnvFamily):
    name = "gym"
    inline = False  # runs a user's module: every env call has the env deadline (EnvFamily.inline)
    robot = "unknown"  # any gymnasium env: no one embodiment
    served = ServedLayout(main_camera=RENDER_CAMERA)
    description = (
        "any registered gymnasium env whose step info reports is_success or success: --env gym:<id> "
        "(or gym:MODULE:<id>), named gym/<id> in results"
    )

    def __init__(self) -> None:
        self._cache: dict[str, TaskInfo] = {}

    def missing(self) -> str | None:
        return None  # gymnasium is a core dependency

    def tasks(self) -> Sequence[TaskInfo]:
        return list(self._cache.values())  # ids are open-ended: only those already looked up in this process

    def suites(self) -> Mapping[str, Sequence[str]]:
        return {}

    def registered(self, name: str) -> bool:
        """ConfigError unless ``name`` is a gymnasium id already registered in this process, without a
        ``module:`` part: the check for names received over a wire (:func:`rollbench.core.registry.check_remote_name`),
        which never imports a module (no ``module:ID``, no plug-in import)."""
        env_id = gym_id(name)
        if ":" in env_id:
            raise ConfigError(
                f"{name!r} names a module to import (gymnasium's module:ID form); that is a local command-line "
                "feature only: a task received over the network must be one already registered"
            )
        import gymnasium

        if env_id not in gymnasium.registry:
            raise ConfigError(
                f"gymnasium env {env_id!r} is not registered in this process; a task received over the network must "
                "be one of the installed families' tasks or an already registered gymnasium id (see `rollbench envs`)"
            )
        return True

    def names_code(self, name: str) -> bool:
        """``gym:MODULE:ID`` imports MODULE."""
        return ":" in gym_id(name)

    def task(self, name: str) -> TaskInfo:
        env_id = gym_id(name)
        if env_id not in self._cache:
            self._cache[env_id] = _probe_within(env_id)
        return self._cache[env_id]

    def make(self, task: TaskInfo, options: EnvOptions) -> GymnasiumEnv:
        env_id = gym_id(task.name)
        configure_gl_quietly(strict=bool(options.cameras))
        _register_plugins(env_id)
        return GymnasiumEnv(
            task,
            options,
            env_id,
            _make_factory(env_id, options.image_size),
            render_kwargs={"render_mode": "rgb_array"},
        )


FAMILY = GymFamily()
