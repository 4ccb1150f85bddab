"""How a rollbench :class:`~rollbench.core.contracts.Observation` travels to a policy server, per env family.

An :class:`ObsMap` says which wire key each rendered camera gets, where the state and the instruction go, which
state is sent and whether images are resized first. The websocket client builds an openpi-style flat dict
(``{"observation/image": uint8 (H, W, 3), "observation/state": (D,), "prompt": str}``, the layout of openpi's
LIBERO and DROID examples, ``examples/libero/main.py``); the HTTP client puts images under ``images`` and uses
its own fixed ``state`` and ``instruction`` fields (see :mod:`rollbench.policies.remote.http`).

Defaults: each env family declares its layout (``EnvFamily.served``, a
:class:`~rollbench.core.family.ServedLayout`): the camera sent as ``observation/image``, the one sent as
``observation/wrist_image``, the state source and the resize. As declared today (websocket keys; HTTP uses the
camera names themselves unless ``images`` is overridden):

* MetaWorld: ``corner`` -> ``observation/image``, ``gripperPOV`` -> ``observation/wrist_image``; state ``raw``
  (MetaWorld's ``float64 (39,)`` observation).
* robosuite, LIBERO (on every stack: in-process, its reference stack, LIBERO-Plus): ``agentview`` ->
  ``observation/image``, ``robot0_eye_in_hand`` -> ``observation/wrist_image`` (openpi's LIBERO keys); state
  ``state``. For LIBERO that is exactly what openpi's LIBERO client sends (``examples/libero/main.py``): both
  cameras (a LIBERO task's ``policy_cameras``, rendered on the steps the policy is asked for a chunk), rotated 180°
  by the env, resized with padding to 224 × 224 (``image_size``), state ``float64 (8,)`` (the env's own dtype, as
  openpi sends it) = eef position, eef axis-angle, gripper qpos; prompt = the task's language. So an openpi
  π0/π0.5 LIBERO server needs no options.
* the scripted family and PushT: ``top``; Fetch: ``external``; any gymnasium env: ``render`` ->
  ``observation/image``; state ``state``. A family that declares nothing: no camera map, state ``state``.

Every family: state key ``observation/state``, prompt key ``prompt``, no resize (images are sent at the run's
``--image-size``, 224×224 by default, as openpi's examples send them) except where a family declares a resize (LIBERO: with pad to 224). Only cameras the run renders are sent (the
task's first camera unless ``--cameras`` names more); a rendered camera missing from ``images`` is sent under
``observation/images/<camera>``.

State: ``state`` sends ``observation.state`` (``(state_dim,)`` in the env's own dtype); ``raw`` sends the
simulator's native observation when it is a numeric array (MetaWorld: the ``float64 (39,)`` vector its scripted experts read), else
``observation.state``. MetaWorld defaults to ``raw`` so a policy served remotely sees exactly what it would see
in process (a ``float32`` round trip changes the experts' actions in the last bits, and trajectories drift).

Override with ``--policy-options '{"obs_map": {...}}'`` (or a JSON file path): keys ``images`` (replaces the
whole camera map), ``state_key``, ``prompt_key``, ``state_source`` (``state``/``raw``), ``image_size``
(``[H, W]``: resized with padding by ``openpi_client.image_tools.resize_with_pad``, as openpi clients do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.bounds import MAX_CHUNK_SIZE, MAX_REPLAN_EVERY, image_side_ok
from rollbench.core.contracts import ConfigError, EpisodeError, Observation, TaskInfo
from rollbench.core.family import ServedLayout
from rollbench.core.jsonfile import parse_json, read_text
from rollbench.core.records import JsonRecord
from rollbench.wire.decode import ProtocolError, described

STATE_SOURCES = ("state", "raw")
OVERRIDE_KEYS = ("images", "state_key", "prompt_key", "state_source", "image_size")
UNMAPPED_PREFIX = "observation/images/"
_MAIN, _WRIST = "observation/image", "observation/wrist_image"


@dataclass(frozen=True)
class ObsMap(JsonRecord):
    """Wire layout of an observation. See the module docstring for the meaning of each field and the defaults."""

    images: Mapping[str, str] = field(default_factory=dict)
    state_key: str = "observation/state"
    prompt_key: str = "prompt"
    state_source: str = "state"
    image_size: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON types: the image map a plain dict, the image size a list (or None)."""
        d = super().to_dict()
        d["images"] = dict(self.images)
        d["image_size"] = list(self.image_size) if self.image_size else None
        return d

    def image_key(self, camera: str) -> str:
        return self.images.get(camera, UNMAPPED_PREFIX + camera)

    def camera_of(self, key: str) -> str | None:
        """The camera a wire image key belongs to, or None when ``key`` is not an image key."""
        for cam, k in self.images.items():
            if k == key:
                return cam
        return key[len(UNMAPPED_PREFIX) :] if key.startswith(UNMAPPED_PREFIX) else None

    def state_of(self, observation: Observation) -> np.ndarray:
        """The state vector to send: see ``state_source``."""
        raw = observation.raw
        if self.state_source == "raw" and isinstance(raw, np.ndarray) and raw.dtype.kind in "fiu":
            return np.ascontiguousarray(raw)
        return np.ascontiguousarray(observation.state)

    def images_of(self, observation: Observation) -> dict[str, np.ndarray]:
        """Wire key -> ``uint8 (H, W, 3)`` for every rendered camera, resized when ``image_size`` is set."""
        out = {}
        for cam, img in observation.images.items():
            arr = np.ascontiguousarray(img)
            if self.image_size is not None and arr.shape[:2] != self.image_size:
                from openpi_client.image_tools import resize_with_pad

                arr = np.ascontiguousarray(resize_with_pad(arr, *self.image_size))
            out[self.image_key(cam)] = arr
        return out


