"""Small LeRobot checkpoints for the tests, made with this venv's lerobot's own ``save_pretrained`` (0.6.1 or 0.4.4;
no download).

``make_checkpoint(kind, shapes, folder, seed)`` builds a randomly initialised ACT or Diffusion policy (torch seeded
with ``seed``; ImageNet backbone weights off: ``pretrained_backbone_weights=None``), its pre/post-processor
pipelines from ``make_pre_post_processors(config, dataset_stats=...)`` with made-up dataset statistics, and saves
all three into ``folder`` exactly as lerobot's trainer saves a ``pretrained_model/`` (``config.json``,
``model.safetensors``, ``policy_preprocessor.json``/``policy_postprocessor.json`` and their state files).

Shapes (``SHAPES``), as lerobot's env wrappers and processors hand them to a policy:
``pusht``: ``observation.image`` (3, 96, 96), ``observation.state`` (2,), ``action`` (2,) in pixels [0, 512];
``libero``: ``observation.images.image`` and ``observation.images.image2`` (3, 256, 256), ``observation.state`` (8,),
``action`` (7,) in [-1, 1]; ``aloha``: ``observation.images.top`` (3, 480, 640), ``observation.state`` (14,),
``action`` (14,). The networks are made small (a few layers, short chunks, 4 denoising steps) so that an
episode runs in seconds on a CPU; they act at random, so no success is expected from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.factory import make_pre_post_processors

SHAPES: dict[str, dict[str, tuple[FeatureType, tuple[int, ...]]]] = {
    "pusht": {
        "observation.image": (FeatureType.VISUAL, (3, 96, 96)),
        "observation.state": (FeatureType.STATE, (2,)),
        "action": (FeatureType.ACTION, (2,)),
    },
    "libero": {
        "observation.images.image": (FeatureType.VISUAL, (3, 256, 256)),
        "observation.images.image2": (FeatureType.VISUAL, (3, 256, 256)),
        "observation.state": (FeatureType.STATE, (8,)),
        "action": (FeatureType.ACTION, (7,)),
    },
}
SHAPES["aloha"] = {
    "observation.images.top": (FeatureType.VISUAL, (3, 480, 640)),
    "observation.state": (FeatureType.STATE, (14,)),
    "action": (FeatureType.ACTION, (14,)),
}
ACTION_RANGE = {"pusht": (0.0, 512.0), "libero": (-1.0, 1.0), "aloha": (-1.0, 1.0)}


def _stats(shapes: dict[str, tuple[FeatureType, tuple[int, ...]]], family: str) -> dict[str, dict[str, torch.Tensor]]:
    """Made-up dataset statistics of the right shapes (images: per channel)."""
    out = {}
    for name, (kind, shape) in shapes.items():
        if kind is FeatureType.VISUAL:
            out[name] = {
                "mean": torch.tensor([0.5, 0.45, 0.4]).view(3, 1, 1),
                "std": torch.tensor([0.25, 0.2, 0.22]).view(3, 1, 1),
                "min": torch.zeros(3, 1, 1),
                "max": torch.ones(3, 1, 1),
            }
        else:
            lo, hi = ACTION_RANGE[family] if kind is FeatureType.ACTION else (-1.0, 1.0)
            n = shape[0]
            out[name] = {
                "mean": torch.full((n,), (lo + hi) / 2),
                "std": torch.full((n,), (hi - lo) / 4),
                "min": torch.full((n,), lo),
                "max": torch.full((n,), hi),
            }
    return out


def _config(kind: str, inputs: dict[str, PolicyFeature], outputs: dict[str, PolicyFeature]) -> Any:
    if kind == "act":
        from lerobot.policies.act.configuration_act import ACTConfig

        return ACTConfig(
            input_features=inputs,
            output_features=outputs,
            device="cpu",
            pretrained_backbone_weights=None,
            chunk_size=10,
            n_action_steps=10,
            dim_model=64,
            n_heads=2,
            dim_feedforward=128,
            n_encoder_layers=1,
            n_decoder_layers=1,
            n_vae_encoder_layers=1,
            latent_dim=8,
        )
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

    return DiffusionConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        pretrained_backbone_weights=None,
        use_group_norm=True,
        crop_shape=(84, 84),
        horizon=8,
        n_action_steps=4,
        n_obs_steps=2,
        down_dims=(32, 64),
        diffusion_step_embed_dim=32,
        spatial_softmax_num_keypoints=8,
        num_train_timesteps=20,
        num_inference_steps=4,
    )


def make_checkpoint(kind: str, family: str, folder: Path, seed: int = 0) -> Path:
    """Save a random ``kind`` (``act`` | ``diffusion``) checkpoint for ``family``'s shapes into ``folder``."""
    from lerobot.policies.factory import get_policy_class

    shapes = SHAPES[family]
    feats = {k: PolicyFeature(type=t, shape=s) for k, (t, s) in shapes.items()}
    inputs = {k: f for k, f in feats.items() if f.type is not FeatureType.ACTION}
    outputs = {k: f for k, f in feats.items() if f.type is FeatureType.ACTION}
    config = _config(kind, inputs, outputs)
    torch.manual_seed(seed)
    policy = get_policy_class(kind)(config)
    pre, post = make_pre_post_processors(config, dataset_stats=_stats(shapes, family))
    folder.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder
