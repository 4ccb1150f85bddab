#!/usr/bin/env bash
# rollbench[dev] on Python 3.12 in .venv-py312, for CI's fast test tier on the second supported interpreter
# (docs/install.md, "Python versions"). Kept across clones like the benchmark venvs (scripts/envhost/venv.sh): a
# re-run re-checks the pins and re-points the editable install at this checkout.
#   bash scripts/py312_setup.sh        (safe to run again; ~2 GB the first time)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/envhost/venv.sh
envhost_venv "${ROLLBENCH_PY312_VENV:-.venv-py312}" 3.12 -- -e ".[dev]"
"${ROLLBENCH_PY312_VENV:-.venv-py312}/bin/python" -c 'import platform, rollbench; print("py312 venv ready: Python", platform.python_version())'
