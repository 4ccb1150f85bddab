"""The network boundary's shared rules for every HTTP surface (serve-policy, the dashboard, MCP over HTTP): which
addresses count as loopback, and how long a bearer token must be."""

from __future__ import annotations

import ipaddress

MIN_TOKEN = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
