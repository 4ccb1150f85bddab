"""Env observations as lerobot-eval's env wrappers produce them, built from rollbench's observation, per family.

lerobot 0.4.4's ``rollout`` (``lerobot/scripts/lerobot_eval.py``) hands the policy pipeline the raw observation of
its gymnasium env, then ``preprocess_observation`` (``lerobot/envs/utils.py``) and the env preprocessor
(``make_env_pre_post_processors``, ``lerobot/envs/factory.py``). The host runs those two itself; this module only
rebuilds the raw observation of each family's lerobot env, as flat ``"key/subkey"`` arrays without a batch
dimension (the host nests them and adds it):

* ``pusht``: gym-pusht 0.1.8 with lerobot's ``PushtEnv`` config (``obs_type="pixels_agent_pos"``, no observation
  size given, so gym-pusht's default 96 x 96): ``pixels`` ``uint8 (96, 96, 3)`` (rollbench's ``top`` camera, which
  is gym-pusht's own ``_render(visualize=False)`` at the rendered size) and ``agent_pos`` ``float64 (2,)`` (the
  first two entries of gym-pusht's native state; from rollbench's float32 state when served, the same after
  lerobot's ``.float()``). Instruction: ``""``: gym-pusht's env has neither
  ``task_description`` nor ``task``, so ``add_envs_task`` gives an empty string.
* ``libero``: lerobot's ``LiberoEnv`` (``lerobot/envs/libero.py``, ``obs_type="pixels_agent_pos"``; 256 x 256 on
  0.4.4, whose config passes no size to the env; 360 x 360 on 0.6.1, whose ``LiberoEnv`` config passes its
  ``observation_height``/``observation_width``, default 360, and which ``--env.observation_height/width`` change):
  ``pixels/image`` (``agentview``) and ``pixels/image2`` (``robot0_eye_in_hand``) ``uint8 (H, W, 3)`` as
  robosuite renders them, i.e. *not* rotated (lerobot's ``LiberoProcessorStep`` flips them; rollbench's LIBERO
  cameras are already rotated 180 degrees, so they are flipped back here, exactly), and ``robot_state`` with
  ``eef/pos`` (3), ``eef/quat`` (4, x-y-z-w), ``gripper/qpos`` (2), ``gripper/qvel`` (2), ``joints/pos`` (7),
  ``joints/vel`` (7), ``float64`` from robosuite's observation. ``eef/mat`` (the controller's orientation matrix)
  is not sent: rollbench's observation does not carry it, and ``LiberoProcessorStep`` drops it unread. Instruction:
  the episode's, which is LIBERO's ``task.language`` (lerobot's ``task_description``) unless the run overrides it.

* ``aloha``: gym-aloha 0.1.5 with lerobot's ``AlohaEnv`` config (``obs_type="pixels_agent_pos"``, 480 x 640):
  ``pixels/top`` ``uint8 (480, 640, 3)`` and ``agent_pos`` ``float64 (14,)`` (gym-aloha's own; from the float32
  state when served, the same after lerobot's ``.float()``). Instruction ``""``, as for PushT (gym's ``TimeLimit``
  wrapper hides the env's ``task`` attribute from ``add_envs_task``).

What each family provides after lerobot's preprocessing (``Family.features``) is what a checkpoint's
``input_features``/``output_features`` are checked against before any episode. :data:`FAMILIES` holds the env
classes' own image sizes; :func:`for_host` gives the sizes lerobot-eval of the host's lerobot renders (the host
reads them from lerobot's own env configs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rollbench.core.contracts import EpisodeError, Observation, TaskInfo

PUSHT_SIZE = (96, 96)  # gym-pusht 0.1.8 PushTEnv: observation_width = observation_height = 96 (lerobot sets neither)
ALOHA_SIZE = (480, 640)  # gym-aloha 0.1.5 AlohaEnv: observation_height, observation_width (lerobot: the same)
LIBERO_SIZE = (256, 256)  # lerobot/envs/libero.py LiberoEnv.__init__: observation_width = observation_height = 256


@dataclass(frozen=True)
class Family:
    """What lerobot-eval gives a policy in one env family.

    Attributes:
        image_size: ``(height, width)`` lerobot-eval renders; rollbench renders the same unless ``--image-size``.
        features: feature name -> ``(lerobot FeatureType value, shape)`` after ``preprocess_observation`` and the
            env preprocessor; images channel-first.
        action_dim: the env's action size (lerobot's ``ACTION`` feature).
        build: ``(observation, instruction) -> (raw arrays, task text)``.
        env_task: task name -> the ``task`` of lerobot's EnvConfig for that family.
        resizable: lerobot-eval of the host renders this family at any size it is given
            (``--env.observation_height/width``, which its config passes to the env) and feeds the policy images of
            that size whatever the checkpoint was trained on (lerobot checks image names, not sizes); so
            ``--image-size`` is accepted, and a checkpoint's other image size is not a mismatch.
    """

    image_size: tuple[int, int]
    features: dict[str, tuple[str, tuple[int, ...]]]
    action_dim: int
    build: Callable[[Observation, str], tuple[dict[str, np.ndarray], str]]
    env_task: Callable[[TaskInfo], str]
    resizable: bool = False


def _image(obs: Observation, camera: str, size: tuple[int, int]) -> np.ndarray:
    """Camera ``camera``'s ``uint8 (H, W, 3)`` image, which must be ``size`` (lerobot-eval's; a served policy can
    be sent another size by a client run without ``--image-size``, which the checkpoint must not silently see)."""
    if camera not in obs.images:
        raise EpisodeError(f"lerobot policy: camera {camera!r} was not rendered", fault="environment")
    image = obs.images[camera]
    if image.shape != (*size, 3) or image.dtype != np.uint8:
        raise EpisodeError(
            f"lerobot policy: camera {camera!r} is {image.dtype} {list(image.shape)}; lerobot-eval gives uint8 "
            f"[{size[0]}, {size[1]}, 3] (run the client with --image-size {size[0]}x{size[1]})",
            fault="policy",
        )
    return image


def _pusht(obs: Observation, instruction: str) -> tuple[dict[str, np.ndarray], str]:
    # gym-pusht's native float64 state when in-process; a served observation carries only rollbench's float32 state,
    # whose first two entries are those float64 values rounded to float32, which is exactly what lerobot's
    # preprocess_observation makes of them (``.float()``), so the policy sees the same tensor either way
    native = np.asarray(obs.raw if obs.raw is not None else obs.state, dtype=np.float64)
    return {"pixels": _image(obs, "top", PUSHT_SIZE), "agent_pos": native[:2].copy()}, ""


def _libero(
    obs: Observation, instruction: str, size: tuple[int, int] = LIBERO_SIZE
) -> tuple[dict[str, np.ndarray], str]:
    raw: Any = obs.raw
    if not isinstance(raw, dict):
        raise EpisodeError(
            "lerobot policy: this LIBERO observation has no robosuite observation (eef quaternion, gripper and "
            "joint state), only rollbench's 8-dim state; lerobot's LiberoProcessorStep needs the former, so "
            "LIBERO runs with lerobot:CHECKPOINT in-process, not through serve-policy",
            fault="policy",
        )
    arrays = {
        "pixels/image": np.ascontiguousarray(_image(obs, "agentview", size)[::-1, ::-1]),
        "pixels/image2": np.ascontiguousarray(_image(obs, "robot0_eye_in_hand", size)[::-1, ::-1]),
    }
    keys = {
        "robot_state/eef/pos": "robot0_eef_pos",
        "robot_state/eef/quat": "robot0_eef_quat",
        "robot_state/gripper/qpos": "robot0_gripper_qpos",
        "robot_state/gripper/qvel": "robot0_gripper_qvel",
        "robot_state/joints/pos": "robot0_joint_pos",
        "robot_state/joints/vel": "robot0_joint_vel",
    }
    for name, key in keys.items():
        arrays[name] = np.asarray(raw[key], dtype=np.float64)
    return arrays, instruction


def _aloha(obs: Observation, instruction: str) -> tuple[dict[str, np.ndarray], str]:
    raw: Any = obs.raw
    agent = raw["agent_pos"] if isinstance(raw, dict) else obs.raw if obs.raw is not None else obs.state
    return {"pixels/top": _image(obs, "top", ALOHA_SIZE), "agent_pos": np.asarray(agent, dtype=np.float64)}, ""


FAMILIES: dict[str, Family] = {
    "pusht": Family(
        image_size=PUSHT_SIZE,
        features={"observation.image": ("VISUAL", (3, *PUSHT_SIZE)), "observation.state": ("STATE", (2,))},
        action_dim=2,
        build=_pusht,
        env_task=lambda task: "PushT-v0",
    ),
    "aloha": Family(
        image_size=ALOHA_SIZE,
        features={"observation.images.top": ("VISUAL", (3, *ALOHA_SIZE)), "observation.state": ("STATE", (14,))},
        action_dim=14,
        build=_aloha,
        env_task=lambda task: task.name.split("/", 1)[1],
    ),
    "libero": Family(
        image_size=LIBERO_SIZE,
        features={
            "observation.images.image": ("VISUAL", (3, *LIBERO_SIZE)),
            "observation.images.image2": ("VISUAL", (3, *LIBERO_SIZE)),
            "observation.state": ("STATE", (8,)),
        },
        action_dim=7,
        build=_libero,
        env_task=lambda task: task.name.split("/")[1].removesuffix("_lan"),
    ),
}


_SIZED_BUILDERS: dict[str, Callable[..., tuple[dict[str, np.ndarray], str]]] = {"libero": _libero}


def for_host(sizes: Mapping[str, Sequence[int]] | None) -> dict[str, Family]:
    """:data:`FAMILIES` as lerobot-eval of the host's lerobot renders them: ``sizes`` (the host's
    ``lerobot_eval_image_sizes``: family -> ``(height, width)`` its EnvConfig passes to the env, e.g. lerobot 0.6.1's
    LIBERO 360 x 360) makes that family :attr:`Family.resizable` at that default size; families it does not name
    (and every family on lerobot 0.4.4) keep their env's own size. Only families whose builder takes a size are
    changed; a size for another family is ignored."""
    out = dict(FAMILIES)
    for name, size in (sizes or {}).items():
        builder = _SIZED_BUILDERS.get(name)
        if builder is None or len(size) != 2:
            continue
        hw = (int(size[0]), int(size[1]))
        out[name] = replace(FAMILIES[name], image_size=hw, build=functools.partial(builder, size=hw), resizable=True)
    return out


def size_warnings(info: Mapping[str, Any], families: Mapping[str, Family]) -> list[str]:
    """A warning per resizable family whose image features the checkpoint names at another size than lerobot-eval's
    default: without ``--image-size`` the run renders lerobot-eval's size, as lerobot-eval does."""
    out = []
    version = (info.get("versions") or {}).get("lerobot")
    for name, fam in families.items():
        visual = {k: v for k, v in fam.features.items() if v[0] == "VISUAL"}
        feats = info.get("input_features") or {}
        sizes = {tuple(feats[k].get("shape", ()))[1:] for k in visual if k in feats}
        if not fam.resizable or len(sizes) != 1 or (trained := sizes.pop()) == fam.image_size or len(trained) != 2:
            continue
        (h, w), (th, tw) = fam.image_size, trained
        out.append(
            f"lerobot-eval {version} renders {name} images at {h}x{w} by default (its env config; "
            f"--env.observation_height/--env.observation_width) and feeds them to this checkpoint, whose images are "
            f"{th}x{tw}: without --image-size this run renders {h}x{w}, as lerobot-eval does; --image-size {th}x{tw} "
            f"renders the checkpoint's size (lerobot-eval: --env.observation_height={th} --env.observation_width={tw})"
        )
    return out