def default_obs_map(served: ServedLayout, protocol: str = "ws") -> ObsMap:
    """The default for a family that declares ``served`` (its ``EnvFamily.served``: main and wrist cameras, state
    source, resize) and ``ws``/``http``: websocket keys ``observation/image`` and ``observation/wrist_image``; HTTP
    the camera names themselves."""
    cams = {cam: key for cam, key in ((served.main_camera, _MAIN), (served.wrist_camera, _WRIST)) if cam is not None}
    images = {cam: cam for cam in cams} if protocol == "http" else cams
    return ObsMap(images=images, state_source=served.state_source, image_size=served.image_size)


def check_overrides(overrides: Any) -> dict[str, Any]:
    """Validate a user's ``obs_map`` override; raise ConfigError naming the valid keys and values."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"policy option obs_map must be a JSON object with keys {', '.join(OVERRIDE_KEYS)}")
    bad = sorted(set(overrides) - set(OVERRIDE_KEYS))
    if bad:
        raise ConfigError(f"unknown obs_map key(s) {bad}; valid keys: {', '.join(OVERRIDE_KEYS)}")
    out = dict(overrides)
    if "images" in out:
        imgs = out["images"]
        if not isinstance(imgs, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in imgs.items()):
            raise ConfigError('obs_map.images must map camera names to wire keys, e.g. {"corner": "observation/image"}')
        out["images"] = dict(imgs)
    for key in ("state_key", "prompt_key"):
        if key in out and (not isinstance(out[key], str) or not out[key]):
            raise ConfigError(f"obs_map.{key} must be a non-empty string, got {out[key]!r}")
    if "state_source" in out and out["state_source"] not in STATE_SOURCES:
        raise ConfigError(
            f"obs_map.state_source must be one of {', '.join(STATE_SOURCES)}, got {out['state_source']!r}"
        )
    if out.get("image_size") is not None:
        size = out["image_size"]
        if (
            not isinstance(size, list | tuple)
            or len(size) != 2
            or not all(isinstance(v, int) and 1 <= v <= 4096 for v in size)
        ):
            raise ConfigError(f"obs_map.image_size must be [height, width] in pixels, got {size!r}")
        out["image_size"] = (int(size[0]), int(size[1]))
    return out


def resolve_obs_map(served: ServedLayout, protocol: str, overrides: Mapping[str, Any] | None) -> ObsMap:
    """The family's default (its declared ``served`` layout) for ``protocol`` with validated ``overrides`` applied
    (``images`` replaces the map)."""
    return replace(default_obs_map(served, protocol), **check_overrides(overrides))


def check_options(options: Mapping[str, Any], valid: Mapping[str, type | tuple[type, ...]]) -> None:
    """Raise ConfigError for unknown policy options or values of the wrong type; ``valid``: name -> type(s)."""
    bad = sorted(set(options) - set(valid))
    if bad:
        raise ConfigError(f"unknown policy option(s) {bad}; valid options: {', '.join(valid)}")
    for key, kind in valid.items():
        if key in options and options[key] is not None and not isinstance(options[key], kind):
            raise ConfigError(f"policy option {key} has the wrong type: {options[key]!r}")


MAX_WAIT_S = 86_400.0
"""The largest deadline or wait a policy option may set, in seconds (a day, as ``--policy-timeout``'s maximum)."""
MAX_RETRIES = 100
"""The most retries a policy option may ask for (each one waits and calls again)."""


def positive(options: Mapping[str, Any], key: str, default: float, maximum: float = MAX_WAIT_S) -> float:
    """A positive finite number option (seconds, counts) at most ``maximum``, else ConfigError."""
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
        raise ConfigError(f"policy option {key} must be a positive number at most {maximum:g}, got {value!r}")
    return float(value)


def retries(options: Mapping[str, Any], default: int) -> int:
    """The ``retries`` option: an integer from 0 to :data:`MAX_RETRIES`, else ConfigError."""
    value = options.get("retries", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise ConfigError(f"policy option retries must be an integer from 0 to {MAX_RETRIES}, got {value!r}")
    return value


def load_policy_options(value: str | None, option: str = "--policy-options") -> dict[str, Any]:
    """Parse ``--policy-options`` (or another option taking the same form, named by ``option`` in every error, e.g.
    ``--obs-map``): a JSON object, or the path of a file holding one. Raises ConfigError."""
    if value is None or not value.strip():
        return {}
    what = option
    text = value
    if not value.lstrip().startswith("{"):
        path = Path(value).expanduser()
        if not (path.exists() or path.is_symlink()):
            raise ConfigError(f"{option} {value!r} is neither a JSON object nor an existing file")
        text, what = read_text(path, what), f"{option} {path}"
    parsed = parse_json(text, what, finite=True)
    if not isinstance(parsed, dict):
        raise ConfigError(f"{option} must be a JSON object, got {type(parsed).__name__}")
    return parsed


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of server metadata (arrays to lists, bytes to their length), for run.json provenance."""
    if isinstance(value, Mapping):
        return {str(k.decode() if isinstance(k, bytes) else k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"<array {value.dtype} {list(value.shape)}>"
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


ADVERTISED_BOUNDS = {
    "chunk_size": MAX_CHUNK_SIZE,
    "action_horizon": MAX_CHUNK_SIZE,
    "replan_every": MAX_REPLAN_EVERY,
    "replan_steps": MAX_REPLAN_EVERY,
}
"""The integer fields of a server's metadata a client reads, each with its upper bound (:mod:`rollbench.core.bounds`:
the same as a plug-in's PolicyInfo)."""


def advertised(metadata: Mapping[str, Any]) -> tuple[int, int | None]:
    """``(chunk_size, replan_every)`` a server advertises in its metadata.

    ``replan_every`` (rollbench) or ``replan_steps`` (the name in openpi's LIBERO client) is how many actions of
    each chunk to execute; ``action_horizon`` or ``chunk_size`` is only how long the chunks are. The two are kept
    apart on purpose: executing the whole chunk because a server said how long its chunks are would silently
    change the executed chunk length, which moves published LIBERO numbers by many points. Each of these fields
    present and not null must be an integer from 1 to its bound in :data:`ADVERTISED_BOUNDS`, else ProtocolError
    naming it (hostile round 13 F11: a server's nonsense is refused, not ignored).
    """
    return _pos_int(metadata, "chunk_size", "action_horizon") or 1, _pos_int(metadata, "replan_every", "replan_steps")


def _pos_int(metadata: Mapping[str, Any], *keys: str) -> int | None:
    """The first of ``keys`` with a value (an integer from 1 to its bound in :data:`ADVERTISED_BOUNDS`, not a
    bool), else None; ProtocolError for a present value that is not such an integer."""
    found = None
    for k in keys:
        v = metadata.get(k)
        if v is None:
            continue
        whole = isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
        if not (whole and 1 <= v <= ADVERTISED_BOUNDS[k]):
            raise ProtocolError(f"{k} is {_shown(v)}; {k} must be an integer from 1 to {ADVERTISED_BOUNDS[k]:,}")
        found = int(v) if found is None else found
    return found


def _shown(value: Any) -> str:
    """A server's metadata value as an error names it: a bool or a short integer itself, any other value by its type
    and size (:func:`~rollbench.wire.decode.described`: never a server's text, which may echo a token)."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value)).lower()
    if isinstance(value, int | np.integer) and abs(int(value)) < 10**12:
        return str(int(value))
    if isinstance(value, int | np.integer):
        return f"an integer of {len(str(abs(int(value))))} digits"
    if isinstance(value, float | np.floating):
        return repr(float(value))
    return described(value)


def advertised_chunk_size(metadata: Mapping[str, Any]) -> bool:
    """Whether a server's metadata states a valid chunk length (``chunk_size`` or ``action_horizon``, an integer
    >= 1): the same test :func:`advertised` takes its chunk size from."""
    return _pos_int(metadata, "chunk_size", "action_horizon") is not None


def advertised_tasks(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """The task patterns a server says its policy drives (``tasks``, as ``rollbench serve-policy`` sends them);
    empty (any task) when it says nothing."""
    tasks = metadata.get("tasks")
    return tuple(tasks) if isinstance(tasks, list) and all(isinstance(t, str) for t in tasks) else ()


def advertised_image_sizes(metadata: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The image size per env family a server's policy needs (``image_sizes``: ``{family: [height, width]}``, as
    ``rollbench serve-policy`` of a LeRobot checkpoint sends it); entries that are not two sides ``--image-size``
    would take (:func:`~rollbench.core.bounds.image_side_ok`: even, 16 to 4096 pixels) are ignored, and nothing is
    used when the server says nothing."""
    sizes = metadata.get("image_sizes")
    out: dict[str, tuple[int, int]] = {}
    if isinstance(sizes, Mapping):
        for family, size in sizes.items():
            if (
                isinstance(family, str)
                and isinstance(size, list)
                and len(size) == 2
                and all(image_side_ok(n) for n in size)
            ):
                out[family] = (size[0], size[1])
    return out


def check_actions(reply: Any, server: str, task: TaskInfo | None) -> np.ndarray:
    """``reply["actions"]`` as a float array of the task's action size, in the server's own float dtype (integers
    become float64), else EpisodeError naming the problem."""
    if not isinstance(reply, Mapping) or "actions" not in reply:  # named by its type and size, never its keys
        raise EpisodeError(f"malformed reply from {server}: no 'actions' (got {described(reply)})")
    try:
        actions = np.asarray(reply["actions"])
    except (TypeError, ValueError) as exc:  # ragged lists; numpy's text is its own, but say it in ours
        raise EpisodeError(
            f"malformed reply from {server}: 'actions' is not a numeric array ({type(exc).__name__})"
        ) from None
    if actions.dtype.kind != "f":  # the server's floats are kept as sent (float64 from openpi: never rounded)
        if actions.dtype.kind not in "biu":  # numpy's dtype code (kind and size), never the values
            raise EpisodeError(
                f"malformed reply from {server}: 'actions' is not numeric (its dtype is {actions.dtype.str})"
            )
        actions = actions.astype(np.float64)
    dim = task.action_dim if task is not None else None
    if actions.ndim not in (1, 2) or actions.size == 0 or (dim is not None and actions.shape[-1] != dim):
        raise EpisodeError(
            f"{server} returned actions of shape {actions.shape}; {task.name if task else 'the task'} needs "
            f"({dim},) or (N, {dim})"
        )
    return actions
