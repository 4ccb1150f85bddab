"""Name resolution: tasks, suites, comma lists, family prefixes, and policy names."""

from __future__ import annotations

import pytest

from rollbench.core.contracts import ConfigError
from rollbench.core.registry import family_of, make_policy, resolve_tasks


def test_suite_and_comma_list_resolve_in_order_without_duplicates() -> None:
    names = [t.name for t in resolve_tasks("scripted/reach-final, scripted/all")]
    assert names == ["scripted/reach-final", "scripted/reach"]


def test_family_prefix_with_colon_wins_over_slashes_in_the_id() -> None:
    assert family_of("gym:gym_pusht/PushT-v0").name == "gym"
    assert family_of("metaworld/reach-v3").name == "metaworld"


def test_unknown_family_lists_the_valid_ones() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown env family 'metawrld'.*Did you mean metaworld.*Valid env families: aloha, fetch, gym",
    ):
        resolve_tasks("metawrld/reach-v3")


def test_module_factory_policy_names_and_their_errors() -> None:
    assert make_policy("rollbench.policies.basic:make_zero").info.name == "rollbench.policies.basic:make_zero"
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module'"):
        make_policy("no_such_module:factory")
    with pytest.raises(ConfigError, match="has no callable 'nope'"):
        make_policy("rollbench.policies.basic:nope")
