"""What someone else put in a run directory is shown as text and kept: a recorded string holding Rich markup or
terminal control characters is a named violation printed escaped (never a traceback, never an escape sequence sent
to the terminal), and a file at an episode index past the plan is never deleted by a resume (grade names it).
Found by a hostile tester who had not read the tests. The commands run in the test process (tests/cli_in_process.py:
what they print to a pipe, as a real process does)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke


@pytest.fixture(scope="module")
def sound_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sound") / "run"
    r = invoke("eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", 4, "--out", out)
    assert r.returncode == 0, r.stderr
    return out


def _set_reason(run: Path, value: str) -> None:
    path = run / "meta" / "episodes" / "chunk-000" / "file-001.parquet"
    table = pq.read_table(path)
    i = table.column_names.index("rollbench/termination_reason")
    pq.write_table(table.set_column(i, "rollbench/termination_reason", pa.array([value] * table.num_rows)), path)


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("[/bad]", "'[/bad]'"),
        ("[bold red]done[/]", "'[bold red]done[/]'"),
        ("\x1b[31mpwn", "'\\x1b[31mpwn'"),
        ("ok\x07\x9b", "'ok\\x07\\x9b'"),
    ],
)
@pytest.mark.slow
def test_a_recorded_reason_with_markup_or_control_characters_is_named_and_printed_escaped(
    sound_run: Path, tmp_path: Path, reason: str, shown: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(sound_run, run)
    _set_reason(run, reason)
    r = invoke("grade", run)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert f"episode 1: termination reason {shown} is not one of rollbench's (success, env_terminated" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\x9b" not in r.stdout


@pytest.mark.slow
def test_resume_keeps_a_file_past_the_plan_and_grade_names_it(sound_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(sound_run, run)
    (run / "data" / "chunk-000" / "file-003.parquet").unlink()
    (run / "meta" / "episodes" / "chunk-000" / "file-003.parquet").unlink()
    foreign = run / "data" / "chunk-000" / "file-010.parquet"
    foreign.write_text("mine")
    r = invoke("eval", "--resume", run)
    assert foreign.read_text() == "mine"  # episode 10 of a 4-episode plan was never this run's
    assert "file-010.parquet is not this run's (its plan has 4 episodes); left as it is" in r.stderr
    assert (run / "data" / "chunk-000" / "file-003.parquet").is_file()  # the missing episode ran again
    g = invoke("grade", run)
    assert g.returncode == 1 and "file-010.parquet" in g.stdout
