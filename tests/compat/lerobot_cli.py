"""The real ``lerobot-eval`` command, run in this process with a tap on what its env receives.

``run_lerobot_eval(argv, tmp)`` calls lerobot's own ``lerobot.scripts.lerobot_eval.main()`` (the console script
``lerobot-eval``: ``init_logging``, ``register_third_party_plugins``, ``eval_main`` parsed by draccus from
``sys.argv``) with ``argv``. Nothing of lerobot's is re-implemented or re-ordered: ``eval_main`` seeds once, builds
the envs, the policy and the pipelines, and runs ``eval_policy_all`` itself. The only addition is a tap: the module
name ``make_env`` that ``eval_main`` calls is replaced by a function that calls lerobot's own ``make_env`` with the
same arguments and wraps each vector env it returns in :class:`lerobot_reference.ActionLog` (which forwards every
call unchanged and keeps each episode's actions and final ``is_success``). ``eval_info.json``, written by
``eval_main`` into ``--output_dir``, is returned beside the tapped episodes (an episode's success is the tap's
``is_success`` where the env ended it, else its row in ``eval_info.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lerobot.scripts.lerobot_eval as lerobot_eval
from lerobot_reference import ActionLog


def run_lerobot_eval(argv: list[str], output_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``lerobot-eval ARGV --output_dir OUTPUT_DIR``; returns (per played episode ``{"actions": float32 (T, A),
    "success": bool}``, in the order the env played them; the run's ``eval_info.json``)."""
    real_make_env = lerobot_eval.make_env
    logs: list[ActionLog] = []

    def tapped_make_env(*args: Any, **kwargs: Any) -> Any:
        envs = real_make_env(*args, **kwargs)
        for suite, by_id in envs.items():
            for task_id, vec in by_id.items():
                logs.append(ActionLog(vec))
                envs[suite][task_id] = logs[-1]
        return envs

    saved_argv = sys.argv
    sys.argv = ["lerobot-eval", *argv, f"--output_dir={output_dir}"]
    lerobot_eval.make_env = tapped_make_env
    try:
        lerobot_eval.main()
    finally:
        lerobot_eval.make_env = real_make_env
        sys.argv = saved_argv
    import numpy as np

    info = json.loads((output_dir / "eval_info.json").read_text())
    played = [{"actions": np.stack(ep["actions"]), "success": ep["success"]} for log in logs for ep in log.episodes]
    # an episode the env never ended (LIBERO's LiberoEnv does not truncate at the horizon; the rollout stops it) has
    # its success only in eval_info.json's per-task rows, in the order the episodes were played
    rows = [bool(s) for t in info.get("per_task", []) for s in t.get("metrics", {}).get("successes", [])]
    if len(rows) == len(played):
        for ep, row in zip(played, rows, strict=True):
            ep["success"] = row if ep["success"] is None else ep["success"]
    return played, info