def provided(family: Family, image_size: tuple[int, int]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The family's features with images at ``image_size`` (what this run renders)."""
    out = {}
    for name, (kind, shape) in family.features.items():
        out[name] = (kind, (shape[0], *image_size) if kind == "VISUAL" else shape)
    return out


def mismatches(
    info: dict[str, Any], family_name: str, family: Family, image_size: tuple[int, int], task: TaskInfo
) -> list[str]:
    """Every way the checkpoint (its ``input_features``/``output_features`` as the host reported them) does not fit
    ``task`` rendered at ``image_size``; empty when it fits."""
    have = provided(family, image_size)
    out = []
    if image_size != family.image_size and not family.resizable:
        h, w = family.image_size
        out.append(
            f"lerobot-eval renders {family_name} images at {h}x{w}, this run at {image_size[0]}x{image_size[1]} "
            f"(drop --image-size or give {h}x{w})"
        )
    for name, feat in sorted(info.get("input_features", {}).items()):
        shape = tuple(feat.get("shape", ()))
        if name not in have:
            out.append(
                f"input feature {name} {list(shape)} is not provided by {task.name} (it provides {sorted(have)})"
            )
        elif have[name][1] != shape and not (family.resizable and have[name][0] == "VISUAL" and shape[:1] == (3,)):
            out.append(f"input feature {name}: checkpoint shape {list(shape)}, {task.name} gives {list(have[name][1])}")
    actions = {k: tuple(v.get("shape", ())) for k, v in info.get("output_features", {}).items()}
    if "action" not in actions:
        out.append(f"the checkpoint has no output feature 'action' (it has {sorted(actions)})")
    elif actions["action"] != (task.action_dim,):
        out.append(
            f"output feature action: checkpoint shape {list(actions['action'])}, {task.name} takes [{task.action_dim}]"
        )
    return out
