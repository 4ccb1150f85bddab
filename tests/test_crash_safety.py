"""A crash at any moment leaves every committed episode readable; interrupted commits are repaired on reopen."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate, grade

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))


# 16 episodes: the signal lands after 3 or 5 commits with most of the run still to go (what the kill and resume tests
# need); the count itself is not what they check, and every episode left over is ~0.2 s of sleeping policy calls
EPISODES = 16
SLOW_RUN = {
    "env": "scripted/reach",
    "policy": "fault_policies:slow",
    "policy_options": {"sleep_s": 0.05},
    "episodes": EPISODES,
    "max_steps": 10,
}


def start_slow_run(out: Path, **popen: object) -> subprocess.Popen[str]:
    """`rollbench eval` of SLOW_RUN (16 episodes of ~0.2 s) into ``out``, as a subprocess."""
    args = [
        ROLLBENCH,
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "fault_policies:slow",
        "--policy-options",
        '{"sleep_s": 0.05}',
        "--episodes",
        str(EPISODES),
        "--max-steps",
        "10",
        "--out",
        str(out),
    ]
    # a background job ignores SIGINT and its children inherit that; a handled signal is reset to the default at exec
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _popen(args, popen)
    finally:
        signal.signal(signal.SIGINT, old)


def _env(venv_on_path: bool = True) -> dict[str, str]:
    """The child's environment: the tests' plug-ins importable, and the venv's ``bin`` first on ``PATH`` (so that
    ``rollbench`` names this install) or left off it (as the README's set-up leaves it)."""
    venv_bin = str(Path(ROLLBENCH).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
        "PATH": os.pathsep.join([venv_bin, *path] if venv_on_path else path),
    }


def _popen(args: list[str], popen: dict[str, object], venv_on_path: bool = True) -> subprocess.Popen[str]:
    return subprocess.Popen(
        args,
        env=_env(venv_on_path),
        text=True,
        # SIGINT as a terminal gives it, whatever this test was launched with (a background job ignores SIGINT, and
        # an ignored signal stays ignored in the child, which then never sees the Ctrl-C under test)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **popen,
    )  # type: ignore[call-overload]


def printed_command(said: str) -> list[str]:
    """The resume command an interrupted eval printed (the rest of its line after "resume with: "), split as a shell
    would."""
    line = next(ln for ln in said.splitlines() if "resume with: " in ln)
    return shlex.split(line.split("resume with: ", 1)[1])


def wait_for_committed(out: Path, n: int) -> None:
    deadline = time.monotonic() + 180  # generous: start-up can be slow on a loaded 2-core machine
    while time.monotonic() < deadline and len(list(out.glob("meta/episodes/chunk-000/*.parquet"))) < n:
        time.sleep(0.05)


@pytest.mark.slow
def test_sigkill_mid_run_leaves_committed_episodes_readable_and_resume_completes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = start_slow_run(out, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_committed(out, 5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    r = grade(out)
    k = r.episodes_recorded
    assert 5 <= k < EPISODES, f"{k} episodes committed when the process was killed (expected a mid-run kill)"
    assert r.violations == []  # every committed episode is whole and consistent
    assert [e.episode_index for e in r.episodes] == list(range(k))
    for e in range(k):
        assert pq.read_table(out / f"data/chunk-000/file-{e:03d}.parquet").num_rows == r.episodes[e].length
    done = evaluate(**SLOW_RUN, out=out)  # type: ignore[arg-type]
    assert done.status == "OK" and done.episodes_recorded == EPISODES
    assert [e.episode_index for e in done.episodes] == list(range(EPISODES))


def test_interrupted_commit_is_repaired_from_the_staged_copy(tmp_path: Path) -> None:
    from rollbench.record.writer import DatasetWriter

    out = tmp_path / "run"
    evaluate(env="scripted/reach", policy="random", episodes=3, max_steps=5, out=out)
    ref = grade(out)
    # simulate a crash between writing episode 2's data file and its meta row (the commit point)
    meta = out / "meta/episodes/chunk-000/file-002.parquet"
    data = out / "data/chunk-000/file-002.parquet"
    staged = out / ".staging/episode-000002"
    staged.mkdir(parents=True)
    t = pq.read_table(data)
    pq.write_table(t.drop_columns(["index"]), staged / "data.parquet")
    row = pq.read_table(meta).to_pylist()[0]
    (staged / "episode.json").write_text(
        json.dumps(
            {
                **{k: v for k, v in row.items() if k.startswith("rollbench/")},
                "length": t.num_rows,
                "episode_index": 2,
                "task_index": 0,
                "traceback": None,
            }
        )
    )
    meta.unlink()
    info = json.loads((out / "meta/info.json").read_text())
    writer = DatasetWriter(out, info["features"], 10, ["move the point to the goal"], "scripted")
    assert writer.committed == 2 and not data.exists()  # the orphan data file was removed
    assert writer.promote_ready() == [2]
    writer.write_stats()  # as a resume does after promoting (grade checks stats.json against the step rows)
    again = grade(out)
    assert again.violations == [] and again.episodes == ref.episodes


FRAMES_BEHIND = "meta/info.json says total_frames=10 but the data files hold 15 rows"  # 3 episodes of 5 steps


def _killed_before_the_commit_point(out: Path, status: str, drop: int = 2) -> None:
    """A 3-episode run as a SIGKILL between writing episode ``drop``'s data file and its meta row leaves it: no
    meta row for it, info.json as the writer rewrote it after the commit before, run.json's ``status``."""
    (out / f"meta/episodes/chunk-000/file-{drop:03d}.parquet").unlink()
    info = json.loads((out / "meta/info.json").read_text())
    kept = [e for e in range(3) if e != drop]
    rows = sum(pq.read_table(out / f"data/chunk-000/file-{e:03d}.parquet").num_rows for e in kept)
    info.update(total_episodes=2, total_frames=rows, splits={"train": "0:2"})
    (out / "meta/info.json").write_text(json.dumps(info, indent=4))
    log = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**log, "status": status}, indent=2))


