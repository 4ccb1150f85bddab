"""Issue 30, item 23 at 80 and 100 columns: ``envs`` keeps every task name whole with its instruction under it,
``summarize``'s split tables repeat every key that identifies a row, ``policies`` is wrapped by rollbench (the
``module:factory`` line too) and no name is cut. Oracles: the ``--json`` documents of the same commands and the
registry's own lists; rendering on rich consoles of a fixed width (what a terminal of that width shows)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from rollbench.api import evaluate
from rollbench.cli import common
from rollbench.cli.analysis import print_summary
from rollbench.cli.display import print_envs, print_policies
from rollbench.cli.main import app
from rollbench.core.registry import list_envs, list_policies

WIDTHS = (80, 100)


def _console(width: int, terminal: bool = False) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=terminal, color_system=None), buf


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_envs_keeps_every_task_name_whole_with_its_instruction_under_it(width: int) -> None:
    rows = [r for r in list_envs() if r["family"] in ("scripted", "fetch", "metaworld", "libero")]
    console, buf = _console(width)
    print_envs(console, rows, show_tasks=True)
    lines = buf.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= width
    cells = [ln.strip("│ ").rstrip() for ln in lines]
    for r in rows:
        for t in r["tasks"]:
            at = [i for i, c in enumerate(cells) if c.split("│")[0].strip() == t["name"]]
            assert len(at) == 1, (t["name"], at)  # the name whole, once, at the start of its cell
            if t["instruction"]:  # the lines under the name, up to the next name, hold the instruction's words
                under = []
                for c in cells[at[0] + 1 :]:
                    first = c.split("│")[0].strip()
                    if not first or first.split("/")[0] == r["family"] or first.startswith(("└", "┏")):
                        break
                    under.append(first)
                assert " ".join(under) == t["instruction"], (t["name"], under)
        assert any(ln.startswith(f"{r['family']} — ") for ln in lines)


@pytest.mark.slow
def test_summarize_split_tables_repeat_every_key_of_the_row(tmp_path: Path) -> None:
    for policy in ("zero", "scripted-expert"):
        evaluate(out=tmp_path / policy, env="scripted/all", policy=policy, episodes=2, max_steps=3)
    r = CliRunner().invoke(app, ["summarize", str(tmp_path / "zero"), str(tmp_path / "scripted-expert"), "--json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["by"][:2] == ["task", "model"] and len(doc["cells"]) == 4
    for width in WIDTHS:
        console, buf = _console(width)
        print_summary(console, doc)
        tables = [t for t in re.split(r"\n(?=┏)", buf.getvalue()) if "┃" in t]
        assert len(tables) >= 2, width  # split at this width
        for table in tables:
            header = next(ln for ln in table.splitlines() if ln.startswith("┃"))
            assert [h.strip() for h in header.strip("┃").split("┃")][:3] == ["task", "model", "instruction"]
            rows = [ln for ln in table.splitlines() if ln.startswith("│") and ln.split("│")[1].strip()]
            keys = [tuple(c.strip() for c in ln.split("│")[1:3]) for ln in rows]
            assert keys == [(c["task"], c["model"]) for c in doc["cells"]], (width, keys)


def test_policies_is_wrapped_at_80_columns_and_no_name_is_cut() -> None:
    rows = list_policies()
    console, buf = _console(80, terminal=True)
    print_policies(console, rows)
    text = buf.getvalue()
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    for r in rows:
        assert any(ln.startswith(r["name"] + " ") or ln.rstrip() == r["name"] for ln in lines), r["name"]
        words = (("test fixture: " if r["kind"] == "fixture" else "") + r["description"]).split()
        assert " ".join(words) in " ".join(text.split()), r["name"]
    factory = [i for i, ln in enumerate(lines) if ln.startswith("module:factory ")]
    assert len(factory) == 1 and lines[factory[0] + 1].startswith(" " * 23)  # wrapped under its column
    assert " ".join(" ".join(lines[factory[0] :]).split()) == (
        "module:factory Your own policy: factory(name, options) in an importable module (docs/plugins.md)."
    )


def test_policies_on_a_pipe_is_one_line_each() -> None:
    console, buf = _console(160)
    print_policies(console, list_policies())
    lines = buf.getvalue().splitlines()
    assert len(lines) == len(list_policies()) + 1 and lines[-1].startswith("module:factory")


@pytest.mark.slow
def test_piped_summarize_and_compare_fit_the_columns_the_user_set(tmp_path: Path) -> None:
    """Piped (not a terminal), the analysis commands honour ``$COLUMNS`` as every other command does (a new user at
    100 columns saw 178-column tables), and use 200 columns when it is not set."""
    for policy in ("zero", "scripted-expert"):
        evaluate(out=tmp_path / policy, env="scripted/reach", policy=policy, episodes=2, max_steps=20)
    runs = [str(tmp_path / "zero"), str(tmp_path / "scripted-expert")]
    for command in ("summarize", "compare"):
        at_100 = CliRunner().invoke(app, [command, *runs], env={"COLUMNS": "100"})
        unset = CliRunner().invoke(app, [command, *runs], env={"COLUMNS": None})
        assert at_100.exit_code == 0 and unset.exit_code == 0, (at_100.stderr, unset.stderr)
        widths = [len(ln) for ln in at_100.stdout.splitlines()]
        assert max(widths) <= 100, (command, max(widths))
        assert max(len(ln) for ln in unset.stdout.splitlines()) > 100, command  # the wide layout: one table
        for piece in ("scripted/reach", "scripted-expert", "100.0%", "0.0%"):
            assert piece in at_100.stdout, (command, piece)


def test_runs_at_80_100_120_columns_keeps_every_rate_and_task_whole_within_the_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's `runs` at 100 columns (default timestamped run names, metaworld-length task names) had its
    split first table run past the terminal: rich widened the foldable run column again, and the success rates were
    cut at the edge. Oracle: the `--json` rows, formatted here; every table line within the width."""
    root = tmp_path / "runs"
    for name, policy in (("scripted-reach-scripted-expert-20261207T152548Z", "scripted-expert"), ("z", "zero")):
        evaluate(out=root / name, env="scripted/reach", policy=policy, episodes=2, max_steps=20)
    rows = json.loads(CliRunner().invoke(app, ["runs", str(root), "--json"]).stdout)
    rates = [f"{100 * r['success_rate']:.1f}%" for r in rows]
    assert sorted(rates) == ["0.0%", "100.0%"]
    for width in (80, 100, 120):
        monkeypatch.setenv("COLUMNS", str(width))  # read when the output console is made, as at a command's start
        monkeypatch.setattr(common, "out", common.output_console())
        got = CliRunner().invoke(app, ["runs", str(root)])
        assert got.exit_code == 0, got.stderr
        table = [ln for ln in got.stdout.splitlines() if ln[:1] in "┏┃┡│└"]
        assert table and max(len(ln) for ln in table) <= width, (width, got.stdout)
        cells = [c.strip() for ln in table for c in ln.split("│")]
        for piece in (*rates, "scripted/reach", "2/2"):
            assert piece in cells, (width, piece, got.stdout)


