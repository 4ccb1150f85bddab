"""Old import paths kept working after a name moved: a module's ``__getattr__`` that forwards to the new home with a
``DeprecationWarning`` naming it (PEP 562). One piece of code for every moved path (``rollbench.types``,
``rollbench.registry``, ``rollbench.core.types``, ...)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any


def forward(old: str, new: str, public: Iterable[str] = ()) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the old module ``old``: a name of module ``new`` is returned from there, with a
    DeprecationWarning saying where to import it from (``rollbench.NAME`` for the names in ``public``, else
    ``new.NAME``); any other name raises AttributeError as a missing attribute does."""
    shown = frozenset(public)

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        target = importlib.import_module(new)
        try:
            value = getattr(target, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r}") from None
        where = f"rollbench.{name}" if name in shown else f"{new}.{name}"
        warnings.warn(f"{old}.{name} is deprecated: import {where} instead", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__
