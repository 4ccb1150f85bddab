#!/usr/bin/env bash
# The one-time LeRobot step: builds lerobot's own interpreter beside rollbench's .venv and runs tests/compat there
# (rollbench run directories opened with lerobot's LeRobotDataset; with --eval, checkpoints run by rollbench against
# lerobot's own evaluation loop and its lerobot-eval main()). lerobot and torch never enter rollbench's install.
# The runs are recorded by the core .venv (bash scripts/install.sh --dev first). Safe to run again.
#   bash scripts/lerobot_compat.sh [--eval] [--lerobot 0.6.1|0.4.4|both] [--build-only|--tests-only] [pytest args]
# --lerobot 0.6.1 (default): .venv-lerobot, lerobot 0.6.1 on a CPython >= 3.12 found here (found by rollbench's
#   lerobot:CHECKPOINT policy without any option).
# --lerobot 0.4.4: .venv-lerobot-0.4.4, the older line on Python 3.11 (checkpoints of lerobot 0.4.x; use it with
#   --policy-options '{"python": ".venv-lerobot-0.4.4/bin/python"}' or ROLLBENCH_LEROBOT_PYTHON).
# --lerobot both: both venvs, built one after the other, then each line's tests; prints each line's time (CI).
# --eval: also install what lerobot's own evaluation loop needs for PushT, ALOHA and LIBERO.
# --build-only: build (or bring up to date) the venvs and stop; no tests (CI builds them while it lints).
# --tests-only: run the tests in the venvs as they are, without building or re-checking them (CI: its set-up stage
#   has just run --build-only with the same lines; the re-check costs ~15-20 CPU-s a line, pip resolving every pin
#   again and LIBERO's import check, beside the test stage). A venv that is not there is exit 2, one line.
set -euo pipefail
cd "$(dirname "$0")/.."
with_eval=0 lines=0.6.1 build_only=0 tests_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --eval) with_eval=1; shift ;;
    --build-only) build_only=1; shift ;;
    --tests-only) tests_only=1; shift ;;
    --lerobot) lines=${2:-}; shift 2 || { echo "--lerobot needs 0.6.1, 0.4.4 or both" >&2; exit 2; } ;;
    *) break ;;
  esac
done
case "$lines" in
  0.6.1 | 0.4.4) ;;
  both) lines="0.6.1 0.4.4" ;;
  *) echo "--lerobot $lines: give 0.6.1 (default), 0.4.4 or both" >&2; exit 2 ;;
esac
[ "$build_only$tests_only" != 11 ] || { echo "--build-only and --tests-only exclude each other: give one" >&2; exit 2; }
[ -x .venv/bin/rollbench ] || { echo "no .venv/bin/rollbench: run bash scripts/install.sh --dev first" >&2; exit 2; }
INSTALL_TIMEOUT=${LEROBOT_INSTALL_TIMEOUT:-1200}  # seconds per pip call; a fresh 0.6.1 venv took ~2-5 min here
# Where new venvs are made (the checkout gets a link): pip's HTTP cache does not keep this machine's downloads (its
# index sends no cache headers), so torch would be fetched again by every fresh clone; a kept venv is re-checked by
# pip instead. LEROBOT_VENV_HOME= (empty) makes them inside the checkout.
VENV_HOME=${LEROBOT_VENV_HOME-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/rollbench/lerobot-venvs}

