"""The checkpoints of a training run, in training-step order.

Layouts: lerobot-train's output folder (``DIR/checkpoints/<6-digit step>/pretrained_model/`` and
``DIR/checkpoints/last``, a link to the newest), its ``checkpoints/`` folder itself, or any folder of checkpoint
folders (``DIR/<name with a step number>/``, the checkpoint being its ``pretrained_model/`` when it has one, else the
folder). A folder's step is the last number in its name (``005000``, ``step-5000``, ``ckpt_5000``). Links are never
followed (``last`` is one; a link could lead outside DIR), and entries that are not folders are ignored.

A checkpoint is **complete** when its ``config.json`` and weights file (``model.safetensors``) are regular files;
:func:`fingerprint` (every file's size and mtime, within stated bounds) lets ``--watch`` wait until it stops changing.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from rollbench.core.contracts import ConfigError
from rollbench.core.walk import Bounds, OnExcess, TreeTooLarge, walk_tree

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
MAX_CHECKPOINTS = 10_000  # entries of one training run's folder considered (a stated bound on the work)
MAX_CHECKPOINT_ENTRIES = 10_000  # directory entries under one checkpoint read for its fingerprint
MAX_CHECKPOINT_DEPTH = 32  # directory levels under one checkpoint read for its fingerprint
_NUMBER = re.compile(r"(\d+)(?!.*\d)", re.ASCII)  # ASCII digits: "ckpt_٣" names no step


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: its training ``step``, folder ``name`` under the run and ``path`` (the folder a
    ``lerobot:PATH`` policy loads)."""

    step: int
    name: str
    path: Path

    @property
    def label(self) -> str:
        """The run directory's name under OUT: the step, 6 digits as lerobot-train names it (``005000``)."""
        return f"{self.step:06d}"


def _is_dir(path: Path) -> bool:
    """A folder, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def checkpoints_root(run: Path) -> Path:
    """The folder holding the checkpoint folders: ``run/checkpoints`` when it is a folder (lerobot-train's output),
    else ``run``. ConfigError when ``run`` is not a folder (or is a link)."""
    if not _is_dir(run):
        raise ConfigError(f"{run} is not a folder of checkpoints (a lerobot-train output folder or its checkpoints/)")
    return run / "checkpoints" if _is_dir(run / "checkpoints") else run


def find_checkpoints(run: Path) -> list[Checkpoint]:
    """Every checkpoint folder under ``run`` (complete or not), in step order. ConfigError naming the culprits when
    two folders carry the same step, and when ``run`` holds more than :data:`MAX_CHECKPOINTS` entries."""
    root = checkpoints_root(run)
    found: dict[int, Checkpoint] = {}
    with os.scandir(root) as entries:
        for n, entry in enumerate(entries):
            if n >= MAX_CHECKPOINTS:
                raise ConfigError(f"{root} holds more than {MAX_CHECKPOINTS} entries; point at one training run")
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                continue  # checkpoints/last, and anything else that is not a folder
            m = _NUMBER.search(entry.name)
            if m is None:
                continue
            folder = root / entry.name
            model = folder / "pretrained_model"
            ckpt = Checkpoint(int(m.group(1)), entry.name, model if _is_dir(model) else folder)
            if ckpt.step in found:
                raise ConfigError(
                    f"{root}: {found[ckpt.step].name} and {entry.name} both name training step {ckpt.step}"
                )
            found[ckpt.step] = ckpt
    return [found[s] for s in sorted(found)]


def is_complete(ckpt: Checkpoint) -> bool:
    """Whether its ``config.json`` and ``model.safetensors`` are regular files."""
    return _is_file(ckpt.path / CONFIG) and _is_file(ckpt.path / WEIGHTS)


def fingerprint(
    ckpt: Checkpoint, max_entries: int = MAX_CHECKPOINT_ENTRIES, on_excess: OnExcess = "truncate"
) -> tuple[tuple[str, int, int], ...]:
    """``(relative path, size, mtime ns)`` of every regular file under the checkpoint (links not followed), sorted:
    equal over two polls means nothing was written in between. At most ``max_entries`` directory entries and
    :data:`MAX_CHECKPOINT_DEPTH` levels are read (:func:`rollbench.core.walk.walk_tree`); past them,
    ``on_excess="refuse"`` raises ConfigError naming the step, ``"truncate"`` gives the files of the directories read
    (the same ones on every poll of an unchanged folder)."""
    try:
        listing = walk_tree(ckpt.path, Bounds(max_entries, MAX_CHECKPOINT_DEPTH, on_excess))
    except TreeTooLarge as exc:
        raise ConfigError(f"step {ckpt.step}: {exc}") from None
    return tuple(sorted((f.rel, f.size, f.mtime_ns) for f in listing.files))
