"""The documented examples run exactly as written: the custom policy (``module:factory``) and custom gymnasium env
(``gym:MODULE:ID``) of docs/plugins.md (files taken from the page, commands run as subprocesses of the real
executable), the ``grade --json`` field table of docs/runs.md, and the release commands of docs/release.md on the
labels file the dashboard of docs/dashboard.md writes. (The README's tour: tests/test_docs_examples.py.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, rollbench_bin

PLUGINS = (REPO / "docs/plugins.md").read_text()
RUNS = (REPO / "docs/runs.md").read_text()
RELEASE = (REPO / "docs/release.md").read_text()
DASHBOARD = (REPO / "docs/dashboard.md").read_text()


def block_after(marker: str) -> str:
    m = re.search(re.escape(marker) + r"\n\n(?:<!-- run: [^>]* -->\n)?```python\n(.*?)```", PLUGINS, re.S)
    assert m, f"docs/plugins.md has no python block after {marker!r}"
    return m.group(1)


def command_with(needle: str) -> list[str]:
    (line,) = {ln for ln in PLUGINS.splitlines() if needle in ln and ln.startswith("PYTHONPATH=. ")}  # one command
    args = shlex.split(line.removeprefix("PYTHONPATH=. "))
    assert args[0] == ".venv/bin/rollbench"
    return [rollbench_bin(), *args[1:]]


@pytest.mark.parametrize(
    ("module", "needle", "task", "success_rate"),
    [
        ("my_policy.py", "--policy my_policy:make", "scripted/reach", 1.0),
        ("my_env.py", "--env gym:my_env:Reach1D-v0", "gym/my_env:Reach1D-v0", None),
    ],
)
@pytest.mark.slow
def test_plugin_example_runs_as_written(
    module: str, needle: str, task: str, success_rate: float | None, tmp_path: Path
) -> None:
    (tmp_path / module).write_text(block_after(f"`{module}`:"))
    args = command_with(needle)
    r = subprocess.run(
        args, cwd=tmp_path, env={**os.environ, "PYTHONPATH": "."}, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / args[args.index("--out") + 1]
    results = json.loads((out / "run.json").read_text())["results"]
    assert results["status"] == "OK" and list(results["tasks"]) == [task]
    assert results["episodes_recorded"] == 5
    if success_rate is not None:
        assert results["tasks"][task]["success_rate"] == success_rate


def _grade_table() -> dict[str, str]:
    """docs/runs.md's ``grade --json`` field table as field -> meaning (one table: no blank line inside it)."""
    section = RUNS.split("## `rollbench grade RUN_DIR --json`\n\n", 1)[1]
    table = section.split("\n\n", 1)[0].splitlines()
    assert table[:2] == ["| field | meaning |", "|---|---|"]
    rows: dict[str, str] = {}
    for line in table[2:]:
        cells = line.split(" | ")
        assert line.startswith("| ") and line.endswith(" |") and len(cells) == 2, line
        for name in re.findall(r"`([a-z_0-9]+)`", cells[0]):
            assert name not in rows, f"{name} has two rows"
            rows[name] = cells[1]
    return rows


def test_runs_page_grade_table_is_one_table_naming_exactly_the_fields_grade_emits(tmp_path: Path) -> None:
    from rollbench.api import evaluate, grade

    evaluate(out=tmp_path / "run", env="scripted/reach", policy="scripted-expert", episodes=3)
    doc = grade(tmp_path / "run").to_json()
    rows = _grade_table()
    optional = {"variants", "agent_usage", "delay"}  # sweeps only, agent runs only, --latency runs only
    assert set(rows) == set(doc) | optional
    mentioned = lambda field: set(re.findall(r"`([a-z_0-9]+)`", rows[field]))  # noqa: E731
    assert set(doc["episodes"][0]) | {"agent_usage"} <= mentioned("episodes")
    assert set(doc["tasks"]["scripted/reach"]) <= mentioned("tasks")
    assert set(doc["overall"]) <= mentioned("overall")
    assert set(doc["latency"]) <= mentioned("latency")
    assert set(doc["timing"]) <= mentioned("timing")


@pytest.mark.slow
def test_release_example_runs_as_written_on_a_plain_run_and_its_dashboard_labels(tmp_path: Path) -> None:
    """The runs the set-up and the tour write (here small stand-ins under the same names) and the labels file the
    dashboard example writes (a label of the random run's episode 0, as the tour says) are what the release example
    reads; both commands succeed as written and the release carries that label."""
    from rollbench.api import evaluate
    from rollbench.core.identity import RunIdentity
    from rollbench.dashboard.labels import set_label
    from rollbench.dashboard.rubrics import load_rubric
    from rollbench.record.runlog import require_run_log

    dashboard = next(ln for ln in DASHBOARD.splitlines() if ln.startswith(".venv/bin/rollbench dashboard"))
    from rollbench.cli.dashboard import default_labels

    args = shlex.split(dashboard.split("#")[0])
    assert "--labels" not in args  # the default: labels.json in the first --root
    labels_file = default_labels([Path(args[args.index("--root") + 1])]).as_posix()
    assert labels_file == "runs/labels.json"
    evaluate(out=tmp_path / "runs/pick-place-expert", env="scripted/reach", policy="scripted-expert", episodes=2)
    evaluate(out=tmp_path / "runs/pick-place-random", env="scripted/reach", policy="random", episodes=2)
    run = tmp_path / "runs/pick-place-random"
    ident = RunIdentity.from_run_log(require_run_log(run), run)
    set_label(tmp_path / labels_file, ident.episode_key(0), "failed", rubric=load_rubric())
    commands = [ln for ln in RELEASE.splitlines() if ln.startswith(".venv/bin/rollbench release ")]
    assert len(commands) == 2
    for line in commands:
        args = shlex.split(line.split("#")[0])
        r = subprocess.run(
            [rollbench_bin(), *args[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
        )
        assert r.returncode == 0, r.stderr
    released = tmp_path / "release"
    assert (released / "MANIFEST.json").is_file() and (released / "pick-place-expert/run.json").is_file()
    (kept,) = json.loads((released / "MANIFEST.json").read_text())["label_entries"]["labels/labels.json"]["kept"]
    assert kept.endswith("/pick-place-random/0") and (released / "labels/labels.json").is_file()
    assert json.loads((released / "pick-place-expert/run.json").read_text())["identity"]["host"].startswith(
        "REDACTED-host_name-"
    )
