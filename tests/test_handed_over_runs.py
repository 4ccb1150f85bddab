"""A run directory someone handed over never makes rollbench connect, spend a credential, run an interpreter or
rewrite what was recorded; output options never point inside a run; every bound is stated (issue 42, items 1, 3,
8, 14, 15, 18).

``rollbench`` commands on copies of one recorded ``scripted/reach`` run, run in the test process
(``tests/cli_in_process.py``: the claims are about what a command refuses, writes and connects to, not about the
process boundary); a real ``python -m rollbench`` process where the process is the point (Ctrl-C, and the
interpreter a listing might run from the current directory) and for the commands that serve until stopped. The oracle for "connects" is a loopback HTTP server
started here that records every request it gets (and the Authorization header it carried): a refused resume leaves
it untouched, the same resume with the URL typed again reaches it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import rollbench
from cli_in_process import invoke
from doctored_files import copy_of, edit_json
from recording_service import recording_service
from rollbench.core.spec import build_spec

SRC = str(Path(rollbench.__file__).resolve().parents[1])
TESTS = str(Path(__file__).resolve().parent)
TOKEN = "tok-handed-over-0123456789"


def env_with(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS]), "ROLLBENCH_SERVER_TOKEN": TOKEN, **extra}


# commands that serve until stopped: a refusal of theirs that regressed would serve forever in the test process
SERVERS = ("serve-policy", "dashboard", "mcp")


def rb(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``rollbench ARGS`` in this process, with the server token in the environment (a server command in a process
    of its own)."""
    if str(args[0]) in SERVERS:
        return rb_process(*args, cwd=cwd)
    return invoke(*args, cwd=cwd, env={"ROLLBENCH_SERVER_TOKEN": TOKEN})


