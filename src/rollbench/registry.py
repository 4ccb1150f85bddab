"""Deprecated: ``rollbench.registry`` was the plug-in registry's path before the package layout (issue 21).
``policy_options``, ``EnvFamily`` and ``EnvOptions`` are public at the top level now (``rollbench.policy_options``...);
every name this module had imports from here again, with a DeprecationWarning naming its new path."""

from __future__ import annotations

from rollbench.core.moved import forward
from rollbench.core.public import REGISTRY, public_in

__getattr__ = forward("rollbench.registry", REGISTRY, public_in(REGISTRY))
