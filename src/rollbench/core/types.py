"""Deprecated path of the plug-in contracts, which are public at the top level: ``rollbench.Policy``,
``rollbench.PolicyInfo``, ``rollbench.Observation``, ``rollbench.Env``... (see :mod:`rollbench`). Every name this
module had still imports from here, with a DeprecationWarning naming its new path; rollbench's own code uses
:mod:`rollbench.core.contracts`."""

from __future__ import annotations

from rollbench.core.moved import forward
from rollbench.core.public import CONTRACTS, public_in

__getattr__ = forward("rollbench.core.types", CONTRACTS, public_in(CONTRACTS))
