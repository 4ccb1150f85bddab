#!/usr/bin/env bash
# A user's gymnasium venv whose pins conflict with rollbench's (gymnasium 1.0.0 and numpy 1.25.2 against rollbench's
# 1.4.0 and 1.26.4), the far side of tests/test_hosted_gym.py's `venv` test of the `hostedgym` family
# (docs/env-host.md): builds .venv-gym-1.0. rollbench is NOT installed there.
#   bash scripts/gym_venv_setup.sh        (safe to run again; ~20 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/envhost/venv.sh
VENV=${ROLLBENCH_GYM_TEST_VENV:-.venv-gym-1.0}
envhost_venv "$VENV" 3.11 -- gymnasium==1.0.0 numpy==1.25.2 cloudpickle==3.1.3 typing-extensions==4.16.0 farama-notifications==0.0.6
"$VENV/bin/python" -c 'import gymnasium, numpy; print("gym venv ready: gymnasium", gymnasium.__version__, "numpy", numpy.__version__)'
