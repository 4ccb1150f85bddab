"""A run's step files (``data/chunk-CCC/file-FFF.parquet``) against the step features its ``meta/info.json``
declares: each column's dtype and width, as info.json spells them (``float32``, ``float32[4]``).

One check for every reader: ``grade`` names a step file that differs and leaves it out
(:func:`rollbench.grading.declared.declared_step_files`), and a resume refuses the run before anything is written
against the run's own features (:func:`rollbench.record.committed.committed_lengths`). Pure functions of arrow schemas and the info document: no file
is opened here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

_NOT_IN_DATA = ("video", "image")  # feature dtypes stored beside the step rows, not in them


def type_text(t: pa.DataType) -> str:
    """An arrow type in info.json's terms: ``float32``, ``bool``, ``int64``, a fixed-size list ``float32[4]``,
    a variable list ``float32[]``; other types by arrow's own name (``string``, ``uint64``)."""
    if pa.types.is_fixed_size_list(t):
        return f"{type_text(t.value_type)}[{t.list_size}]"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{type_text(t.value_type)}[]"
    if pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t):
        return np.dtype(t.to_pandas_dtype()).name  # float32, int64, uint64, bool: numpy's names, as info.json's
    return str(t)


def declared_text(feature: Mapping[str, Any]) -> str | None:
    """What info.json's ``feature`` declares a step column to hold, as :func:`type_text` spells a column (shape
    ``[1]`` is a scalar column, as LeRobot writes it; ``[n]`` a fixed-size list of n); None for a feature stored
    outside the step files (video, image) or one without a string dtype and a list shape."""
    dtype, shape = feature.get("dtype"), feature.get("shape")
    if dtype in _NOT_IN_DATA or not isinstance(dtype, str) or not isinstance(shape, list):
        return None
    text = dtype
    if shape != [1]:
        for n in reversed(shape):
            text += f"[{n}]"
    return text


def declared_columns(info: Any) -> dict[str, str]:
    """The step columns ``info`` (meta/info.json's document, any JSON value) declares: name -> :func:`declared_text`;
    empty when it holds no ``features`` object (features that are not objects are left out)."""
    features = info.get("features") if isinstance(info, dict) else None
    if not isinstance(features, dict):
        return {}
    return {k: t for k, f in features.items() if isinstance(f, dict) and (t := declared_text(f)) is not None}


def step_file_differences(
    declared: Mapping[str, str], schemas: Mapping[Path, pa.Schema]
) -> tuple[list[str], dict[Path, str]]:
    """How step files differ from the ``declared`` columns (:func:`declared_columns`): ``(shared, own)``. ``shared``:
    the differences every file holds, when there are two or more files (meta/info.json's, not the files'; sorted by
    column); ``own``: each file's first other difference (``column NAME is declared float32[4] in meta/info.json but
    holds float64[]``, ``... is missing``, ``... is not declared``); files without one are not in it. Nothing differs
    without declared columns."""
    if not declared:
        return [], {}
    differences = {f: _schema_differences(declared, s) for f, s in schemas.items()}
    common = set.intersection(*(set(d) for d in differences.values())) if len(differences) > 1 else set()
    own = {f: mine[0][1] for f, d in differences.items() if (mine := [x for x in d if x not in common])}
    return [why for _column, why in sorted(common)], own


def file_difference(declared: Mapping[str, str], schema: pa.Schema) -> str | None:
    """The first way a step file's ``schema`` differs from the ``declared`` columns (as in
    :func:`step_file_differences`), or None."""
    differences = _schema_differences(declared, schema)
    return differences[0][1] if differences else None


def _same_width(want: str) -> tuple[str, ...]:
    """The spellings of a declared type: a one-wide column is a scalar (LeRobot's way) or a list of one
    (rollbench's ``action`` and ``observation.state`` of a 1-D space)."""
    if want.endswith("[1]"):
        return (want, want[:-3])
    return (want, want + "[1]") if "[" not in want else (want,)


def _schema_differences(declared: Mapping[str, str], schema: pa.Schema) -> list[tuple[str, str]]:
    """``(column, why)`` for every column of ``schema`` that differs from ``declared``: held more than once, missing,
    of another dtype or width, or not declared."""
    found = {field.name: type_text(field.type) for field in schema}
    out = [(n, f"column {n} is held {schema.names.count(n)} times") for n in found if schema.names.count(n) > 1]
    for name, want in declared.items():
        if name not in found:
            out.append((name, f"column {name} declared in meta/info.json ({want}) is missing"))
        elif found[name] not in _same_width(want):
            out.append((name, f"column {name} is declared {want} in meta/info.json but holds {found[name]}"))
    out += [(n, f"column {n} ({found[n]}) is not declared in meta/info.json") for n in found if n not in declared]
    return out