@pytest.mark.parametrize(
    ("status", "drop", "violations"),
    [
        ("RUNNING", 2, []),
        ("INTERRUPTED", 2, []),
        ("OK", 2, ["data rows exist for episodes without an episode record: [2]", FRAMES_BEHIND]),
        ("RUNNING", 1, ["data rows exist for episodes without an episode record: [1]", FRAMES_BEHIND]),
    ],
    ids=["running", "interrupted", "finished: damage", "not the next commit: damage"],
)
def test_a_killed_commits_data_file_is_a_leftover_of_an_unfinished_run_never_damage(
    tmp_path: Path, status: str, drop: int, violations: list[str]
) -> None:
    out = tmp_path / "run"
    evaluate(env="scripted/reach", policy="random", episodes=3, max_steps=5, out=out)
    _killed_before_the_commit_point(out, status, drop)
    r = grade(out).to_json()
    # hostile round 17 (b, F2): the next commit's data file without its meta row was called damage ("data rows
    # exist...", total_frames behind the data files) and every reader refused the killed run
    assert [v for v in r["violations"] if "data rows" in v or "total_frames" in v] == violations
    assert [e["episode_index"] for e in r["episodes"]] == [e for e in range(3) if e != drop]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
@pytest.mark.slow
def test_ctrl_c_or_sigterm_marks_the_run_interrupted_keeps_finished_episodes_and_says_how_to_resume(
    tmp_path: Path, signum: int, code: int
) -> None:
    out = tmp_path / "run"
    proc = start_slow_run(out, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_committed(out, 3)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    # the printed command names the plug-in policy again: resume refuses to import a module a run.json names unasked
    # and its sleep_s again: a run.json's wait binds only when typed again (hostile round 13, F10)
    again_typed = "--policy fault_policies:slow --policy-options '{\"sleep_s\":0.05}'"
    assert f"resume with: rollbench eval --resume {out} {again_typed}\n" in err
    log = json.loads((out / "run.json").read_text())
    k = log["results"]["episodes_recorded"]
    assert log["status"] == "INTERRUPTED" and log["executions"][-1]["interrupted"] is True
    assert 3 <= k < EPISODES and log["results"]["violations"] == []
    assert not (out / "run.live.json").exists()
    graded = subprocess.run([ROLLBENCH, "grade", str(out)], env=_env(), capture_output=True, text=True, timeout=120)
    assert (
        graded.returncode == 1
        and (  # PARTIAL, and grade says why and how to go on
            f"note: {out}: run.json says INTERRUPTED (Ctrl-C or SIGTERM stopped it; its committed episodes are kept); "
            f"resume it with: rollbench eval --resume {out} (its run.json names policy 'fault_policies:slow', "
            "policy_options 'sleep_s=0.05': resume uses them only when you type them again or add --trust-run; "
            "do so only for a run you recorded yourself)\n"
        )
        in graded.stderr
    ), graded.stderr
    again = subprocess.run(
        [ROLLBENCH, *printed_command(err)[1:], "--json"],  # the command exactly as printed
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["episodes_recorded"] == EPISODES


def test_staged_episode_damaged_by_a_power_loss_is_removed_on_reopen_and_runs_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Staging is not fsync'd (record.lerobot): after a power loss a staged episode can be empty files. Oracle: the
    same run never interrupted."""
    from rollbench.record.writer import DatasetWriter

    run = {"env": "scripted/reach", "policy": "random", "episodes": 6, "max_steps": 5}
    ref = evaluate(**run, out=tmp_path / "ref")  # type: ignore[arg-type]
    out = tmp_path / "run"
    evaluate(**run, out=out)  # type: ignore[arg-type]
    info = json.loads((out / "meta/info.json").read_text())
    writer = DatasetWriter(out, info["features"], 10, ["move the point to the goal"], "scripted")
    writer.uncommit({4})  # episode 5 is staged again (whole), episode 4 is gone
    damaged = out / ".staging/episode-000004"
    damaged.mkdir()
    (damaged / "episode.json").write_bytes(b"")  # what a power loss leaves of files never fsync'd
    (damaged / "data.parquet").write_bytes(b"")
    capsys.readouterr()
    again = evaluate(**run, out=out)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert (
        "staged episode 4 is damaged (episode.json is not readable JSON: Expecting value at line 1 column 1)" in err
        and "it will run again" in err
    )
    assert "staged episode 5" not in err
    assert again.status == "OK" and again.violations == []
    assert again.episodes == ref.episodes
    assert not (out / ".staging").exists()


def test_a_staged_video_is_not_fsynced_and_a_committed_one_is_with_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record.lerobot: staging is not fsync'd, committing is (the file, then its directory)."""
    import numpy as np

    from rollbench.record.files import encode_video

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    frames = [np.zeros((16, 16, 3), np.uint8)] * 2
    encode_video(tmp_path / "staged.mp4", frames, 10, durable=False)
    assert synced == []
    encode_video(tmp_path / "committed.mp4", frames, 10)
    assert len(synced) == 2


@pytest.mark.parametrize(
    ("status", "lag", "violation"),
    [
        ("INTERRUPTED", 1, None),  # killed between episode 2's commit point and the info.json update
        ("RUNNING", 2, None),  # a process that died without a word: its status is still RUNNING
        ("OK", 1, "meta/info.json says total_episodes=2 but 3 episodes are recorded"),  # a finished run: damage
        ("INTERRUPTED", -1, "meta/info.json says total_episodes=4 but 3 episodes are recorded"),  # ahead: damage
    ],
)
def test_info_json_one_commit_behind_is_a_crash_of_an_unfinished_run_not_damage(
    tmp_path: Path, status: str, lag: int, violation: str | None
) -> None:
    """The writer rewrites ``meta/info.json`` after each episode's commit point; a SIGKILL between the two leaves
    the totals of an earlier commit (seen by a mid-run kill test). For a run not finished that is no violation
    (the next writer rewrites them); for a finished run, or totals ahead of what is recorded, it is. Totals here
    are counted by hand from the step files, not by rollbench."""
    out = tmp_path / "run"
    evaluate(env="scripted/reach", policy="random", episodes=3, max_steps=5, out=out)
    rows = [pq.read_metadata(out / f"data/chunk-000/file-{e:03d}.parquet").num_rows for e in range(3)]
    info_path, log_path = out / "meta/info.json", out / "run.json"
    info = json.loads(info_path.read_text())
    kept = 3 - lag
    info["total_episodes"] = kept
    info["total_frames"] = sum(rows[:kept]) if lag >= 0 else sum(rows) + 1
    info_path.write_text(json.dumps(info))
    log = json.loads(log_path.read_text())
    log["status"] = status
    log_path.write_text(json.dumps(log))
    r = grade(out)
    assert r.episodes_recorded == 3
    if violation is None:
        assert r.violations == []
    else:
        assert violation in r.violations


@pytest.mark.slow
def test_the_resume_command_printed_after_ctrl_c_repeats_every_name_resume_requires_and_completes_the_run(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    options = {"sleep_s": 0.05, "endpoint": "ws://127.0.0.1:9/unused"}  # a string with ':' in the options
    args = [ROLLBENCH, "eval", "--env", "scripted/reach", "--policy", "fault_policies:slow", "--policy-options",
            json.dumps(options), "--episodes", str(EPISODES), "--max-steps", "10", "--out", str(out),
            "--workers", "2"]  # fmt: skip
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = _popen(args, {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}, venv_on_path=False)
    finally:
        signal.signal(signal.SIGINT, old)
    wait_for_committed(out, 2)
    proc.send_signal(signal.SIGINT)
    said, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    command = printed_command(said + err)
    # rollbench is not on PATH (the README's set-up does not put it there): the program is named as it was typed
    assert command[:4] == [ROLLBENCH, "eval", "--resume", str(out)]
    assert command[4:6] == ["--policy", "fault_policies:slow"] and command[6] == "--policy-options"
    assert json.loads(command[7]) == options
    assert command[8:] == ["--workers", "2"]  # how it ran is not in run.json: typed for the user (new-user check)
    resumed = subprocess.run(  # the command exactly as printed
        command,
        env=_env(venv_on_path=False),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    log = json.loads((out / "run.json").read_text())
    assert log["status"] == "OK" and log["results"]["episodes_recorded"] == EPISODES
    assert len(list(out.glob("meta/episodes/chunk-000/*.parquet"))) == EPISODES


def test_a_run_killed_before_its_first_run_json_is_started_afresh_by_the_same_command(tmp_path: Path) -> None:
    """Hostile round 17 (b, F3): a SIGKILL after ``run.lock`` was made and before run.json was written left a
    directory every later command refused ("exists and is not a rollbench run directory"). Holding only run.lock
    and run.json's own temporaries, it is started afresh; with anything else in it, still refused."""
    from cli_in_process import invoke

    out = tmp_path / "run"
    out.mkdir()
    (out / "run.lock").touch()
    (out / ".run.json.k3x9_a0q.tmp").write_text('{"half": ')
    argv = [
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "random",
        "--episodes",
        "2",
        "--max-steps",
        "3",
        "--out",
        out,
    ]
    r = invoke(*argv)
    assert r.returncode == 0, r.stdout
    assert grade(out).episodes_recorded == 2
    assert not (out / ".run.json.k3x9_a0q.tmp").exists()  # the writer's own temporary, removed under its lock
    other = tmp_path / "other"
    other.mkdir()
    (other / "run.lock").touch()
    (other / "draft.txt").write_text("mine")
    r = invoke(*argv[:-1], other)
    assert r.returncode == 2 and "exists and is not a rollbench run directory; choose another --out" in r.stderr
    assert sorted(p.name for p in other.iterdir()) == ["draft.txt", "run.lock"]


@pytest.mark.slow
def test_ctrl_c_on_a_narrow_terminal_prints_the_resume_command_whole_on_a_line_of_its_own(tmp_path: Path) -> None:
    """A new user's terminal word-wrapped the resume command, and pasting its two lines ran `rollbench eval` alone.
    On a terminal (a pseudo-terminal of 60 columns here) the sentence is wrapped and the command is one line."""
    import fcntl
    import pty
    import struct
    import termios

    out = tmp_path / "run"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    proc = start_slow_run(out, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    wait_for_committed(out, 2)
    proc.send_signal(signal.SIGINT)
    said = b""
    while True:  # until the child closed the terminal (EIO on Linux)
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        said += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 130
    lines = said.decode().replace("\r", "").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.rstrip().endswith("resume with:"))
    expected = ["rollbench", "eval", "--resume", str(out), "--policy", "fault_policies:slow", "--policy-options",
                '{"sleep_s":0.05}']  # fmt: skip
    assert shlex.split(lines[at + 1]) == expected, lines[at - 2 : at + 3]
    assert len(lines[at + 1]) > 60  # longer than the terminal: left to it to wrap, never broken by rollbench
