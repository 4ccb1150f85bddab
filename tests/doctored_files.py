"""Copies of recorded runs and JSON edits of them, as a hostile hand-over would make them (shared by the tests of
handed-over runs and of bad input)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def copy_of(recorded: Path, tmp_path: Path, name: str = "run") -> Path:
    """A copy of the folder `recorded` at tmp_path/name, links copied as links."""
    return Path(shutil.copytree(recorded, tmp_path / name, symlinks=True))


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the JSON object in `path` after `change` edited it in place."""
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