def rb_process(*args: object, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m rollbench ARGS`` as a process of its own."""
    cmd = [sys.executable, "-m", "rollbench", *map(str, args)]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env_with(), cwd=cwd, stdin=subprocess.DEVNULL
    )


def tree(root: Path) -> dict[str, str]:
    """Every entry below ``root`` with a hash of each regular file's bytes."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


@pytest.fixture
def service() -> Iterator[tuple[int, list[tuple[str, str | None]]]]:
    """(port, requests seen) of a loopback recording server."""
    with recording_service() as found:
        yield found


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("recorded") / "run"
    r = rb("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "2", "--max-steps", "3", "--out", run)
    assert r.returncode == 0, r.stderr
    return run


def one_line_refusal(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (r.returncode, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    return lines[0]


# ---- item 1: a run.json naming a server or an agent --------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "options"),
    [
        ("http://127.0.0.1:{port}/act", {}),
        ("https://127.0.0.1:{port}/act", {}),
        ("ws://127.0.0.1:{port}", {}),
        ("wss://127.0.0.1:{port}", {}),
        ("http://localhost:{port}/v1/act?x=1", {"timeout_s": 5}),
        ("agent:openai/gpt-4o", {}),
        ("agent:openrouter/x/y", {"temperature": 0}),
    ],
)
@pytest.mark.slow
def test_resuming_a_run_that_names_a_server_or_an_agent_connects_nowhere_unasked(
    recorded: Path, tmp_path: Path, service: tuple[int, list[Any]], policy: str, options: dict[str, Any]
) -> None:
    port, seen = service
    name = policy.format(port=port)
    run = copy_of(recorded, tmp_path)
    edit_json(run / "run.json", lambda log: log["spec"].update(policy=name, policy_options=options))
    before = tree(run)
    line = one_line_refusal(rb("eval", "--resume", run))
    assert f"names policy {name!r}, which rollbench would import, run, read, connect to or send your token" in line
    assert line.endswith("repeat the name on the command line (e.g. --policy/--env as recorded) or add --trust-run")
    assert seen == [] and tree(run) == before


@pytest.mark.slow
def test_the_same_resume_with_the_url_typed_again_reaches_the_server_with_the_token(
    recorded: Path, tmp_path: Path, service: tuple[int, list[Any]]
) -> None:
    """The positive control of the test above: the oracle sees a connection when the user names the server."""
    port, seen = service
    url = f"http://127.0.0.1:{port}/act"
    run = copy_of(recorded, tmp_path)
    edit_json(run / "run.json", lambda log: log["spec"].update(policy=url))
    edit_json(run / "run.json", lambda log: log.update(spec_identity=build_spec(**log["spec"]).identity()))
    r = rb("eval", "--resume", run, "--policy", url)
    assert r.returncode == 2 and seen and seen[0][1] == f"Bearer {TOKEN}", (r.stderr, seen)


# ---- item 3: venvs and the recorded plan --------------------------------------------------------------------------
def test_a_venv_in_the_current_directory_is_never_the_benchmarks_interpreter(tmp_path: Path) -> None:
    marker = tmp_path / "RAN"
    python = tmp_path / ".venv-libero-ref" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho ran > {marker}\n")
    python.chmod(0o755)
    code = "from rollbench.envs.hosted.remote import venv_python; print(venv_python('.venv-libero-ref', 'RB_UNSET_PY'))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env_with())
    found = r.stdout.strip()
    assert r.returncode == 0 and found != str(python) and not found.startswith(str(tmp_path)), found
    listing = rb_process("envs", "libero_ref", "--no-tasks", cwd=tmp_path)  # a fresh process: nothing cached
    assert "Traceback" not in listing.stderr and not marker.exists()


@pytest.mark.parametrize(
    ("what", "damage", "words"),
    [
        ("instruction", lambda r: edit_json(r / "run.json", lambda log: log["plan"]["tasks"][0].update(instruction="x")),
         "task 'scripted/reach': instruction: 'x' there, 'move the point to the goal' here"),
        ("horizon", lambda r: edit_json(r / "run.json", lambda log: log["plan"]["tasks"][0].update(max_steps=9)),
         "task 'scripted/reach': max_steps: 9 there, 3 here"),
        ("seed", lambda r: edit_json(r / "run.json", lambda log: log["plan"]["episodes"][1].update(seed=77)),
         "its planned episodes (seeds, initial states, instructions) differ"),
        ("tasks", lambda r: edit_json(r / "run.json", lambda log: log["plan"]["tasks"].append(log["plan"]["tasks"][0])),
         "2 tasks recorded, 1 now"),
        ("state-width", lambda r: edit_json(r / "meta/info.json",
                                            lambda i: i["features"]["observation.state"].update(shape=[7])),
         "meta/info.json declares other features (observation.state:"),
        ("extra-feature", lambda r: edit_json(r / "meta/info.json",
                                              lambda i: i["features"].update({"observation.images.top": {}})),
         "meta/info.json declares other features"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_resume_refuses_a_spec_that_no_longer_resolves_to_the_recorded_plan_and_rewrites_nothing(
    recorded: Path, tmp_path: Path, what: str, damage: Callable[[Path], None], words: str
) -> None:
    run = copy_of(recorded, tmp_path)
    damage(run)
    before = tree(run)
    line = one_line_refusal(rb("eval", "--resume", run))
    assert f"--resume {run}: the spec no longer resolves to the plan its run.json records (" in line
    assert words in line and line.endswith("or start a new --out")
    assert tree(run) == before


# ---- item 8: output options inside a run ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "args"),
    [
        ("--figure", ["robustness", "R", "--figure", "R/meta/info.json"]),
        ("--figure", ["robustness", "R", "--figure", "R/new.png"]),
        ("--log-requests", ["serve-policy", "--policy", "zero", "--log-requests", "R/meta/info.json"]),
        ("--log-requests", ["serve-policy", "--policy", "zero", "--log-requests", "R/data/requests.jsonl"]),
        ("--out", ["release", "S", "--out", "R/rel"]),
        ("--out", ["release", "S", "--out", "R"]),
        ("--out", ["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b",
                   "random", "--budget", "6", "--out", "R/seq"]),
        ("--root", ["mcp", "--root", "R/meta/mcp"]),
        ("--cache-dir", ["dashboard", "--root", "S", "--cache-dir", "R/cache"]),
        ("--labels", ["dashboard", "--root", "S", "--labels", "R/labels.json"]),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_an_output_option_inside_a_run_directory_is_refused_before_anything_is_written(
    recorded: Path, tmp_path: Path, option: str, args: list[str]
) -> None:
    run, other = copy_of(recorded, tmp_path, "R"), copy_of(recorded, tmp_path, "S")
    before = tree(tmp_path)
    argv = [str(run) + a[1:] if a.startswith("R") else str(other) if a == "S" else a for a in args]
    line = one_line_refusal(rb(*argv))
    shown = argv[argv.index(option) + 1]
    assert line == (
        f"error: {option} {shown} lies inside the run directory {run}; write outputs elsewhere (a run directory "
        "holds only what its recorder wrote)"
    )
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("option", "args"),
    [
        ("--log-requests", ["serve-policy", "--policy", "zero", "--port", "0", "--log-requests", "L"]),
        ("--labels", ["dashboard", "--root", "S", "--labels", "L"]),
        ("--figure", ["robustness", "S", "--figure", "L"]),
        ("--out", ["report", "S", "--out", "L"]),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_an_output_file_hard_linked_into_a_run_is_refused_and_the_run_keeps_its_bytes(
    recorded: Path, tmp_path: Path, option: str, args: list[str]
) -> None:
    """A hard link outside the run to R/meta/stats.json passes the inside-a-run check (its path is elsewhere), but
    appending to it or rewriting it in place would change the run's own file: refused, nothing written."""
    run, other = copy_of(recorded, tmp_path, "R"), copy_of(recorded, tmp_path, "S")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "hl.png"
    os.link(run / "meta" / "stats.json", link)
    before = tree(tmp_path)
    argv = [str(link) if a == "L" else str(other) if a == "S" else a for a in args]
    line = one_line_refusal(rb(*argv))
    assert line == (
        f"error: {option} {link} has 2 hard links; rollbench writes only to a file with no other names (give a new "
        "path)"
    )
    assert tree(tmp_path) == before
    assert os.stat(run / "meta" / "stats.json").st_nlink == 2


def test_the_request_log_is_opened_only_as_a_lone_regular_file(recorded: Path, tmp_path: Path) -> None:
    """The open itself re-checks on the opened file (a link made after the up-front check is still refused)."""
    from rollbench.core.contracts import ConfigError
    from rollbench.record.safe_files import open_append_private

    run = copy_of(recorded, tmp_path, "R")
    link = tmp_path / "hl.jsonl"
    os.link(run / "meta" / "stats.json", link)
    before = tree(run)
    with pytest.raises(ConfigError, match="is not a regular file with a single name"):
        open_append_private(link, "--log-requests")
    os.symlink(run / "meta" / "info.json", tmp_path / "sym.jsonl")
    with pytest.raises(ConfigError, match="cannot be opened"):
        open_append_private(tmp_path / "sym.jsonl", "--log-requests")
    assert tree(run) == before
    fresh = tmp_path / "fresh.jsonl"
    with open_append_private(fresh, "--log-requests") as f:
        f.write("one\n")
    with open_append_private(fresh, "--log-requests") as f:
        f.write("two\n")
    assert fresh.read_text() == "one\ntwo\n"


# ---- item 15: bounds ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b", "random",
          "--budget", "6", "--look-every", "1000000000", "--out", "W/seq"],
         "--look-every must be between 1 and the budget (6 pairs), got 1000000000"),
        (["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b", "random",
          "--budget", "6", "--look-every", "7", "--out", "W/seq"],
         "--look-every must be between 1 and the budget (6 pairs), got 7"),
        (["dashboard", "--root", "W", "--stale-after", "nan"],
         "--stale-after must be at least 1 and at most 604800 seconds, got nan"),
        (["dashboard", "--root", "W", "--stale-after", "-1"],
         "--stale-after must be at least 1 and at most 604800 seconds, got -1"),
        (["dashboard", "--root", "W", "--stale-after", "inf"],
         "--stale-after must be at least 1 and at most 604800 seconds, got inf"),
        (["dashboard", "--root", "W", "--stale-after", "1e-320"],
         "--stale-after must be at least 1 and at most 604800 seconds, got 9.99989e-321"),
        (["dashboard", "--root", "W", "--stale-after", "0"],
         "--stale-after must be at least 1 and at most 604800 seconds, got 0"),
        (["mcp", "--root", "W/mcp", "--max-steps-ceiling", "100000000000000000000"],
         "--max-steps-ceiling must be between 1 and 100000, got 100000000000000000000"),
        (["mcp", "--root", "W/mcp", "--max-steps-ceiling", "100001"],
         "--max-steps-ceiling must be between 1 and 100000, got 100001"),
        (["serve-policy", "--policy", "zero", "--session-idle-s", "1e-300"],
         "--session-idle-s must be between 0.1 and 86400 seconds, got 1e-300"),
        (["serve-policy", "--policy", "zero", "--request-timeout-s", "0.01"],
         "--request-timeout-s must be between 0.1 and 86400 seconds, got 0.01"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_out_of_range_bounds_are_refused_up_front_with_the_range(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    before = tree(tmp_path)
    line = one_line_refusal(rb(*[a.replace("W", str(tmp_path), 1) if a.startswith("W") else a for a in args]))
    assert line == f"error: {expected}"
    assert tree(tmp_path) == before


# ---- item 14: robustness controls ----------------------------------------------------------------------------------
def _perturb(log: dict[str, Any], episode: int, control: str, task: str | None = None) -> None:
    e = log["plan"]["episodes"][episode]
    e["perturbation"] = {"category": "position", "level": None, "control": control, "detail": "x"}
    if task is not None:
        e["task"] = task


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda log: _perturb(log, 1, "scripted/reach"), "is the perturbed task itself"),
        (lambda log: _perturb(log, 1, "metaworld/reach-v3"), "is a task of another family than 'scripted/reach'"),
        (lambda log: (_perturb(log, 0, "scripted/push", "scripted/reach"), _perturb(log, 1, "scripted/reach",
                                                                                    "scripted/push")),
         "is itself a perturbed task; a control is unperturbed"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_robustness_refuses_a_control_that_cannot_be_the_perturbed_tasks_control(
    recorded: Path, tmp_path: Path, damage: Callable[[dict[str, Any]], None], words: str
) -> None:
    run = copy_of(recorded, tmp_path)
    edit_json(run / "run.json", damage)
    before = tree(run)
    for cmd in ("robustness", "summarize"):
        line = one_line_refusal(rb(cmd, run))
        assert f"{run}/run.json is not a rollbench run log: its plan.episodes[" in line and words in line
    assert tree(run) == before


# ---- item 18: resume of a finished run; Ctrl-C without --out -------------------------------------------------------
@pytest.mark.slow
def test_resuming_a_finished_run_again_and_again_adds_no_execution(recorded: Path, tmp_path: Path) -> None:
    run = copy_of(recorded, tmp_path)
    first = json.loads((run / "run.json").read_text())["executions"]
    for _ in range(2):
        assert rb("eval", "--resume", run).returncode == 0
    log = json.loads((run / "run.json").read_text())
    assert log["executions"] == first and len(first) == 1 and log["status"] == "OK"


@pytest.mark.slow
def test_ctrl_c_without_out_prints_the_exact_resume_command_of_the_directory_it_made(tmp_path: Path) -> None:
    args = ["eval", "--env", "scripted/reach", "--policy", "fault_policies:slow", "--policy-options",
            '{"sleep_s": 0.05}', "--episodes", "40", "--max-steps", "10"]  # fmt: skip
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's children ignore SIGINT
    try:
        proc = subprocess.Popen([sys.executable, "-m", "rollbench", *args], cwd=tmp_path, env=env_with(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, old)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(tmp_path.glob("runs/*/meta/episodes/chunk-000/*.parquet")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    (made,) = list((tmp_path / "runs").iterdir())
    said = " ".join((out + err).split())
    assert proc.returncode == 130
    # the plug-in named again, and its recorded sleep_s (a wait binds only when typed again: hostile round 13, F10)
    printed = f"rollbench eval --resume runs/{made.name} --policy fault_policies:slow --policy-options " + (
        "'{\"sleep_s\":0.05}'"
    )
    assert f"resume with: {printed}" in said and "`" not in said, said
    assert "(or the same command)" not in said
    resumed = rb(*shlex.split(printed)[1:], cwd=tmp_path)  # the command exactly as printed
    assert resumed.returncode == 0 and list((tmp_path / "runs").iterdir()) == [made]
