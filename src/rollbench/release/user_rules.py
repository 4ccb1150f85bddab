"""The patterns of a user's ``release --rules`` file: each entry checked by name, and every regex compiled with
RE2, whose matching time is linear in the text whatever the pattern (google-re2, pyproject.toml)."""

from __future__ import annotations

from typing import Any

from rollbench.core.contracts import ConfigError


def rule_entries(rules: dict[str, Any], key: str) -> list[Any]:
    """``rules[key]`` (a list; [] when absent); ConfigError naming the key when it is not a list."""
    value = rules.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f"--rules: {key} must be a list")
    return value


def linear_pattern(pattern: str, where: str) -> Any:
    """A pattern of the user's ``--rules`` compiled with RE2, which matches in time linear in the text whatever the
    pattern: the text comes from the runs, so a backtracking engine would let a handed-over run make release hang
    on a pattern such as ``([a-z0-9]+[._-]?)+@corp\\.com`` (hostile round 11, F8). RE2 has no lookaround and no
    backreferences: such a pattern is refused by name."""
    import re2

    if not isinstance(pattern, str):
        raise ConfigError(f"--rules: {where} is not a string")
    options = re2.Options()
    options.log_errors = False  # RE2 would print its parse error on stderr itself
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ConfigError(
            f"--rules: {where} is not a pattern release can run in linear time (RE2 syntax: no lookaround, no "
            f"backreferences): {why}"
        ) from None
