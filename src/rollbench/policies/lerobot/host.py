"""rollbench's LeRobot policy host: runs in LeRobot's own interpreter (``.venv-lerobot``), never imports rollbench.

Started by :mod:`rollbench.policies.lerobot.client` as ``PYTHON host.py --in-fd R --out-fd W --checkpoint C
[--revision REV] [--device D] [--dtype T]``; speaks :mod:`rollbench.wire.pipe.frames` over the two pipe descriptors and exits when its
input pipe closes (so it never outlives the rollbench process that started it). Its stdout and stderr are
rollbench's log file for it, never the protocol.

Everything policy-related is lerobot's own code (0.6.1, or the older 0.4.4 line; both expose the names used here
under the same modules), called as ``lerobot-eval`` (``lerobot/scripts/lerobot_eval.py`` ``eval_main`` and
``rollout``) calls it:

* load: ``PreTrainedConfig.from_pretrained(checkpoint)`` with ``pretrained_path`` and ``device`` set, then, per env
  family, ``make_policy(cfg, env_cfg=<lerobot's EnvConfig of that family>)`` (the policy factory and
  ``from_pretrained``), ``make_pre_post_processors(cfg, pretrained_path, preprocessor_overrides=...)`` (the checkpoint's saved pipelines,
  with lerobot-eval's two overrides: the policy's device, and ``rename_map`` ``{}``) and ``make_env_pre_post_processors(env_cfg, cfg)``;
* each step, per slot: ``preprocess_observation(raw)`` on the env observation rollbench sends (the nested dict
  lerobot's env wrapper would return, with a batch dimension of 1), ``observation["task"] = [text]`` (what
  ``add_envs_task`` adds), the env preprocessor, the policy preprocessor, ``policy.select_action`` under
  ``torch.inference_mode()``, the postprocessor, the env postprocessor, ``.to("cpu").numpy()``;
* ``policy.reset()`` at every episode start, and lerobot's ``set_seed(seed)`` with the episode's seed (seeding
  ``per-episode``, the default). With the policy option ``seeding: lerobot-eval`` the host instead calls ``set_seed(seed)`` once, at
  ``load``, before ``make_policy`` (where ``eval_main`` calls it), and never again: the random stream of one
  ``lerobot-eval --seed S --eval.batch_size 1`` run, whose policy initialisation and episodes draw from it in turn.

Slots (rollbench ``--batch-size B``): slot 0 is the loaded policy, every other slot a ``copy.deepcopy`` of it that
shares its parameters and buffers (no second copy of the weights) but owns its action queue and other episode
state. Each slot also owns its random state (python, numpy, torch CPU and CUDA), restored before and saved after
each of its calls, so a slot's actions never depend on what other slots drew: B = 4 gives the actions of B = 1.

Messages (``op``): in ``load`` {family, env_task, [seed_once]} -> ``ok``; ``reset`` {slot, seed} -> ``ok``; ``act``
{items: [{slot, task}], arrays ``"<slot>/<key>/<subkey>"``} -> ``actions`` {items: [{slot} | {slot, error}]} with arrays
``"<slot>"`` ``(action_dim,)``; ``close`` -> exit 0. Any reply may be ``error`` {message, where, traceback} instead
(an unknown op: ``error`` {where: "protocol"}). On start it sends ``hello`` {info} or ``error`` {where: "load"}. The
request loop is ``frames.serve``, the env host's too.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.metadata as md
import os
import random
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

# rollbench's frame format (rollbench/wire/pipe/frames.py), imported as a top-level module: rollbench itself is not
# installed in this interpreter
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "wire" / "pipe"))
import frames

WEIGHTS = "model.safetensors"
MODEL_CARD = "README.md"  # lerobot 0.5+ writes "| LeRobot version | X |" into the card of a trained checkpoint
MODEL_CARD_MAX = 1 << 20
CARD_VERSION = re.compile(r"^\|\s*LeRobot version\s*\|\s*([0-9][0-9A-Za-z.+-]*)\s*\|", re.MULTILINE)


def saved_by(folder: Path) -> str | None:
    """The lerobot version a checkpoint says it was made with: its model card's "LeRobot version" row (written by
    ``PreTrainedPolicy.push_model_to_hub`` from lerobot 0.5 on), else None (0.4.x cards and plain
    ``save_pretrained`` folders do not say). Only a regular file of at most 1 MiB is read."""
    card = folder / MODEL_CARD
    if card.is_symlink() or not card.is_file() or card.stat().st_size > MODEL_CARD_MAX:
        return None
    found = CARD_VERSION.search(card.read_text(errors="replace"))
    return found.group(1) if found else None


def _version(dist: str) -> str | None:
    # a far side: runs in its own interpreter without rollbench, so not rollbench.core.versions.installed_version
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def resolve(checkpoint: str, revision: str | None) -> tuple[Path, dict[str, Any]]:
    """A local checkpoint folder and its provenance: the folder itself, or the Hub snapshot of ``checkpoint`` at
    ``revision`` (``huggingface_hub.snapshot_download``; honours ``HF_HUB_OFFLINE``)."""
    local = Path(checkpoint).expanduser()
    if local.is_dir():
        if revision:
            raise ValueError(f"@{revision} applies to Hub ids only; {checkpoint} is a local folder")
        folder, prov = local.resolve(), {"source": "local", "path": str(local.resolve()), "revision": None}
    else:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(repo_id=checkpoint, revision=revision))
        prov = {"source": "hub", "repo_id": checkpoint, "requested_revision": revision, "revision": folder.name}
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"{folder} has no {WEIGHTS}")
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    prov["weights_file"] = WEIGHTS
    prov["saved_by_lerobot"] = saved_by(folder)
    prov["weights_sha256"] = digest.hexdigest()
    return folder, prov


def lerobot_eval_image_sizes() -> dict[str, list[int]]:
    """Family -> ``[height, width]`` lerobot-eval renders by default, for each of lerobot's EnvConfigs that passes
    an observation size to its env (``gym_kwargs`` ``observation_height``/``observation_width``: lerobot 0.6.1's
    ``LiberoEnv``, 360 x 360); a family left out renders at its env's own default (lerobot 0.4.4's configs pass
    none)."""
    from lerobot.envs.configs import AlohaEnv, LiberoEnv, PushtEnv

    out = {}
    for family, config in (("pusht", PushtEnv()), ("aloha", AlohaEnv()), ("libero", LiberoEnv(task="libero_10"))):
        kwargs = config.gym_kwargs
        if "observation_height" in kwargs and "observation_width" in kwargs:
            out[family] = [int(kwargs["observation_height"]), int(kwargs["observation_width"])]
    return out


def features_of(feats: Any) -> dict[str, dict[str, Any]]:
    return {k: {"type": str(v.type.value), "shape": list(v.shape)} for k, v in (feats or {}).items()}


class Host:
    """The loaded checkpoint and its slots (see the module docstring)."""

    def __init__(self, checkpoint: str, revision: str | None, device: str, dtype: str | None) -> None:
        import lerobot.policies.factory  # noqa: F401  (registers every policy type's config class, as lerobot-eval's imports do)
        import torch
        from lerobot.configs.policies import PreTrainedConfig

        self.torch = torch
        self.folder, self.checkpoint = resolve(checkpoint, revision)
        self.cfg = PreTrainedConfig.from_pretrained(str(self.folder))
        self.cfg.pretrained_path = str(self.folder)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        kind = torch.device(self.device).type  # raises on a malformed device name
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: torch {torch.__version__} sees no CUDA device here")
        self.cfg.device = self.device
        if dtype:
            if not hasattr(self.cfg, "dtype"):
                raise ValueError(f"policy type {self.cfg.type} has no dtype setting; drop the dtype option")
            self.cfg.dtype = dtype
        self.family: str | None = None
        self.slots: dict[int, Any] = {}
        self.rng: dict[int, tuple[Any, ...]] = {}
        self.seed_once: int | None = None

    def info(self) -> dict[str, Any]:
        return {
            "policy_type": self.cfg.type,
            "input_features": features_of(self.cfg.input_features),
            "output_features": features_of(self.cfg.output_features),
            "n_action_steps": getattr(self.cfg, "n_action_steps", None),
            "chunk_size": getattr(self.cfg, "chunk_size", None),
            "device": self.device,
            "dtype": getattr(self.cfg, "dtype", None),
            "checkpoint": self.checkpoint,
            "versions": {d: _version(d) for d in ("lerobot", "torch", "transformers", "numpy")},
            "python": sys.version.split()[0],
            "python_executable": sys.executable,
            "lerobot_eval_image_sizes": lerobot_eval_image_sizes(),
        }

    def load(self, family: str, env_task: str, seed_once: int | None = None) -> None:
        """The policy and pipelines for env family ``family`` (``pusht``, ``libero``, ``aloha``); with
        ``seed_once``, lerobot's ``set_seed`` first (lerobot-eval's seeding, see the module docstring)."""
        from lerobot.envs.configs import AlohaEnv, LiberoEnv, PushtEnv
        from lerobot.envs.factory import make_env_pre_post_processors
        from lerobot.policies.factory import make_policy, make_pre_post_processors

        if self.family is not None:
            if family != self.family:
                raise ValueError(f"this host serves {self.family}; one run cannot mix it with {family}")
            return
        env_cfg: Any = {"pusht": PushtEnv, "aloha": AlohaEnv, "libero": LiberoEnv}[family](task=env_task)
        self.seed_once = seed_once
        if seed_once is not None:
            from lerobot.utils.random_utils import set_seed

            set_seed(int(seed_once))
        policy = make_policy(cfg=self.cfg, env_cfg=env_cfg)
        policy.eval()
        self.pre, self.post = make_pre_post_processors(
            policy_cfg=self.cfg,
            pretrained_path=self.cfg.pretrained_path,
            preprocessor_overrides={
                "device_processor": {"device": str(policy.config.device)},
                "rename_observations_processor": {"rename_map": {}},  # lerobot-eval's default --rename_map
            },
        )
        self.env_pre, self.env_post = make_env_pre_post_processors(env_cfg=env_cfg, policy_cfg=self.cfg)
        self.slots = {0: policy}
        self.family = family

    def _slot(self, slot: int) -> Any:
        if self.family is None:
            raise RuntimeError("reset before load")
        if slot not in self.slots:
            base = self.slots[0]
            shared = {id(t): t for t in [*base.parameters(), *base.buffers()]}
            self.slots[slot] = copy.deepcopy(base, memo=shared)
        return self.slots[slot]

    def _save_rng(self, slot: int) -> None:
        torch = self.torch
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        self.rng[slot] = (random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)

    def _restore_rng(self, slot: int) -> None:
        py, npy, cpu, cuda = self.rng[slot]
        random.setstate(py)
        np.random.set_state(npy)
        self.torch.set_rng_state(cpu)
        if cuda is not None:
            self.torch.cuda.set_rng_state_all(cuda)

    def reset(self, slot: int, seed: int) -> None:
        from lerobot.utils.random_utils import set_seed

        self._slot(slot).reset()
        if self.seed_once is None:
            set_seed(int(seed))
        elif slot != 0:
            raise ValueError("seeding lerobot-eval runs one slot (one random stream); batching is refused")
        if slot not in self.rng or self.seed_once is None:
            self._save_rng(slot)

    def act(self, slot: int, raw: dict[str, Any], task: str) -> np.ndarray:
        """One ``select_action`` for ``slot`` on lerobot env observation ``raw``; returns ``(action_dim,)``."""
        from lerobot.envs.utils import preprocess_observation
        from lerobot.utils.constants import ACTION

        policy = self._slot(slot)
        self._restore_rng(slot)
        try:
            observation = preprocess_observation(raw)
            observation["task"] = [task]
            observation = self.pre(self.env_pre(observation))
            with self.torch.inference_mode():
                action = policy.select_action(observation)
            action = self.env_post({ACTION: self.post(action)})[ACTION]
            out = action.to("cpu").numpy()
        finally:
            self._save_rng(slot)
        if out.ndim != 2 or out.shape[0] != 1:
            raise ValueError(f"select_action returned shape {tuple(out.shape)}, expected (1, action_dim)")
        return out[0]


def nest(slot: int, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """``"<slot>/a/b"`` arrays -> ``{"a": {"b": array[None]}}``: the env observation with a batch dimension of 1."""
    out: dict[str, Any] = {}
    prefix = f"{slot}/"
    for name, value in arrays.items():
        if not name.startswith(prefix):
            continue
        *parents, leaf = name[len(prefix) :].split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value[None]
    return out


def _error(where: str, exc: BaseException) -> dict[str, Any]:
    tb = traceback.format_exception(exc)
    return {"op": "error", "where": where, "message": f"{type(exc).__name__}: {exc}", "traceback": "".join(tb)[-4000:]}


OPS = frozenset({"load", "reset", "act"})


def handler(host: Host) -> frames.Handler:
    """``host``'s answer to one request (``load``, ``reset``, ``act``; see the module docstring), for
    ``frames.serve``, the far sides' one request loop. An ``act`` item whose slot fails is answered with its own
    ``error`` (fault: the policy), the others still acted."""

    def handle(op: str, msg: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
        reply_arrays: dict[str, Any] = {}
        if op == "load":
            once = msg.get("seed_once")
            host.load(str(msg["family"]), str(msg["env_task"]), None if once is None else int(once))
            return {"op": "ok"}, reply_arrays
        if op == "reset":
            host.reset(int(msg["slot"]), int(msg["seed"]))
            return {"op": "ok"}, reply_arrays
        items = []
        for item in msg["items"]:
            slot = int(item["slot"])
            try:
                reply_arrays[str(slot)] = host.act(slot, nest(slot, arrays), str(item["task"]))
                items.append({"slot": slot})
            except Exception as exc:
                items.append({"slot": slot, **_error("policy", exc)})
        return {"op": "actions", "items": items}, reply_arrays

    return handle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--revision")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype")
    args = parser.parse_args()
    reader = frames.FrameReader(args.in_fd)
    try:
        host = Host(args.checkpoint, args.revision, args.device, args.dtype)
        hello: dict[str, Any] = {"op": "hello", "info": host.info()}
    except Exception as exc:
        frames.write_frame(args.out_fd, frames.encode(_error("load", exc)))
        sys.exit(1)
    frames.write_frame(args.out_fd, frames.encode(hello))
    frames.serve(handler(host), OPS, reader, args.out_fd, _error)
    os.close(args.out_fd)


if __name__ == "__main__":
    main()
