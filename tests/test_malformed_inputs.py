"""A table of malformed inputs and damaged run directories fed to the real command line (Typer's CliRunner, in
process, for speed; one case also as a subprocess): bad input is exit 2 with one line starting ``error:`` and no
traceback, a damaged run that is graded gets a report (exit 1, the violation named), and no file changes.

Every directory is a real run recorded by ``rollbench.api.evaluate`` (scripted/reach), damaged on purpose.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from conftest import run_cli
from file_trees import tree_hash
from rollbench.api import evaluate
from rollbench.cli.main import app

RUN_ARGS = ["--env", "scripted/reach", "--policy", "zero", "--episodes", "3", "--max-steps", "3", "--seed", "2"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=3, max_steps=3, seed=2)
    return out


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


# ---- how each case damages the work directory (``run`` is a copy of the recorded run) --------------------------
def nothing(work: Path) -> None:
    pass


def out_is_a_file(work: Path) -> None:
    (work / "target").write_text("my notes\n")


def foreign_run_json(text: str) -> Callable[[Path], None]:
    def damage(work: Path) -> None:
        (work / "target").mkdir()
        (work / "target" / "run.json").write_text(text)

    damage.__name__ = f"foreign_run_json({text!r})"
    return damage


def truncated_data_file(work: Path) -> None:
    truncate(work / "run/data/chunk-000/file-001.parquet")


def truncated_episode_row(work: Path) -> None:
    truncate(work / "run/meta/episodes/chunk-000/file-001.parquet")


def missing_episode_row(work: Path) -> None:
    (work / "run/meta/episodes/chunk-000/file-001.parquet").unlink()


def missing_data_file(work: Path) -> None:
    (work / "run/data/chunk-000/file-000.parquet").unlink()


def run_json_not_json(work: Path) -> None:
    (work / "run/run.json").write_text('{"spec": ')


def run_json_without_plan(work: Path) -> None:
    log = json.loads((work / "run/run.json").read_text())
    del log["plan"]
    (work / "run/run.json").write_text(json.dumps(log))


def planned_episode_field(field: str, value: object) -> Callable[[Path], None]:
    """run.json's first planned episode with ``field`` of another JSON type (hostile round 18, b F2: a list or an
    object there was hashed by the robustness-control check before its type was, a traceback in every reader)."""

    def damage(work: Path) -> None:
        log = json.loads((work / "run/run.json").read_text())
        log["plan"]["episodes"][0][field] = value
        (work / "run/run.json").write_text(json.dumps(log))

    damage.__name__ = f"planned_episode_field({field}={value!r})"
    return damage


def info_json(text: str) -> Callable[[Path], None]:
    def damage(work: Path) -> None:
        (work / "run/meta/info.json").write_text(text)

    damage.__name__ = f"info_json({text!r})"
    return damage


def foreign_episode_rows(work: Path) -> None:
    for f in (work / "run/meta/episodes/chunk-000").iterdir():
        pq.write_table(pa.table({"episode_index": [int(f.stem[-3:])], "length": [3]}), f)


@dataclass(frozen=True)
class Case:
    damage: Callable[[Path], None]
    args: list[str]  # "RUN" stands for the (damaged) run directory, "TARGET" for work/target
    code: int
    message: str  # the one error line (exit 2) or a violation in the report (exit 1) contains this

    def __str__(self) -> str:
        return f"{self.damage.__name__}-{self.args[0]}"


CASES = [
    # bad input: exit 2, one line, nothing written
    Case(out_is_a_file, ["eval", *RUN_ARGS, "--out", "TARGET"], 2, "target exists and is not a directory"),
    Case(foreign_run_json("not json"), ["eval", *RUN_ARGS, "--out", "TARGET"], 2, "is not readable JSON"),
    Case(foreign_run_json("[1, 2]"), ["eval", *RUN_ARGS, "--out", "TARGET"], 2, "holds a JSON list, not an object"),
    Case(foreign_run_json('{"a": 1}'), ["eval", *RUN_ARGS, "--out", "TARGET"], 2, "it has no 'spec' object"),
    Case(foreign_run_json("[1, 2]"), ["eval", "--resume", "TARGET"], 2, "holds a JSON list, not an object"),
    Case(foreign_run_json("[1, 2]"), ["grade", "TARGET"], 2, "holds a JSON list, not an object"),
    Case(nothing, ["eval", "--env", "gym:nosuchmodule:Foo-v0", "--policy", "zero", "--out", "TARGET"], 2,
         "gymnasium env 'nosuchmodule:Foo-v0' cannot be imported: No module named 'nosuchmodule'"),
    Case(nothing, ["eval", "--resume", "TARGET"], 2, "does not exist"),
    Case(nothing, ["grade", "TARGET"], 2, "does not exist"),
    Case(run_json_not_json, ["grade", "RUN"], 2, "run.json is not a rollbench run log: it is not readable JSON"),
    Case(run_json_without_plan, ["eval", "--resume", "RUN"], 2, "run.json is not a rollbench run log: it has no 'plan'"),
    Case(planned_episode_field("trial", [0]), ["grade", "RUN"], 2,
         "run.json is not a rollbench run log: plan.episodes.0.trial: Input should be a valid integer"),
    Case(planned_episode_field("task", {"a": 1}), ["summarize", "RUN"], 2,
         "run.json is not a rollbench run log: plan.episodes.0.task: Input should be a valid string"),
    Case(planned_episode_field("trial", [0]), ["eval", "--resume", "RUN"], 2,
         "run.json is not a rollbench run log: plan.episodes.0.trial: Input should be a valid integer"),
    Case(truncated_data_file, ["eval", "--resume", "RUN"], 2,
         "is damaged and cannot be resumed: data file data/chunk-000/file-001.parquet is unreadable"),
    Case(truncated_data_file, ["eval", *RUN_ARGS, "--out", "RUN"], 2, "is damaged and cannot be resumed"),
    Case(truncated_episode_row, ["eval", "--resume", "RUN"], 2,
         "episode row file meta/episodes/chunk-000/file-001.parquet is unreadable"),
    Case(missing_episode_row, ["eval", "--resume", "RUN"], 2, "episode 1 has no episode row but episode 2 has one"),
    Case(missing_data_file, ["eval", "--resume", "RUN"], 2,
         "episode 0 has no data file data/chunk-000/file-000.parquet"),
    Case(nothing, ["eval", *RUN_ARGS, "--policy-options", '{"gain": 2}', "--out", "TARGET"], 2,
         "policy zero takes no options; got gain"),
    Case(nothing, ["eval", *RUN_ARGS[:2], "--policy", "fetch-expert", "--out", "TARGET"], 2,
         "policy fetch-expert cannot drive scripted/reach: it drives fetch/Reach only"),
    # damaged runs graded: a report (exit 1) naming the damage, never a crash
    Case(info_json("{bad"), ["grade", "RUN"], 1, "meta/info.json is not readable JSON (Expecting property name"),
    Case(info_json("[]"), ["grade", "RUN"], 1, "meta/info.json is not a JSON object (it holds a list)"),
    Case(info_json('{"features": 3}'), ["grade", "RUN"], 1, "meta/info.json has no valid 'features' object"),
    Case(truncated_data_file, ["grade", "RUN"], 1, "file-001.parquet is unreadable"),
    Case(missing_episode_row, ["grade", "RUN"], 1, "1 of 3 requested episodes are not recorded (episode 1)"),
    Case(foreign_episode_rows, ["grade", "RUN"], 1, "the episode rows (meta/episodes) lack the columns"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_malformed_input_gets_one_line_or_a_report_and_changes_no_file(
    case: Case, recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(recorded, work / "run")
    case.damage(work)
    before = tree_hash(work)
    args = [str(work / a.lower()) if a in ("RUN", "TARGET") else a for a in case.args]
    monkeypatch.chdir(work)
    result = CliRunner().invoke(app, args)
    text = result.stdout + result.stderr
    assert result.exit_code == case.code, text
    assert "Traceback" not in text
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert case.message in text, text
    if case.code == 2:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert result.stdout == ""
    assert tree_hash(work) == before  # nothing written, deleted or changed, and run.json not left RUNNING


def test_the_real_executable_prints_one_line_for_a_damaged_resume(recorded: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(recorded, run)
    missing_episode_row(tmp_path)
    before = tree_hash(run)
    r = run_cli("eval", "--resume", run)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: {run} is damaged and cannot be resumed: episode 1 has no episode row but episode 2 has one; nothing "
        f"was changed (`rollbench grade {run}` reports every problem)"
    ]
    assert json.loads((run / "run.json").read_text())["status"] == "OK" and tree_hash(run) == before
