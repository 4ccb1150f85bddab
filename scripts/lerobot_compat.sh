#!/usr/bin/env bash
# LeRobot compatibility test: rollbench run directories opened with lerobot's own LeRobotDataset (tests/compat).
# lerobot and torch never enter rollbench's install: they live in their own venv, .venv-lerobot. The runs are
# recorded by the core .venv (bash scripts/install.sh --dev first). Safe to run again.
#   bash scripts/lerobot_compat.sh [--eval] [extra pytest arguments]
# --eval: also install what lerobot's own evaluation loop needs (scripts/lerobot_eval_setup.sh), so that
# tests/compat/test_lerobot_eval.py (rollbench and lerobot-eval count the same PushT successes) runs instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
with_eval=0
if [ "${1:-}" = "--eval" ]; then with_eval=1; shift; fi
[ -x .venv/bin/rollbench ] || { echo "no .venv/bin/rollbench: run bash scripts/install.sh --dev first" >&2; exit 2; }

# Why these pins:
# - lerobot 0.4.4 is the newest release for Python 3.11. Its own pins (torch<2.11, torchvision<0.26, ...) would
#   download a multi-GB CUDA torch, so it is installed with --no-deps, beside exactly what lerobot.datasets imports.
# - torch 2.14.1 + torchvision 0.29.1: the pair pip takes from this machine kind's local wheel store (a CUDA build,
#   ~5.5 GB unpacked, run on the CPU). The CPU-only torch 2.13.0 file would be smaller, but PyPI's torchvision
#   (a CUDA build) fails to import beside it ("operator torchvision::nms does not exist").
# - torchcodec 0.14.0 (matches torch 2.14) decodes the videos: lerobot's default back-end, and the only one left,
#   since torchvision 0.29 has no VideoReader. It loads the system FFmpeg libraries (Debian package ffmpeg).
PACKAGES=(torch==2.14.1 torchvision==0.29.1 torchcodec==0.14.0 datasets==4.8.5 huggingface-hub==0.35.3
  accelerate==1.15.0 av==18.1.0 pytest==9.2.0 pytest-timeout==2.4.0)
LEROBOT=lerobot==0.4.4
INSTALL_TIMEOUT=${LEROBOT_INSTALL_TIMEOUT:-1200}  # seconds; a fresh install took ~2 min here

if ! ldconfig -p | grep -q 'libavcodec\.so\.'; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ffmpeg (shared libraries for torchcodec)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends ffmpeg
fi

[ -x .venv-lerobot/bin/python ] || python3.11 -m venv .venv-lerobot
pip=(timeout "$INSTALL_TIMEOUT" .venv-lerobot/bin/python -m pip install -q)
"${pip[@]}" --upgrade pip
"${pip[@]}" "${PACKAGES[@]}"
"${pip[@]}" --no-deps "$LEROBOT"
[ "$with_eval" = 0 ] || bash scripts/lerobot_eval_setup.sh

# Local files only: no hub access, and a throw-away cache for HF datasets' Arrow copies.
hf_home=$(mktemp -d)
trap 'rm -rf "$hf_home"' EXIT
HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$hf_home" ROLLBENCH_BIN="$PWD/.venv/bin/rollbench" \
  .venv-lerobot/bin/python -m pytest -q -p no:cacheprovider tests/compat "$@"
