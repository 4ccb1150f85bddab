"""Deprecated: ``rollbench.types`` was the plug-in contracts' path before the package layout (issue 21). The names
are public at the top level now (``rollbench.Policy``, ``rollbench.PolicyInfo``, ``rollbench.Observation``...);
every name this module had imports from here again, with a DeprecationWarning naming its new path."""

from __future__ import annotations

from rollbench.core.moved import forward
from rollbench.core.public import CONTRACTS, public_in

__getattr__ = forward("rollbench.types", CONTRACTS, public_in(CONTRACTS))
