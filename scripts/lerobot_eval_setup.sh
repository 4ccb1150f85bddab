#!/usr/bin/env bash
# Adds to .venv-lerobot what lerobot's own evaluation loop (lerobot.scripts.lerobot_eval) needs to run PushT, for
# benchmarks/bench_lerobot_eval.py and tests/compat/test_lerobot_eval.py. A separate step: the dataset-reader compat
# check (scripts/lerobot_compat.sh) does not need these. Safe to run again; ~10 s on top of lerobot_compat.sh.
#   bash scripts/lerobot_compat.sh && bash scripts/lerobot_eval_setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv-lerobot/bin/python ] || { echo "no .venv-lerobot: run bash scripts/lerobot_compat.sh first" >&2; exit 2; }

# lerobot is installed --no-deps (see lerobot_compat.sh); these are the modules lerobot_eval.py imports, directly or
# through lerobot.envs / lerobot.policies.factory, found by importing it until it imported. Why each pin:
PACKAGES=(
  einops==0.8.2            # rollout/eval_policy reduce with einops; lerobot asks for <0.9, 0.8.2 is the newest
  draccus==0.10.0          # lerobot.configs (EnvConfig, PreTrainedConfig) are draccus registries; lerobot pins it exactly
  termcolor==3.3.0         # lerobot_eval.py imports it for log colours; lerobot asks for <4
  imageio==2.38.1          # lerobot.utils.io_utils (eval video writing, unused here) imports it at module level
  pyserial==3.5            # lerobot.envs.configs imports lerobot.robots -> lerobot.motors, which imports serial
  deepdiff==8.6.1          # same chain (motors_bus); lerobot asks for <9, 8.6.1 is the newest 8.x
  diffusers==0.35.2        # lerobot.policies.factory imports the GR00T config, whose package imports diffusers; <0.36
  gymnasium==1.4.0         # the vector env and SAME_STEP autoreset lerobot's make_env builds; rollbench's own pin
  # PushT itself, at rollbench's versions (its .venv), so both sides step the same physics and compute the same
  # coverage: gym-pusht's own pin, and its unpinned dependencies at the versions rollbench's install resolves.
  gym-pusht==0.1.8 pymunk==6.11.1 pygame==2.6.1 shapely==2.2.0 opencv-python==4.11.0.86
)
INSTALL_TIMEOUT=${LEROBOT_INSTALL_TIMEOUT:-1200}  # seconds
# pip's resolver lists lerobot's own pins that --no-deps left unmet; those lines are dropped, a failure is not.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout "$INSTALL_TIMEOUT" .venv-lerobot/bin/python -m pip install -q "${PACKAGES[@]}" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
grep -v -e "^WARNING: Location" -e "lerobot 0.4.4 requires" -e "^ERROR: pip's dependency resolver" "$log" || true
.venv-lerobot/bin/python -c "import gym_pusht, lerobot.scripts.lerobot_eval; print('lerobot-eval ready in .venv-lerobot')"
