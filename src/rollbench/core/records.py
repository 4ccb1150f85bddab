"""One way a result record becomes JSON: :class:`JsonRecord`, the base of rollbench's frozen dataclass records
(statistics, sequential looks, power and scene results, reproduction verdicts, optimizer comparisons)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class JsonRecord:
    """Base of a dataclass whose JSON object is its fields in declaration order (nested dataclasses, lists, tuples
    and dicts converted recursively, as :func:`dataclasses.asdict` does). A record whose JSON differs from its fields
    overrides :meth:`to_dict` on top of this one and says why."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (a new one on every call)."""
        return asdict(cast("DataclassInstance", self))
