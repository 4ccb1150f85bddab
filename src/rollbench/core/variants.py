"""Reading an instruction sweep file (``rollbench eval --instructions FILE``).

Two formats:

* plain text: one instruction per line, named ``v0``, ``v1``, ... in file order; blank lines and lines starting
  with ``#`` are skipped;
* JSON (the file starts with ``[`` or ``{``): a list of ``{"name": ..., "instruction": ...}`` objects, or one object
  mapping names to instructions (in file order).

Names match ``[A-Za-z0-9][A-Za-z0-9._-]*`` (at most 64 characters) and are unique; the first variant is the
reference the others are paired against in the results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import parse_json, read_text

MAX_INSTRUCTIONS_BYTES = 2**20  # 1 MiB: at most 64 variants (spec.MAX_VARIANTS) of a sentence each


def read_variants(path: Path) -> list[dict[str, Any]]:
    """``[{"name", "instruction"}, ...]`` from ``path``; raises ConfigError naming the file on any problem."""
    text = read_text(path, "--instructions", MAX_INSTRUCTIONS_BYTES)
    if text.lstrip()[:1] in ("[", "{"):
        data = parse_json(text, f"--instructions {path}")
        if isinstance(data, dict):
            data = [{"name": k, "instruction": v} for k, v in data.items()]
        if not isinstance(data, list) or not all(
            isinstance(d, dict) and set(d) == {"name", "instruction"} for d in data
        ):
            raise ConfigError(
                f'--instructions {path}: JSON must be a list of {{"name", "instruction"}} objects '
                "or an object mapping names to instructions"
            )
        variants = data
    else:
        lines = [ln.strip() for ln in text.splitlines()]
        variants = [{"name": f"v{i}", "instruction": ln} for i, ln in enumerate(x for x in lines if x and x[0] != "#")]
    if not variants:
        raise ConfigError(f"--instructions {path}: no instruction in the file")
    return variants