# lerobot 0.6.1 needs CPython >= 3.12 (its Requires-Python). Looked for: $LEROBOT_PYTHON, python3.13 and python3.12
# on PATH, then pyenv's versions; none found is exit 2 with one line saying how to get one.
python312() {
  local c
  for c in "${LEROBOT_PYTHON:-}" python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[23].*/bin/python; do
    [ -n "$c" ] || continue
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

# Why these pins (0.6.1, installed with its dependencies; pip resolves the rest inside lerobot's own ranges):
# - lerobot[dataset]==0.6.1: the current release (LeRobotDataset, the policies, lerobot-eval); [dataset] brings
#   datasets, pyarrow, av 15 and torchcodec < 0.12, which decode the videos of rollbench's run directories.
#   torch resolves to 2.11 (lerobot asks for < 2.12; this machine's pip constraint caps it at 2.14.1 anyway), a
#   CUDA build from PyPI that runs on the CPU; pip's cache keeps it for the next build.
# - diffusers 0.39.x: lerobot 0.6.1's [diffusion] extra (>= 0.38, < 0.40): the Diffusion policy's noise scheduler.
# - gym-pusht 0.1.8 + pymunk 6.11.1 + pygame 2.6.1, gym-aloha 0.1.5 + dm-control 1.0.28 + MuJoCo 3.3.0: the
#   simulators at rollbench's own versions (its .venv), so both sides step the same physics and images;
#   dm-control 1.0.28 is the newest that admits MuJoCo 3.3.0 (docs/design.md, ALOHA).
# - pytest 9.2.0 + pytest-timeout 2.4.0: tests/compat runs in this interpreter.
PACKAGES_061=("lerobot[dataset]==0.6.1" "diffusers>=0.38,<0.40" gym-pusht==0.1.8 pymunk==6.11.1 pygame==2.6.1
  pytest==9.2.0 pytest-timeout==2.4.0)
EVAL_061=(gym-aloha==0.1.5 dm-control==1.0.28 mujoco==3.3.0)

# Why these pins (0.4.4, the older line):
# - lerobot 0.4.4 is the newest release for Python 3.11. Its own pins (torch<2.11, torchvision<0.26, ...) would
#   download a multi-GB CUDA torch, so it is installed with --no-deps, beside exactly what lerobot.datasets imports.
# - torch 2.14.1 + torchvision 0.29.1: the pair pip takes from this machine kind's local wheel store (a CUDA build,
#   ~5.5 GB unpacked, run on the CPU). The CPU-only torch 2.13.0 file would be smaller, but PyPI's torchvision
#   (a CUDA build) fails to import beside it ("operator torchvision::nms does not exist").
# - torchcodec 0.14.0 (matches torch 2.14) decodes the videos: lerobot's default back-end, and the only one left,
#   since torchvision 0.29 has no VideoReader. It loads the system FFmpeg libraries (Debian package ffmpeg).
PACKAGES_044=(torch==2.14.1 torchvision==0.29.1 torchcodec==0.14.0 datasets==4.8.5 huggingface-hub==0.35.3
  accelerate==1.15.0 av==18.1.0 pytest==9.2.0 pytest-timeout==2.4.0)

if ! ldconfig -p | grep -q 'libavcodec\.so\.'; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ffmpeg (shared libraries for torchcodec)"
  (  # one apt at a time: the one-time set-ups may run side by side (.ci/run)
    flock 9
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
  ) 9>/tmp/.rollbench-apt.lock
fi

# pip's messages about the local index folders this machine lists are noise; errors are shown in full.
quiet_pip() {
  local venv=$1 log
  shift
  log=$(mktemp)
  if ! timeout "$INSTALL_TIMEOUT" "$venv/bin/python" -m pip install -q "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; return 1
  fi
  grep -v -e "^WARNING: Location" -e "requires .*, but you have" -e "^ERROR: pip's dependency resolver" "$log" || true
  rm -f "$log"
}

venv_of() { if [ "$1" = 0.6.1 ]; then echo .venv-lerobot; else echo ".venv-lerobot-$1"; fi; }

build() {  # build LINE: create or update the line's venv (a venv of another Python or lerobot is made anew)
  local line=$1 venv py want
  venv=$(venv_of "$line")
  if [ "$line" = 0.6.1 ]; then
    py=$(python312) || {
      echo "lerobot 0.6.1 needs CPython >= 3.12 and none was found: install one (pyenv install 3.12, or Debian's python3.12) and rerun, set LEROBOT_PYTHON=PATH, or use --lerobot 0.4.4" >&2
      exit 2
    }
    want="(3, 12)"
  else
    py=python3.11 want="(3, 11)"
  fi
  if [ ! -e "$venv" ] && [ ! -L "$venv" ] && [ -n "$VENV_HOME" ]; then
    # kept across clones (CI's fresh clone of each run, a second checkout): the venv lives in $VENV_HOME and the
    # checkout's .venv-lerobot* is a link to it; the pins below are re-checked by pip on every run, so a kept venv
    # is brought to this checkout's pins (a no-op when they did not change)
    mkdir -p "$VENV_HOME"
    ln -sfn "$VENV_HOME/lerobot-$line" "$venv"
  fi
  if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c "import sys; v = sys.version_info[:2]; sys.exit(not (v >= (3, 12) if $want >= (3, 12) else v == $want))"; then
    echo "$venv is of another Python: rebuilding it"; rm -rf "$(readlink -f "$venv")"
  fi
  [ -x "$venv/bin/python" ] || "$py" -m venv "$(readlink -f "$venv")"
  if [ "$line" = 0.6.1 ]; then
    if [ "$with_eval" = 1 ]; then quiet_pip "$venv" "${PACKAGES_061[@]}" "${EVAL_061[@]}"; else quiet_pip "$venv" "${PACKAGES_061[@]}"; fi
  else
    quiet_pip "$venv" "${PACKAGES_044[@]}"
    quiet_pip "$venv" --no-deps lerobot==0.4.4
  fi
  [ "$with_eval" = 0 ] || LEROBOT_VENV="$venv" bash scripts/lerobot_eval_setup.sh
  "$venv/bin/python" -c "import lerobot, sys; from importlib.metadata import version as v; assert v('lerobot') == '$line', v('lerobot'); print('lerobot', v('lerobot'), 'on Python', sys.version.split()[0], 'in $venv')"
}

# A test's fixture runs rollbench and lerobot's own loop one after the other: on a loaded 2-core machine the Diffusion
# pair took over 10 min (pyproject's 600 s per test), so this stage allows 30 min per test.
# torch runs single-threaded here (OMP_NUM_THREADS=1, unless set already), in this interpreter and in the policy hosts
# rollbench starts from it (they inherit the environment), so both sides of every comparison compute alike: beside
# other processes on a small machine torch's waiting worker threads cost many times the work (lerobot's Diffusion
# loop on PushT, 2 episodes: 14.1 CPU-s with 2 threads, 1.3 with 1, on the 2-core CI machine under load). The
# number of threads changes torch's float results; equality is tested at one number, the same on both sides.
run_tests() {  # run_tests LINE [pytest args]: tests/compat offline, with local files only
  local venv hf_home rc=0
  venv=$(venv_of "$1")
  shift
  hf_home=$(mktemp -d)
  HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$hf_home" ROLLBENCH_BIN="$PWD/.venv/bin/rollbench" \
    ROLLBENCH_COMPAT_RUNS="$runs" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout "${LEROBOT_TEST_TIMEOUT:-1800}" tests/compat "$@" || rc=$?
  rm -rf "$hf_home"
  return "$rc"
}

times=()
for line in $lines; do
  if [ "$tests_only" = 1 ]; then
    [ -x "$(venv_of "$line")/bin/python" ] || {
      echo "--tests-only: no $(venv_of "$line") for lerobot $line: run bash scripts/lerobot_compat.sh --lerobot $line --build-only first" >&2
      exit 2
    }
    continue
  fi
  t0=$SECONDS
  build "$line"
  times+=("$(printf '%5ds  lerobot %s: build' $((SECONDS - t0)) "$line")")
done
if [ "$build_only" = 1 ]; then
  echo "=== LeRobot build times"; printf '%s\n' "${times[@]}"; exit 0
fi
# The lines' tests run side by side (most of their time is waiting on hosts, simulators and subprocesses); each
# line's output is kept apart and printed whole when it ends, with its exit code and time. Side by side rather than
# one after the other: the CPU work is the same either way, and beside CI's test stage two lines keep the machine
# busy to the end where one line alone would run past it. The runs that do not depend on the line (recorded by the
# core .venv: tests/compat/shared_runs.py) are recorded once, by whichever line needs one first, into $runs.
rc=0
logs=$(mktemp -d)
runs=$(mktemp -d)
pids=()
for line in $lines; do
  (t0=$SECONDS; r=0
   echo "=== tests/compat on lerobot $line ($(venv_of "$line"))"
   run_tests "$line" "$@" || r=$?
   echo "=== lerobot $line: exit $r after $((SECONDS - t0)) s"
   exit "$r") >"$logs/$line.log" 2>&1 &
  pids+=($!)
done
i=0
for line in $lines; do
  r=0
  wait "${pids[$i]}" || r=$?
  [ "$r" = 0 ] || rc=$r
  cat "$logs/$line.log"
  times+=("$(tail -1 "$logs/$line.log" | sed 's/^=== //')")
  i=$((i + 1))
done
rm -rf "$logs" "$runs"
echo "=== LeRobot stage times"
printf '%s\n' "${times[@]}"
exit "$rc"
