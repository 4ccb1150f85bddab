"""LeRobot checkpoints as rollbench policies: ``--policy lerobot:PATH_OR_REPO_ID[@REVISION]``.

A checkpoint (``pretrained_model/`` with ``config.json``, ``model.safetensors`` and the saved pre/post-processor
pipelines) of any policy type lerobot ships (0.6.1 by default, 0.4.4 as the older line) is loaded and run by lerobot's own code (its policy factory,
``from_pretrained``, the saved pipelines, ``select_action`` with the policy's own action queue, ``reset()`` at every
episode start) in a separate interpreter with lerobot installed (``.venv-lerobot``, built by ``bash
scripts/lerobot_compat.sh --eval``): lerobot's pins (0.6.1: Python >= 3.12, torch < 2.12, av < 16, packaging < 26)
conflict with rollbench's. Modules:

* :mod:`.host`: the program that runs in lerobot's interpreter (standard library, numpy, torch, lerobot only);
* :mod:`rollbench.wire.pipe.frames`: the pipe protocol both sides speak (shared with the env host);
* :mod:`.client`: starting, calling (with deadlines) and stopping the host from rollbench;
* :mod:`.observe`: the raw env observation of each family as lerobot's env wrappers build it, and the features it
  provides (checked against the checkpoint's before any episode);
* :mod:`.policy`: the rollbench Policy and its batched form.

Options (``--policy-options``): ``python`` (interpreter with lerobot), ``device`` (``auto``: CUDA when available,
else CPU; or ``cpu``, ``cuda``, ``cuda:N``), ``dtype`` (policies with a ``dtype`` setting, e.g. ``bfloat16`` for
pi0), ``timeout_s`` (one act, default 120), ``start_timeout_s`` (host start, default 300), ``seeding``
(``per-episode``, the default: lerobot's ``set_seed`` with each episode's seed, so every episode is reproducible
alone; ``lerobot-eval``: seeded once per run before the policy is built, as ``lerobot-eval`` does, so a run equals
``lerobot-eval --seed S --eval.n_episodes N --eval.batch_size 1`` episode for episode; one worker, one slot, a fresh
run only, see docs/lerobot.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollbench.core.registry import policy_options


@policy_options(python=str, device=str, dtype=str, timeout_s=(int, float), start_timeout_s=(int, float), seeding=str)
def make_lerobot_policy(name: str, options: Mapping[str, Any]) -> Any:
    """A LeRobot checkpoint (folder or Hub id) run by lerobot's own code in .venv-lerobot, as lerobot-eval runs it.

    Returns :class:`~rollbench.policies.lerobot.policy.LeRobotPolicy`; ConfigError when no interpreter with lerobot
    is found or the host cannot read the checkpoint's config."""
    from rollbench.policies.lerobot.policy import LeRobotPolicy

    return LeRobotPolicy(name, options)
