"""Every string a parquet file carries, for the release's redaction: column values of every string-bearing type
(``string``, ``large_string``, ``binary`` read as UTF-8, dictionary-encoded, inside lists, structs and maps), column
and struct field names, and the key-value metadata of the schema and of every field (pandas' metadata included).

:func:`map_table` rebuilds a table with each of those strings passed through a callback ``fn(text, field, where)``
(``field``: the dotted path of the column, struct fields and map key holding a value, None for names and metadata; ``where``: its place, for
MANIFEST.json); the same walk checks a redacted table (a callback that raises on a finding). Binary values that
are not UTF-8 are read with ``surrogateescape``, so every ASCII secret in them is seen and the other bytes kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

TextFn = Callable[[str, str | None, str], str]


def _bytes(b: bytes, fn: TextFn, field: str | None, where: str) -> bytes:
    return fn(b.decode("utf-8", "surrogateescape"), field, where).encode("utf-8", "surrogateescape")


def _metadata(md: dict[bytes, bytes] | None, fn: TextFn, where: str) -> dict[bytes, bytes] | None:
    if not md:
        return md
    return {
        _bytes(k, fn, None, f"{where}{{metadata key}}"): _bytes(v, fn, None, f"{where}{{metadata}}")
        for k, v in md.items()
    }


def has_text(t: pa.DataType) -> bool:
    """True when values of type ``t`` can hold a string (or a struct's field names)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return True
    if pa.types.is_fixed_size_binary(t) or pa.types.is_struct(t) or pa.types.is_map(t):
        return True
    if pa.types.is_dictionary(t):
        return has_text(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return has_text(t.value_type)
    return False


def _field(f: pa.Field, fn: TextFn, where: str) -> pa.Field:
    name = fn(f.name, None, f"{where}{{name}}")
    return pa.field(name, map_type(f.type, fn, f"{where}.{name}"), f.nullable, _metadata(f.metadata, fn, where))


def map_type(t: pa.DataType, fn: TextFn, where: str) -> pa.DataType:
    """``t`` with its struct field names and field metadata passed through ``fn`` (fixed-size binary becomes
    ``binary``: a redacted value has another length)."""
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([_field(t.field(i), fn, where) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(map_type(t.key_type, fn, where), map_type(t.item_type, fn, where))
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, map_type(t.value_type, fn, where), t.ordered)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_field(t.value_field, fn, where), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(_field(t.value_field, fn, where))
    if pa.types.is_list(t):
        return pa.list_(_field(t.value_field, fn, where))
    return t


def map_value(v: Any, t: pa.DataType, fn: TextFn, field: str, where: str) -> Any:
    """A Python value of arrow type ``t`` (as ``to_pylist`` gives it) with every string passed through ``fn``."""
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        return map_value(v, t.value_type, fn, field, where)
    if isinstance(v, str):
        return fn(v, field, where)
    if isinstance(v, bytes):
        return _bytes(v, fn, field, where)
    if pa.types.is_struct(t):
        out = {}
        for i in range(t.num_fields):
            f = t.field(i)
            name = fn(f.name, None, f"{where}{{name}}")
            out[name] = map_value(v.get(f.name), f.type, fn, f"{field}.{f.name}", f"{where}.{name}")
        return out
    if pa.types.is_map(t):
        return [  # an item's field is its key's path (headers.X-Auth): credentials are known by their key
            (map_value(k, t.key_type, fn, field, where), map_value(x, t.item_type, fn, f"{field}.{k}", where))
            for k, x in v
        ]
    if isinstance(v, list):
        return [map_value(x, t.value_type, fn, field, f"{where}[{i}]") for i, x in enumerate(v)]
    return v


def map_table(table: pa.Table, fn: TextFn) -> pa.Table:
    """``table`` with every string it carries (see the module docstring) passed through ``fn``; columns without
    text are kept as they are (not converted)."""
    fields, columns = [], []
    for i, f in enumerate(table.schema):
        new = _field(f, fn, "")
        col = table.column(i)
        if has_text(f.type):
            values = [map_value(v, f.type, fn, f.name, f"{new.name}[{row}]") for row, v in enumerate(col.to_pylist())]
            col = pa.chunked_array([pa.array(values, type=new.type)])
        fields.append(new)
        columns.append(col)
    schema = pa.schema(fields, metadata=_metadata(table.schema.metadata, fn, "schema"))
    return pa.Table.from_arrays(columns, schema=schema)