def test_a_split_table_keeps_its_foldable_columns_within_the_width() -> None:
    """The rows a new user's `runs` showed at 100 columns (hand-copied): the table must split (task names stay
    whole), and each part's foldable run column must fold within the width; before, rich widened it again in the
    first part and the success rates were cut at the terminal's edge."""
    from rich.table import Table

    from rollbench.cli.tables import print_table

    rows = [
        ("push-noise/b-metaworld_push-v3", "metaworld/push-v3", "metaworld-expert", "OK", "17/135", "94.1%"),
        ("metaworld-pick-place-v3-random-20261207T152548Z", "metaworld/pick-place-v3", "random", "INTERRUPTED",
         "1/20", "0.0%"),
        ("pick-place-expert", "metaworld/pick-place-v3", "metaworld-expert", "OK", "20/20", "100.0%"),
    ]  # fmt: skip
    for width in (80, 100):
        table = Table(title="runs")
        for col in ("run", "task(s)", "policy", "status", "episodes", "success rate", "created (UTC)"):
            numeric = col in ("episodes", "success rate")
            table.add_column(col, justify="right" if numeric else "left", overflow="ellipsis" if numeric else "fold")
        for r in rows:
            table.add_row(*r, "2026-12-07T15:27:48Z")
        console, buf = _console(width, terminal=True)
        print_table(console, table, breakable=("run", "policy", "created (UTC)"))
        lines = buf.getvalue().splitlines()
        assert max(len(ln) for ln in lines) <= width, (width, buf.getvalue())
        cells = [c.strip() for ln in lines for c in ln.replace("┃", "│").split("│")]
        for piece in ("94.1%", "0.0%", "100.0%", "metaworld/pick-place-v3", "17/135", "INTERRUPTED"):
            assert piece in cells, (width, piece, buf.getvalue())
