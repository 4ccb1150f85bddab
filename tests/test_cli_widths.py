"""Result tables are readable at any terminal width: every task name and every number appears whole (never cut to
"…") at 80, 100 and 120 columns and when piped. The oracle is the ``--json`` document of the same command: its task
names and numbers, formatted here independently, must each appear as one unbroken piece of the printed text.

Real MetaWorld MT10 runs (long task names such as ``metaworld/button-press-topdown-v3``), 1 episode per task."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from rollbench.api import evaluate, grade
from rollbench.cli.analysis import print_comparison, print_summary
from rollbench.cli.display import print_result
from rollbench.cli.main import app

pytestmark = pytest.mark.sim
WIDTHS = (80, 100, 120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("widths")
    common = {"env": "metaworld/MT10", "episodes": 1, "max_steps": 40, "seed": 3}
    evaluate(out=root / "expert", policy="metaworld-expert", **common)
    evaluate(out=root / "zero", policy="zero", **common)
    return root / "expert", root / "zero"


def _render(width: int, show: Any, *args: Any) -> str:
    buf = io.StringIO()
    show(Console(file=buf, width=width, force_terminal=False, color_system=None), *args)
    return buf.getvalue()


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _whole(text: str, pieces: list[str]) -> list[str]:
    """The pieces that do not appear unbroken in ``text`` (an empty list when all do)."""
    return [p for p in pieces if p not in text]


def test_grade_table_shows_every_task_and_number_whole_at_80_100_120_columns(runs: tuple[Path, Path]) -> None:
    doc = grade(runs[0])
    pieces = []
    for name, t in doc.tasks.items():
        pieces += [name, _pct(t.success_rate), f"{_pct(t.ci95_low)} – {_pct(t.ci95_high)}"]
        pieces += [f"{t.mean_length:.1f}", f"{t.mean_return:.2f}"]
    pieces += ["metaworld/MT10 (suite, pooled)", _pct(doc.overall.pooled_success_rate)]
    assert len(doc.tasks) == 10
    for width in WIDTHS:
        text = _render(width, print_result, doc, None)
        assert _whole(text, pieces) == [], width
        assert "…" not in text
        table_lines = [ln for ln in text.splitlines() if ln.startswith(("│", "┃", "┏", "└", "┡"))]
        assert table_lines and max(len(ln) for ln in table_lines) <= width, width


def test_piped_grade_prints_every_task_and_number_whole(runs: tuple[Path, Path]) -> None:
    r = CliRunner().invoke(app, ["grade", str(runs[0])])  # CliRunner's stdout is not a terminal: the piped layout
    doc = json.loads(CliRunner().invoke(app, ["grade", str(runs[0]), "--json"]).stdout)
    assert r.exit_code == 0
    pieces = [n for n in doc["tasks"]] + [_pct(t["success_rate"]) for t in doc["tasks"].values()]
    assert _whole(r.stdout, pieces) == []
    assert "…" not in r.stdout


def test_summarize_and_compare_tables_are_whole_at_every_width(runs: tuple[Path, Path]) -> None:
    summary = json.loads(CliRunner().invoke(app, ["summarize", *map(str, runs), "--json"]).stdout)
    comparison = json.loads(CliRunner().invoke(app, ["compare", *map(str, runs), "--json"]).stdout)
    s_pieces = [c["task"] for c in summary["cells"]] + [_pct(c["success_rate"]) for c in summary["cells"]]
    c_pieces = [r["task"] for r in comparison["comparisons"][0]["tasks"]]
    c_pieces += [_pct(r["a"]["success_rate"]) for r in comparison["comparisons"][0]["tasks"]]
    for width in (*WIDTHS, 160):
        text = _render(width, print_summary, summary)
        assert _whole(text, s_pieces) == [] and "…" not in text, width
        text = _render(width, print_comparison, comparison)
        assert _whole(text, c_pieces) == [] and "…" not in text, width


def test_a_table_too_narrow_for_two_columns_is_printed_one_row_per_block() -> None:
    from rich.table import Table

    from rollbench.cli.tables import print_table

    table = Table(title="t")
    table.add_column("task")
    table.add_column("success rate", justify="right")
    name = "libero/libero_10/LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket"
    table.add_row(name, "96.0%")
    text = _render(60, print_table, table)
    assert f"task: {name}" in text and "success rate: 96.0%" in text and "…" not in text
