"""The run lock is not only a file name (issue 42, item 9): deleting ``run.lock`` while a writer holds it lets no
second writer in, and ``release`` refuses a run still being written. Oracles: the lock outcomes themselves (a
ConfigError or not), the files of the source before and after."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError
from rollbench.record.locks import DirLock, LockHeld, dir_locked, file_lock_held
from rollbench.record.runlog import RunLock, is_locked
from rollbench.release.copy import build_release


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lock") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1)
    return out


def test_deleting_run_lock_while_a_writer_holds_it_lets_no_second_writer_in(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with RunLock(run):
        (run / "run.lock").unlink()  # what the hostile run did: the name is gone, the writer still runs
        assert is_locked(run)
        for _ in range(3):
            with pytest.raises(ConfigError, match="is being written by another rollbench process"):
                RunLock(run).__enter__()
    assert not is_locked(run) and not (run / "run.lock").exists()
    with RunLock(run):  # released: the next writer gets it
        assert (run / "run.lock").is_file()


def test_an_eval_refused_the_lock_of_a_directory_it_saw_missing_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `eval --out X` started at once both saw no X; the one refused the lock deleted the other's directory
    while it was starting (hostile round 22, read in the code). Here the other writer makes X, takes its lock and
    writes, between this call's look and its lock."""
    import rollbench.api as api
    from rollbench.core.paths import make_dirs

    run, held = tmp_path / "X", []

    def the_other_writer_first(path: Path, what: str) -> bool:
        made = make_dirs(path, what)
        held.append(RunLock(path).__enter__())
        (path / "meta").mkdir()  # what the other writer has written so far
        return made

    monkeypatch.setattr(api, "make_dirs", the_other_writer_first)
    with pytest.raises(ConfigError, match="is being written by another rollbench process"):
        evaluate(out=run, env="scripted/reach", policy="zero", episodes=1, max_steps=2)
    assert (run / "meta").is_dir() and (run / "run.lock").exists()
    held[0].__exit__(None, None, None)


def test_a_writer_in_another_process_holds_the_directory_against_this_one(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    code = (
        "import sys, time; from pathlib import Path; from rollbench.record.runlog import RunLock\n"
        "with RunLock(Path(sys.argv[1])):\n    print('held', flush=True); sys.stdin.readline()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        os.unlink(run / "run.lock")
        assert dir_locked(run) and not file_lock_held(run / "run.lock")
        with pytest.raises(LockHeld):
            DirLock(run, timeout_s=0).acquire()
        with pytest.raises(ConfigError, match="being written"):
            RunLock(run).__enter__()
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        assert child.wait(timeout=60) == 0
    assert not dir_locked(run)


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("lock_file_gone", [False, True])
@pytest.mark.slow
def test_release_refuses_a_run_being_written_and_writes_nothing(
    recorded: Path, tmp_path: Path, lock_file_gone: bool
) -> None:
    with RunLock(recorded):
        if lock_file_gone:
            (recorded / "run.lock").unlink()
        before = _hashes(recorded)
        with pytest.raises(ConfigError, match="is being written by a rollbench process"):
            build_release([recorded], tmp_path / "rel", date="2026-01-01")
        r = invoke("release", recorded, "--out", tmp_path / "rel2", "--date", "2026-01-01")
        assert r.returncode == 2 and "being written" in r.stderr and "Traceback" not in r.stderr
        assert _hashes(recorded) == before
    assert not (tmp_path / "rel").exists() and not (tmp_path / "rel2").exists()
    build_release([recorded], tmp_path / "rel3", date="2026-01-01")  # finished: released
    assert not (recorded / "run.lock").exists()  # the release created nothing in its source


def test_no_writer_starts_while_a_release_reads_the_run(recorded: Path) -> None:
    held = DirLock(recorded)  # what a release holds while it reads
    held.acquire()
    try:
        with pytest.raises(ConfigError, match="being written"):
            RunLock(recorded).__enter__()
    finally:
        held.release()
