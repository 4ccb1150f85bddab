#!/usr/bin/env bash
# One-time set-up of the robustness benchmarks beyond what scripts/install.sh already gives (the in-process
# LIBERO-PRO suites): the LIBERO-PRO suites that need LIBERO-PRO's own code and LIBERO on its reference stack
# (scripts/libero_ref_setup.sh: .venv-libero-ref), then LIBERO-Plus (scripts/liberoplus_setup.sh: .venv-liberoplus).
# Each is its own pinned venv (docs/env-host.md); safe to run again (a re-check when they are built).
#   bash scripts/robustness_setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/libero_ref_setup.sh
t1=$SECONDS
bash scripts/liberoplus_setup.sh
echo "robustness set-up done: libero_ref $((t1 - t0)) s, liberoplus $((SECONDS - t1)) s; see: .venv/bin/rollbench envs libero --no-tasks"
