"""The one formatter (rollbench.core.format): exact strings, written out by hand, and the one "missing" sign in every
surface that shows numbers (CLI tables, report, dashboard, reproduction text, MCP summary)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rollbench.core import format as fmt
from rollbench.core.identity import sanitize_segment


@pytest.mark.parametrize(
    ("func", "args", "expected"),
    [
        (fmt.pct, (0.705,), "70.5%"),
        (fmt.pct, (1.0,), "100.0%"),
        (fmt.pct, (0.0,), "0.0%"),
        (fmt.points, (-0.27,), "-27.0"),
        (fmt.points, (0.0,), "+0.0"),
        (fmt.p_value, (0.03125,), "0.0312"),
        (fmt.p_value, (1.0,), "1"),
        (fmt.p_value, (0.001,), "0.001"),
        (fmt.p_value, (6.2e-20,), "6.2e-20"),
        (fmt.interval, (0.5621, 0.8093), "56.2% – 80.9%"),
        (fmt.points_interval, (-0.03, 0.05), "[-3.0, +5.0]"),
        (fmt.number, (12.25,), "12.2"),
        (fmt.number, (0.125, 2), "0.12"),
    ],
)
def test_each_formatter_writes_the_documented_string(func, args, expected) -> None:  # type: ignore[no-untyped-def]
    assert func(*args) == expected


def test_every_formatter_shows_a_missing_value_as_the_one_sign() -> None:
    assert fmt.MISSING == "—"
    missing = [fmt.pct(None), fmt.points(None), fmt.p_value(None), fmt.number(None), fmt.shown(None)]
    missing += [fmt.interval(None, 0.5), fmt.interval(0.5, None), fmt.points_interval(None, None)]
    assert set(missing) == {"—"}
    assert fmt.shown(0) == 0 and fmt.shown("") == ""


def test_no_other_module_formats_a_rate_or_a_p_value_itself() -> None:
    """The copies issue 29 counted (8 ``_pct``, 2 ``_p``, 2 signed points) stay gone: a percentage with one decimal, a
    signed point difference or a ``.3g`` p-value is written only by rollbench.core.format."""
    src = Path(fmt.__file__).resolve().parents[1]
    pattern = re.compile(r"def _(pct|p|pts|signed)\(|100 \* [^}]*:[+]?\.1f\}%?|_value[^}]*:\.[23]g\}")
    found = [
        f"{p.relative_to(src)}:{i}"
        for p in sorted(src.rglob("*.py"))
        if p.name != "format.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_differences_lists_each_changed_key_there_then_here() -> None:
    there = {"episodes": 5, "seed": 0, "env": "scripted/reach"}
    here = {"episodes": 6, "seed": 0, "env": "scripted/reach", "horizon": 10}
    assert fmt.differences(there, here) == "episodes: 5 there, 6 here, horizon: None there, 10 here"
    assert fmt.differences(here, here) == ""


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        ("scripted/reach-ws://127.0.0.1:8000", 80, "scripted-reach-ws-127.0.0.1-8000"),
        ("libero/libero_10-agent:openai/gpt 4o", 80, "libero-libero_10-agent-openai-gpt-4o"),
        ("..hidden", 200, "hidden"),
        ("///", 200, "fallback"),
        ("a" * 300, 80, "a" * 80),
    ],
)
def test_one_sanitiser_makes_run_names_valid_identity_segments(value: str, limit: int, expected: str) -> None:
    assert sanitize_segment(value, "fallback", limit=limit) == expected


@pytest.mark.parametrize(
    ("value", "as_text", "expected"),
    [
        ("cam", False, "'cam'"),
        ([1, 2], True, "[1, 2]"),
        ("x" * 58, False, "'" + "x" * 58 + "'"),  # 60 characters quoted: whole
        ("x" * 59, False, "'" + "x" * 59 + "... (59 characters)"),  # 61: its first 60 and the size of the value
        ("y" * 5000, True, "y" * 60 + "... (5000 characters)"),
    ],
)
def test_a_value_is_quoted_whole_up_to_60_characters_else_by_its_start_and_size(
    value: object, as_text: bool, expected: str
) -> None:
    assert fmt.quoted(value, as_text=as_text) == expected


def test_an_error_location_is_dotted_and_the_whole_document_is_named() -> None:
    assert fmt.error_location(("plan", "episodes", 3, "seed")) == "plan.episodes.3.seed"
    assert fmt.error_location((), "spec") == "spec"
