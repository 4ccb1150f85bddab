"""An output option never replaces a record rollbench keeps outside run directories (hostile round 14, F5): a
sequential study's decision log, a dashboard label file, a checkpoint selection's files, an optimisation's state.
``report --out`` naming one is refused with exit 2 and one line naming the path and what it is, and the file keeps
its bytes; a command still rewrites its own record in its own output directory.

Oracles: the files' bytes before and after, ``compare --sequential`` on the study, the refusal lines in full."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.core.contracts import ConfigError
from rollbench.record.safe_files import refuse_inside_run

LABELS = '{"labels": {"vm/point/R/0": {"label": "succeeded", "note": "hours", "history": []}}, "version": 1}'


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a recorded run R, a finished sequential study S) of scripted/reach."""
    root = tmp_path_factory.mktemp("records")
    proc = invoke(
        "sequential", "--env", "scripted/reach", "--policy-a", "random", "--policy-b", "scripted-expert",
        "--delta", "0.4", "--p-a", "0.3", "--budget", "6", "--out", root / "S",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    proc = invoke(
        "eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "1", "--out", root / "R"
    )
    assert proc.returncode == 0, proc.stderr
    return root / "R", root / "S"


@pytest.mark.slow
def test_report_out_naming_a_sequential_decision_log_is_refused_and_the_study_still_compares(
    study: tuple[Path, Path],
) -> None:
    run, s = study
    log = s / "sequential.json"
    before = log.read_bytes()
    proc = invoke("report", run, "--out", log)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: --out {log} is a sequential study's decision log; choose another path"
    assert log.read_bytes() == before
    compared = invoke("compare", "--sequential", s)
    assert compared.returncode == 0, compared.stderr
    assert f"decision log {log}: agrees with the run directories" in compared.stdout + compared.stderr


@pytest.mark.slow
def test_report_out_naming_a_label_file_is_refused_and_keeps_every_label(
    study: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = study
    labels = tmp_path / "labels.json"
    labels.write_text(LABELS)
    proc = invoke("report", run, "--out", labels)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --out {labels} is a dashboard label file (every label and its history); choose another path"
    )
    assert labels.read_text() == LABELS


@pytest.mark.slow
def test_report_out_over_a_file_beside_a_checkpoint_ranking_is_refused_but_a_new_path_there_is_written(
    study: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = study
    (tmp_path / "checkpoints.json").write_text("{}")
    figure = tmp_path / "success_by_step.png"
    figure.write_bytes(b"PNG")
    proc = invoke("report", run, "--out", figure)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --out {figure} lies beside a checkpoint selection's ranking ({tmp_path / 'checkpoints.json'}); "
        "choose another path"
    )
    assert figure.read_bytes() == b"PNG"
    assert invoke("report", run, "--out", tmp_path / "report.html").returncode == 0
    assert (tmp_path / "report.html").read_bytes().startswith(b"<!")


@pytest.mark.slow
def test_sequential_rewrites_its_own_decision_log_when_resumed(study: tuple[Path, Path]) -> None:
    _, s = study
    proc = invoke(
        "sequential", "--env", "scripted/reach", "--policy-a", "random", "--policy-b", "scripted-expert",
        "--delta", "0.4", "--p-a", "0.3", "--budget", "6", "--out", s,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "choose another path" not in proc.stderr


@pytest.mark.parametrize(
    ("name", "own", "refused"),
    [
        ("labels.json", "labels", None),  # the dashboard's --labels: its own label file
        ("labels.json", None, "a dashboard label file (every label and its history)"),
        ("sequential.json", "labels", "a sequential study's decision log"),
        ("optimize.json", "optimize", None),
        ("optimize.json", "checkpoints", "an optimisation search's state"),
        ("elimination.json", "checkpoints", None),
    ],
)
def test_only_the_callers_own_kind_of_record_may_be_rewritten(
    tmp_path: Path, name: str, own: str | None, refused: str | None
) -> None:
    target = tmp_path / name
    target.write_text("{}")
    if refused is None:
        refuse_inside_run(target, "--x", own)
    else:
        with pytest.raises(ConfigError) as exc:
            refuse_inside_run(target, "--x", own)
        assert str(exc.value) == f"--x {target} is {refused}; choose another path"


def test_record_names_are_the_names_their_writers_use() -> None:
    from rollbench.checkpoints.eliminate_run import ELIMINATION
    from rollbench.checkpoints.files_record import FILES_RECORD
    from rollbench.checkpoints.runner import RANKING
    from rollbench.optimize.search import STATE
    from rollbench.record.safe_files import RECORD_FILES
    from rollbench.sequential.decision_log import LOG_NAME

    assert {LOG_NAME, RANKING, FILES_RECORD, ELIMINATION, STATE, "labels.json"} == set(RECORD_FILES)


@pytest.mark.parametrize(
    ("option", "name"),
    [("--labels", "mine.json"), ("--rubric", "myrub.json"), ("PATHS", "export.json")],
    ids=["label file of another name", "rubric file", "a dashboard export given as input"],
)
def test_report_out_naming_one_of_its_own_input_files_is_refused_and_the_file_kept(
    study: tuple[Path, Path], tmp_path: Path, option: str, name: str
) -> None:
    """Hostile round 18 (b, F1): only labels.json was protected; ``--labels mine.json --out mine.json`` (or the
    rubric, or an export given as input) wrote the report over what the command reads."""
    run, _ = study
    given = tmp_path / name
    text = {"--labels": LABELS, "--rubric": '{"name": "myrub", "version": 1, "labels": ["good", "bad"]}'}
    given.write_text(text.get(option, '{"runs": []}'))
    before = given.read_bytes()
    args = (
        [run, "--labels", given]
        if option == "--labels"
        else [run, "--rubric", given]
        if option == "--rubric"
        else [given]
    )
    (tmp_path / "sub").mkdir()
    out = tmp_path / "sub" / ".." / name  # another spelling of the same file
    proc = invoke("report", *args, "--out", out)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --out {out} is the file this command reads as {option} {given}; choose another path"
    )
    assert given.read_bytes() == before
