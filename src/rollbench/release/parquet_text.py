"""Every string a parquet file carries, for the release's redaction: column values of every text type (``string``,
``large_string``, ``string_view``, ``binary``, ``large_binary``, ``binary_view`` and ``fixed_size_binary`` read as
UTF-8, dictionary-encoded, inside lists, list views, structs and maps, and the storage of extension types such as
``arrow.json``), column and struct field names, and the key-value metadata of the schema and of every field (pandas'
metadata included).

Fail closed (:func:`has_text`): a column is left unread only when its type is known to carry no text (numbers,
booleans, times, dates, durations, intervals, decimals, nulls, and lists and dictionaries of those); a type neither
known to be text-free nor readable (a union, a run-end encoded array, an arrow type added later) raises
:class:`UnscannableType`, so the file is refused rather than copied unread.

:func:`map_table` rebuilds a table with each of those strings passed through a callback ``fn(text, field, where)``
(``field``: the dotted path of the column, struct fields and map key holding a value, None for names and metadata;
``where``: its place, for MANIFEST.json), and each list, struct or map value, once its own strings were passed
(innermost first), through an optional ``whole(value, type, field, where)`` that returns its replacement (a
secret held only by the value as a whole: :mod:`rollbench.release.parquet_redact`); columns of lists of numbers are
read for ``whole`` too, and kept. The same walk checks a redacted table (callbacks that raise on a finding). Binary
values that are not UTF-8 are read with ``surrogateescape``, so every ASCII secret in them is seen and the other
bytes kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TextFn = Callable[[str, str | None, str], str]
WholeFn = Callable[[Any, pa.DataType, str, str], Any]
NumbersFn = Callable[[np.ndarray], bool]  # (a column's integral leaves) -> whether to read it for ``whole``


class UnscannableType(Exception):
    """A column whose type release can neither read for text nor knows to be free of it."""

    def __init__(self, type_: pa.DataType, column: str = "") -> None:
        super().__init__(f"column {column!r} is of type {type_}")
        self.type, self.column = type_, column


def _bytes(b: bytes, fn: TextFn, field: str | None, where: str) -> bytes:
    return fn(b.decode("utf-8", "surrogateescape"), field, where).encode("utf-8", "surrogateescape")


def _metadata(md: dict[bytes, bytes] | None, fn: TextFn, where: str) -> dict[bytes, bytes] | None:
    if not md:
        return md
    return {
        _bytes(k, fn, None, f"{where}{{metadata key}}"): _bytes(v, fn, None, f"{where}{{metadata}}")
        for k, v in md.items()
    }


_TYPES = pa.types
# the allow-list: types whose values are numbers, booleans, times or nulls (no string can be stored in them)
TEXT_FREE = (_TYPES.is_null, _TYPES.is_boolean, _TYPES.is_integer, _TYPES.is_floating, _TYPES.is_decimal,
             _TYPES.is_temporal, _TYPES.is_interval)  # fmt: skip
TEXT = (_TYPES.is_string, _TYPES.is_large_string, _TYPES.is_string_view, _TYPES.is_binary, _TYPES.is_large_binary,
        _TYPES.is_binary_view, _TYPES.is_fixed_size_binary)  # fmt: skip
LISTS = (_TYPES.is_list, _TYPES.is_large_list, _TYPES.is_fixed_size_list, _TYPES.is_list_view,
         _TYPES.is_large_list_view)  # fmt: skip


def _text_free(t: pa.DataType) -> bool:
    return any(is_(t) for is_ in TEXT_FREE)


def _text_type(t: pa.DataType) -> bool:
    return any(is_(t) for is_ in TEXT)


def _list_like(t: pa.DataType) -> bool:
    return any(is_(t) for is_ in LISTS)


def has_text(t: pa.DataType) -> bool:
    """True when values of type ``t`` can hold a string (or a struct's field names); False for a type known to hold
    none (see the module docstring). Raises :class:`UnscannableType` for any other type, anywhere inside ``t``."""
    if _text_free(t):
        return False
    if _text_type(t):
        return True
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            has_text(t.field(i).type)
        return True
    if pa.types.is_map(t):
        has_text(t.key_type)
        has_text(t.item_type)
        return True
    if pa.types.is_dictionary(t) or _list_like(t):
        return has_text(t.value_type)
    if isinstance(t, pa.BaseExtensionType):
        return has_text(t.storage_type)
    raise UnscannableType(t)


def has_containers(t: pa.DataType) -> bool:
    """True when values of type ``t`` hold lists, structs or maps (values :func:`map_table` passes to ``whole``)."""
    if pa.types.is_struct(t) or pa.types.is_map(t) or _list_like(t):
        return True
    if pa.types.is_dictionary(t):
        return has_containers(t.value_type)
    return isinstance(t, pa.BaseExtensionType) and has_containers(t.storage_type)


def has_dictionary(t: pa.DataType) -> bool:
    """True when a dictionary-encoded array is anywhere in type ``t``."""
    if pa.types.is_dictionary(t):
        return True
    if pa.types.is_struct(t):
        return any(has_dictionary(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return has_dictionary(t.key_type) or has_dictionary(t.item_type)
    if _list_like(t):
        return has_dictionary(t.value_type)
    return isinstance(t, pa.BaseExtensionType) and has_dictionary(t.storage_type)


def storage(t: pa.DataType) -> pa.DataType:
    """``t`` with every extension type in it replaced by its storage type (what ``to_pylist`` reads as plain
    strings, bytes, numbers and containers)."""
    if isinstance(t, pa.BaseExtensionType):
        return storage(t.storage_type)
    return _rebuilt(t, storage, lambda f: pa.field(f.name, storage(f.type), f.nullable, f.metadata))


def _rebuilt(
    t: pa.DataType, inner: Callable[[pa.DataType], pa.DataType], fld: Callable[[pa.Field], pa.Field]
) -> pa.DataType:
    """``t`` with its children rebuilt: ``inner`` for a map's or dictionary's types, ``fld`` for fields."""
    if pa.types.is_struct(t):
        return pa.struct([fld(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(inner(t.key_type), inner(t.item_type))
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, inner(t.value_type), t.ordered)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(fld(t.value_field), t.list_size)
    for is_, make in ((pa.types.is_large_list, pa.large_list), (pa.types.is_list, pa.list_),
                      (pa.types.is_list_view, pa.list_view), (pa.types.is_large_list_view, pa.large_list_view)):  # fmt: skip
        if is_(t):
            return make(fld(t.value_field))
    return t


def _field(f: pa.Field, fn: TextFn, where: str) -> pa.Field:
    name = fn(f.name, None, f"{where}{{name}}")
    return pa.field(name, map_type(f.type, fn, f"{where}.{name}"), f.nullable, _metadata(f.metadata, fn, where))


def map_type(t: pa.DataType, fn: TextFn, where: str) -> pa.DataType:
    """``t`` with its struct field names and field metadata passed through ``fn`` (fixed-size binary becomes
    ``binary``: a redacted value has another length; an extension type whose storage type so changes becomes that
    type, the others are kept)."""
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if isinstance(t, pa.BaseExtensionType):
        mapped = map_type(t.storage_type, fn, where)
        return t if mapped == t.storage_type else mapped
    return _rebuilt(t, lambda x: map_type(x, fn, where), lambda f: _field(f, fn, where))


def map_value(v: Any, t: pa.DataType, fn: TextFn, field: str, where: str, whole: WholeFn | None = None) -> Any:
    """A Python value of arrow type ``t`` (as ``to_pylist`` gives it; ``t`` without extension types, see
    :func:`storage`) with every string passed through ``fn`` and every list, struct or map value then through
    ``whole``."""
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        return map_value(v, t.value_type, fn, field, where, whole)
    if isinstance(v, str):
        return fn(v, field, where)
    if isinstance(v, bytes):
        return _bytes(v, fn, field, where)
    if pa.types.is_struct(t):
        out: Any = {}
        for i in range(t.num_fields):
            f = t.field(i)
            name = fn(f.name, None, f"{where}{{name}}")
            out[name] = map_value(v.get(f.name), f.type, fn, f"{field}.{f.name}", f"{where}.{name}", whole)
    elif pa.types.is_map(t):
        out = [  # an item's field is its key's path (headers.X-Auth): credentials are known by their key
            (map_value(k, t.key_type, fn, field, where, whole),
             map_value(x, t.item_type, fn, f"{field}.{k}", where, whole))
            for k, x in v
        ]  # fmt: skip
    elif isinstance(v, list):
        out = [map_value(x, t.value_type, fn, field, f"{where}[{i}]", whole) for i, x in enumerate(v)]
    else:
        return v
    return whole(out, t, field, where) if whole is not None else out


def fill_text(v: Any, t: pa.DataType, text: str) -> Any:
    """A Python value of arrow type ``t`` (as :func:`map_value` takes it) with every string and binary in it, struct
    field values, map keys and items and list items alike, replaced by ``text``; numbers and the rest kept."""
    if v is None:
        return None
    if pa.types.is_dictionary(t):
        return fill_text(v, t.value_type, text)
    if isinstance(v, str):
        return text
    if isinstance(v, bytes):
        return text.encode("utf-8")
    if pa.types.is_struct(t):
        return {k: fill_text(x, t.field(i).type, text) for i, (k, x) in enumerate(v.items())}
    if pa.types.is_map(t):
        return [(fill_text(k, t.key_type, text), fill_text(x, t.item_type, text)) for k, x in v]
    if isinstance(v, list):
        return [fill_text(x, t.value_type, text) for x in v]
    return v


def _concatenated(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def integral_leaves(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Every integral number in ``arr`` at any depth (int64; floats that are whole numbers of at most 2**31 in
    size, as the secret detector counts them), read from the arrays as stored: list children, struct fields, map keys
    and items, dictionary entries and extension storage whole, a superset of what the rows reference."""
    if isinstance(arr, pa.ChunkedArray):
        return _concatenated([integral_leaves(c) for c in arr.chunks])
    t = arr.type
    if isinstance(arr, pa.ExtensionArray):
        return integral_leaves(arr.storage)
    if pa.types.is_integer(t):
        return np.asarray(pc.cast(arr.drop_null(), pa.int64(), safe=False), dtype=np.int64)
    if pa.types.is_floating(t):
        x = np.asarray(pc.cast(arr.drop_null(), pa.float64()), dtype=np.float64)
        x = x[np.isfinite(x) & (np.abs(x) <= 2**31)]
        return x[x == np.floor(x)].astype(np.int64)
    if pa.types.is_dictionary(t):
        return integral_leaves(arr.dictionary)
    if pa.types.is_struct(t):
        return _concatenated([integral_leaves(arr.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return _concatenated([integral_leaves(arr.keys), integral_leaves(arr.items)])
    if _list_like(t):
        return integral_leaves(arr.values)
    return np.zeros(0, np.int64)


def _column(
    col: pa.ChunkedArray, f: pa.Field, new: pa.Field, fn: TextFn, whole: WholeFn | None, numbers: NumbersFn | None
) -> pa.ChunkedArray:
    """One column with its values mapped (see :func:`map_table`)."""
    try:
        text = has_text(f.type)
    except UnscannableType as exc:
        raise UnscannableType(exc.type, f.name) from None
    if not text and (whole is None or not has_containers(f.type)):
        return col
    if not text and numbers is not None and not numbers(integral_leaves(col)):
        return col
    plain = storage(f.type)
    values = col.cast(plain) if plain != f.type else col
    mapped = [map_value(v, plain, fn, f.name, f"{new.name}[{row}]", whole) for row, v in enumerate(values.to_pylist())]
    if not text:  # lists of numbers: read for ``whole`` (which raises when it cannot replace), kept as they are
        return col
    built = pa.array(mapped, type=storage(new.type))
    return pa.chunked_array([built.cast(new.type) if new.type != built.type else built])


def map_table(table: pa.Table, fn: TextFn, whole: WholeFn | None = None, numbers: NumbersFn | None = None) -> pa.Table:
    """``table`` with every string it carries (see the module docstring) passed through ``fn`` and every list,
    struct or map value through ``whole``; columns without text are kept as they are (not converted), and read for
    ``whole`` only when ``numbers`` (None: always) says their :func:`integral_leaves` could spell a secret (a
    column of random floats holds no code point). Raises :class:`UnscannableType` (naming the column) for a column
    of a type release cannot read."""
    fields, columns = [], []
    for i, f in enumerate(table.schema):
        new = _field(f, fn, "")
        columns.append(_column(table.column(i), f, new, fn, whole, numbers))
        fields.append(new)
    schema = pa.schema(fields, metadata=_metadata(table.schema.metadata, fn, "schema"))
    return pa.Table.from_arrays(columns, schema=schema)
