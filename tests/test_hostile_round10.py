"""Hostile round 10 (issue 42): a number rollbench reads from a URL segment, a header, a folder name or an environment
variable is ASCII digits only (``str.isdigit`` accepts ``²``, ``①`` and other scripts' digits, which ``int()``
refuses or reads as another number), so such a value is a 400 or a refusal, never a 500, a traceback or an alias.

Oracles: the status codes the dashboard's docs state (400 for a malformed episode index), the episodes recorded
here, and a command run with and without the odd environment variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from doctored_files import edit_json
from rollbench.core.contracts import ConfigError
from rollbench.core.format import is_decimal
from rollbench.dashboard.labels import parse_episode_key

ODD_DIGITS = ["²", "①", "٣", "𝟙", "１"]  # superscript, circled, Arabic-Indic, mathematical bold, full-width


@pytest.mark.parametrize("text", [*ODD_DIGITS, "", "-1", "+1", " 1", "1 ", "1.0", "0x1"])
def test_only_ascii_digits_are_a_decimal_number(text: str) -> None:
    assert not is_decimal(text)


@pytest.mark.parametrize("text", ["0", "7", "0123", "999999999"])
def test_ascii_digits_are_a_decimal_number(text: str) -> None:
    assert is_decimal(text)


@pytest.mark.parametrize("digit", ODD_DIGITS)
def test_a_label_key_with_an_odd_digit_is_refused_by_name(digit: str) -> None:
    with pytest.raises(ConfigError, match="is not host/robot/name/episode_index"):
        parse_episode_key(f"h/point/r/{digit}")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from dashboard_support import ServerThread, record_run

    root = tmp_path_factory.mktemp("round10")
    record_run(root / "runs" / "r", "h", episodes=2)
    server = ServerThread([root / "runs"], root / "labels.json").start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("digit", ODD_DIGITS)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/episode/h/point/r/{e}"),
        ("GET", "/episode/h/point/r/{e}"),
        ("GET", "/media/h/point/r/{e}/top"),
        ("GET", "/transcript/h/point/r/{e}"),
        ("POST", "/api/label/h/point/r/{e}"),
    ],
)
def test_an_episode_index_in_odd_digits_is_a_400_never_a_500_nor_another_episode(
    dashboard: str, method: str, path: str, digit: str
) -> None:
    url = dashboard + path.format(e=digit)
    got = httpx.request(method, url, json={"label": "failed"} if method == "POST" else None, timeout=60)
    assert got.status_code == 400, (got.status_code, got.text[:200])
    assert "is not an episode index" in got.text
    assert httpx.get(f"{dashboard}/api/episode/h/point/r/1", timeout=60).status_code == 200


@pytest.mark.parametrize(("name", "value"), [("COLUMNS", "²"), ("COLUMNS", "١٠٠"), ("LINES", "①")])
def test_an_odd_digit_terminal_size_is_ignored_as_a_non_number_is(name: str, value: str) -> None:
    env = {**os.environ, name: value}
    odd = subprocess.run([sys.executable, "-m", "rollbench", "envs", "scripted"], env=env, capture_output=True,
                         text=True, timeout=120, encoding="utf-8")  # fmt: skip
    plain = subprocess.run([sys.executable, "-m", "rollbench", "envs", "scripted"], env={**env, name: "abc"},
                           capture_output=True, text=True, timeout=120, encoding="utf-8")  # fmt: skip
    assert odd.returncode == 0 and "Traceback" not in odd.stderr, odd.stderr[-500:]
    assert (odd.stdout, odd.stderr) == (plain.stdout, plain.stderr)


# ---- F5: a policy's os.chdir never moves where rollbench writes ------------------------------------------------------
def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_policy_that_changes_directory_errors_its_episodes_and_writes_nothing_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.api import evaluate

    other, work = tmp_path / "other", tmp_path / "work"
    work.mkdir()
    evaluate(env="scripted/reach", policy="random", episodes=2, max_steps=3, out=other / "nm")
    before = _files(other / "nm")
    monkeypatch.chdir(work)
    got = evaluate(env="scripted/reach", policy="misbehaving_policies:in_act", policy_options={"to": str(other)},
                   episodes=2, max_steps=3, out="nm")  # fmt: skip
    assert os.getcwd() == str(work)
    assert _files(other / "nm") == before  # the other run, byte for byte
    assert got.episodes_recorded == 2 and [e.error_fault for e in got.episodes] == ["policy", "policy"]
    said = "policy.act changed rollbench's working directory (os.chdir to "
    assert all(said in (e.error or "") and repr(str(other)) in (e.error or "") for e in got.episodes)
    assert sorted(p.name for p in (work / "nm/data/chunk-000").iterdir()) == ["file-000.parquet", "file-001.parquet"]


def test_a_policy_factory_that_changes_directory_is_refused_and_the_directory_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.core.registry import make_policy

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        make_policy("misbehaving_policies:in_factory", {"to": "/"})
    assert str(caught.value) == (
        "policy 'misbehaving_policies:in_factory''s factory changed rollbench's working directory (os.chdir to '/'); "
        "rollbench changed it back: a policy must not change the working directory (use absolute paths)"
    )
    assert os.getcwd() == str(tmp_path)


# ---- F6: a policy's close() has the policy deadline ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_policy_whose_close_never_returns_costs_the_deadline_not_the_run(tmp_path: Path, workers: int) -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), tests])}
    args = ["eval", "--env", "scripted/reach", "--policy", "misbehaving_policies:close_hangs", "--episodes", "2",
            "--max-steps", "3", "--policy-timeout", "2", "--workers", str(workers), "--out", str(tmp_path / "r"),
            "--json"]  # fmt: skip
    got = subprocess.run([sys.executable, "-m", "rollbench", *args], env=env, capture_output=True, text=True,
                         timeout=240)  # fmt: skip
    assert got.returncode == 0, got.stderr[-800:]
    doc = json.loads(got.stdout)
    assert (doc["status"], doc["episodes_recorded"]) == ("OK", 2)
    warned = "close() did not return within --policy-timeout 2 s; rollbench went on without it"
    assert f"warning: policy misbehaving_policies:close_hangs: {warned}" in got.stderr


# ---- F8: bodies from the wire are strict JSON: UTF-8, one value per key ----------------------------------------------
LABEL = {"label": "partial", "note": "n"}
NOT_STRICT = {
    "UTF-16": json.dumps(LABEL).encode("utf-16"),
    "UTF-32": json.dumps(LABEL).encode("utf-32"),
    "UTF-8 BOM": b"\xef\xbb\xbf" + json.dumps(LABEL).encode(),
    "a key twice": b'{"label": "partial", "label": "failed"}',
    "a key twice, nested": b'{"label": "partial", "note": "n", "x": {"a": 1, "a": 2}}',
}


@pytest.mark.parametrize("body", NOT_STRICT.values(), ids=NOT_STRICT.keys())
def test_a_wire_body_that_is_not_strict_json_is_a_protocol_error(body: bytes) -> None:
    from rollbench.wire.decode import ProtocolError, loads_json

    with pytest.raises(ProtocolError):
        loads_json(body)


@pytest.mark.slow
@pytest.mark.parametrize("body", NOT_STRICT.values(), ids=NOT_STRICT.keys())
def test_the_label_api_refuses_a_body_that_is_not_strict_json_and_writes_nothing(dashboard: str, body: bytes) -> None:
    url = f"{dashboard}/api/label/h/point/r/0"
    got = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert got.status_code == 400, got.text
    assert got.json() == {"error": "the body is not JSON (UTF-8, finite numbers, each key once, at most 32 deep)"}
    assert httpx.get(f"{dashboard}/api/episode/h/point/r/0", timeout=60).json()["label"] is None


# ---- F7: serve-policy takes an instruction of at most an eval's length ----------------------------------------------
@pytest.mark.slow
def test_serve_policy_refuses_an_instruction_longer_than_an_eval_takes_and_logs_none_of_it(tmp_path: Path) -> None:
    from rollbench.core.spec import MAX_INSTRUCTION_CHARS
    from rollbench.wire.decode import encode_array
    from served_policy import requests, served

    def act(url: str, instruction: str) -> httpx.Response:
        body = {"session": "s", "instruction": instruction, "state": encode_array(np.zeros(4, np.float32))}
        return httpx.post(url, json=body, timeout=60)

    with served(tmp_path, "zero", "http", "--env", "scripted/reach") as (url, log, _):
        assert httpx.post(
            url, json={"session": "s", "reset": {"task": "scripted/reach", "seed": 0}}, timeout=60
        ).is_success
        longest = act(url, "x" * MAX_INSTRUCTION_CHARS)
        longer = act(url, "y" * (MAX_INSTRUCTION_CHARS + 1))
    assert longest.status_code == 200, longest.text
    assert longer.status_code == 400 and "the instruction is 4,097 characters; at most 4,096 are taken" in longer.text
    assert "y" * 100 not in log.read_text() and len(requests(log)) >= 2


# ---- F10: a sequential test whose arm B errored in every episode ends "insufficient coverage" at pair 0 -------------
@pytest.mark.slow
def test_a_sequential_test_with_every_b_episode_an_infrastructure_error_decides_insufficient_coverage(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    (tmp_path / "down").touch()  # fail_on_seeds: its server is down while this file exists, for every seed below
    b_options = json.dumps({"infra_seeds": list(range(2000)), "while_exists": str(tmp_path / "down")})
    args = ["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b",
            "fault_policies:fail_on_seeds", "--policy-options-b", b_options, "--budget", "6", "--out",
            str(tmp_path / "s"), "--json"]  # fmt: skip
    for _ in range(2):  # and once more: the finished test is re-read, not refused
        got = CliRunner().invoke(app, args)
        assert got.exit_code == 0, got.output[-800:]
        (task,) = json.loads(got.stdout)["tasks"]
        assert (task["decision"], task["stopped_at"], task["pairs_attempted"], task["pairs_counted"]) == (
            "insufficient_coverage", 0, 6, 0,
        )  # fmt: skip
    for arm in ("a", "b"):
        record = json.loads((tmp_path / "s" / f"{arm}-scripted_reach" / "run.json").read_text())["sequential"]
        assert (record["decision"], record["stopped_at"]) == ("insufficient_coverage", 0)


# ---- F9: a write the machine refuses (a file size limit, a full disk) is one line, and the run resumes -------------
def _limited(limit_bytes: int) -> Any:
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return apply


@pytest.mark.slow
@pytest.mark.parametrize(
    ("limit_kib", "said"),
    [
        (60, "error: the run stopped before anything was recorded: File too large"),
        (150, "error: the run stopped: File too large; finished episodes are committed; once there is room, resume "
              "with: rollbench eval --resume {run}"),
    ],
)  # fmt: skip
def test_a_file_size_limit_ends_eval_in_one_line_and_a_resume_finishes_the_run(
    tmp_path: Path, limit_kib: int, said: str
) -> None:
    run = tmp_path / "r"
    args = [sys.executable, "-m", "rollbench", "eval", "--env", "scripted/reach", "--policy", "random", "--episodes",
            "200", "--out", str(run)]  # fmt: skip
    got = subprocess.run(args, capture_output=True, text=True, timeout=300, preexec_fn=_limited(limit_kib * 1024))
    assert got.returncode == 1 and "Traceback" not in got.stderr, got.stderr[-800:]
    last = got.stderr.strip().splitlines()[-1]
    assert last.replace(f"{sys.executable} -m ", "") == said.format(run=run)
    if (run / "run.json").is_file():
        again = subprocess.run([*args[:3], "eval", "--resume", str(run), "--json"], capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert again.returncode == 0, again.stderr[-800:]
        assert json.loads(again.stdout)["episodes_recorded"] == 200


# ---- F11: a --peer URL carrying credentials is refused, never shown ---------------------------------------------------
@pytest.mark.parametrize(
    ("peer", "shown"),
    [
        ("http://alice:SecretPw123456789@127.0.0.1:1", "http://***@127.0.0.1:1"),
        ("http://127.0.0.1:2/?token=SecretQ12345678", "http://127.0.0.1:2/?token=***"),
        ("http://127.0.0.1:3/;token=SecretP12345678", "http://127.0.0.1:3/;token=***"),
        ("https://bob@gpu-box:8301#SecretT12345678", "https://***@gpu-box:8301"),
    ],
)
def test_a_peer_url_carrying_credentials_is_refused_naming_it_masked(peer: str, shown: str) -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    got = CliRunner().invoke(app, ["dashboard", "--peer", peer, "--port", "1"])
    assert got.exit_code == 2
    assert got.output.strip() == (
        f"error: --peer {shown} carries credentials, which every viewer of this dashboard (and of a central one "
        "reading it) would see; give the peer's token after '#' (URL#TOKEN): it is sent as a header, never shown"
    )
    assert "Secret" not in got.output


def test_a_peer_that_is_not_http_is_refused_without_printing_its_token() -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    got = CliRunner().invoke(app, ["dashboard", "--peer", "ftp://gpu-box#SecretT12345678", "--port", "1"])
    assert (
        got.exit_code == 2 and "Secret" not in got.output and "'ftp://gpu-box#***' is not an http(s) URL" in got.output
    )


# ---- F12: compare's planning options are refused without --power, never silently ignored -----------------------------
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--alpha", "1e-12"], "--alpha"),
        (["--alpha", "0.05"], "--alpha"),
        (["--power-target", "0.9", "--discordant", "0.3"], "--power-target, --discordant"),
        (["--p-a", "0.5", "--p-b", "0.7"], "--p-a, --p-b"),
    ],
)
def test_compare_refuses_planning_options_without_power(tmp_path: Path, args: list[str], named: str) -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    got = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), *args])
    assert got.exit_code == 2
    assert got.output.strip() == (
        f"error: {named} plan a comparison with --power; a comparison of runs tests at 0.05 (Holm across tasks): "
        "drop them, or add --power"
    )


def test_compare_power_still_takes_its_planning_options() -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    default = CliRunner().invoke(app, ["compare", "--power", "--p-a", "0.5", "--p-b", "0.8", "--json"])
    stated = CliRunner().invoke(app, ["compare", "--power", "--p-a", "0.5", "--p-b", "0.8", "--alpha", "0.05",
                                      "--power-target", "0.8", "--json"])  # fmt: skip
    stricter = CliRunner().invoke(app, ["compare", "--power", "--p-a", "0.5", "--p-b", "0.8", "--alpha", "0.01",
                                        "--json"])  # fmt: skip
    assert default.exit_code == stated.exit_code == stricter.exit_code == 0
    assert default.stdout == stated.stdout != stricter.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--sequential"], "--sequential applies"),
        (["--min-coverage", "0.5"], "--min-coverage applies"),
        (["--min-coverage", "0.95"], "--min-coverage applies"),  # its default typed: still a run-only option
        (["--exclude-policy-errors", "--seed", "3"], "--seed, --exclude-policy-errors apply"),
        (["--unpaired", "--resamples", "500", "--allow-damaged"], "--unpaired, --resamples, --allow-damaged apply"),
    ],
)
def test_compare_power_refuses_the_options_of_a_comparison_of_runs(args: list[str], named: str) -> None:
    """Hostile round 12, F3: the reverse of the check above: --power with an option only a comparison of runs
    reads is refused in one line, never silently ignored."""
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    got = CliRunner().invoke(app, ["compare", "--power", "--p-a", "0.5", "--p-b", "0.6", *args])
    assert got.exit_code == 2 and got.stdout == ""
    drop = "it" if " applies " in f"{named} " else "them"
    assert got.stderr.strip() == (
        f"error: {named} to a comparison of runs; --power plans one from --p-a and --p-b: drop {drop}, or drop --power"
    )


# ---- F14: a host process's output costs bounded disk and memory ----------------------------------------------------
def test_a_child_that_prints_without_end_keeps_a_bounded_log_and_its_last_words(tmp_path: Path) -> None:
    from rollbench.wire.pipe import child

    flood = "import sys\nfor i in range(2_000):\n    sys.stdout.write('A' * 20_000 + '\\n')\nprint('last words')\n"
    with pytest.raises(child.ChildFailed) as caught:
        child.ChildProcess("flood host", [sys.executable, "-c", flood], start_timeout_s=120)
    logs = list(Path(tempfile.gettempdir()).glob("rollbench-flood-host-*.log"))
    try:
        assert str(caught.value).endswith("last words") and len(str(caught.value)) < 2_200
        (log,) = logs
        text = log.read_bytes()
        assert len(text) == child.MAX_LOG_BYTES + len(
            f"\n[rollbench: output past {child.MAX_LOG_BYTES:,} bytes is not kept]\n"
        )
        assert text.startswith(b"A" * 20_000 + b"\n")
    finally:
        for log in logs:
            log.unlink()


# ---- F13: a Ctrl-C while a worker process starts cannot reach its imports ---------------------------------------------
def _ignored_signals(pid: int) -> int:
    (line,) = [ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("SigIgn:")]
    return int(line.split()[1], 16)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the kernel's /proc/PID/status (Linux)")
def test_a_worker_process_ignores_sigint_from_its_first_instruction(tmp_path: Path) -> None:
    import signal

    from rollbench.core.spec import build_spec
    from rollbench.run.local import LocalBackend
    from rollbench.run.prepare import prepare_run
    from rollbench.run.worker import WorkerSetup

    run, _ = prepare_run(build_spec(env="scripted/reach", policy="zero", episodes=1), None)
    backend, before = LocalBackend(WorkerSetup(run, tmp_path, 1)), signal.getsignal(signal.SIGINT)
    try:
        backend.start(0)
        ignored = _ignored_signals(backend.procs[0].pid)  # long before the worker has imported rollbench
    finally:
        backend.close()
    assert ignored & (1 << (signal.SIGINT - 1))
    assert signal.getsignal(signal.SIGINT) is before  # this process's own Ctrl-C handling is back


# ---- F15: the user's token typed into a spec is refused, never recorded ----------------------------------------------
TOKEN = "tok_ABCDEFGH12345678zz"


@pytest.mark.parametrize(
    "fields",
    [
        {"instruction": f"please {TOKEN}"},
        {"instruction": "please " + __import__("base64").b64encode(TOKEN.encode()).decode()},
        {
            "instructions": [
                {"name": "v0", "instruction": "reach"},
                {"name": "v1", "instruction": f"reach {TOKEN[::-1]}"},
            ]
        },
        {"policy": "gpu-standin", "policy_options": {"inner": "zero", "note": TOKEN.upper()}},
    ],
    ids=["plain", "base64", "reversed in a variant", "upper-cased in an option"],
)
def test_a_spec_holding_the_users_token_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any]
) -> None:
    from rollbench.api import evaluate

    monkeypatch.setenv("ROLLBENCH_SERVER_TOKEN", TOKEN)
    with pytest.raises(ConfigError) as caught:
        evaluate(**{"env": "scripted/reach", "policy": "zero", "episodes": 1, "max_steps": 2, **fields},
                 out=tmp_path / "r")  # fmt: skip
    assert str(caught.value) == (
        "the run's spec holds the value of $ROLLBENCH_SERVER_TOKEN (in an instruction, a name or an option), which "
        "run.json and the recorded data would keep; take it out"
    )
    assert not (tmp_path / "r").exists()


def test_a_spec_without_the_token_runs_with_the_token_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollbench.api import evaluate

    monkeypatch.setenv("ROLLBENCH_SERVER_TOKEN", TOKEN)
    got = evaluate(
        env="scripted/reach", policy="zero", episodes=1, max_steps=2, instruction="reach", out=tmp_path / "r"
    )
    assert got.episodes_recorded == 1


# ---- HELD-but-loose: digits of other scripts and repeated cameras in a spec -------------------------------------------
@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"latency": "fixed:１０"}, "latency must be one of none, fixed:MS, steps:K, measured"),
        ({"latency": "steps:٣"}, "latency must be one of none, fixed:MS, steps:K, measured"),
        ({"cameras": ("top", "top")}, "cameras: each camera once; repeated: top"),
        ({"cameras": ("top",) * 5000}, "cameras: each camera once; repeated: top"),
    ],
)
def test_a_spec_with_other_scripts_digits_or_repeated_cameras_is_refused(fields: dict[str, Any], words: str) -> None:
    from rollbench.core.spec import build_spec

    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        build_spec(env="scripted/reach", policy="zero", **fields)


def test_a_checkpoint_folder_numbered_in_other_digits_names_no_step(tmp_path: Path) -> None:
    from rollbench.checkpoints.discover import find_checkpoints

    for name in ("000100", "ckpt_٣", "ckpt_𝟛", "step_200"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert [(c.step, c.name) for c in find_checkpoints(tmp_path)] == [(100, "000100"), (200, "step_200")]


# ---- round 11, F1: a policy writing into observation.state cannot change what is recorded --------------------------
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_policy_that_writes_into_the_observation_leaves_the_recorded_states_the_envs(
    tmp_path: Path, workers: int
) -> None:
    import pyarrow.parquet as pq

    from rollbench.api import evaluate
    from rollbench.run.execution import Execution

    def states(run: Path) -> list[list[float]]:
        rows = pq.read_table(run / "data/chunk-000/file-000.parquet", columns=["observation.state"])
        return [list(map(float, s)) for s in rows.column("observation.state").to_pylist()]

    common = {"env": "scripted/reach", "episodes": 1, "max_steps": 6, "execution": Execution(workers=workers)}
    evaluate(policy="scripted-expert", out=tmp_path / "expert", **common)
    evaluate(policy="misbehaving_policies:mutates_state", out=tmp_path / "mutating", **common)
    assert states(tmp_path / "mutating") == states(tmp_path / "expert")
    assert all(123.0 not in s for s in states(tmp_path / "mutating"))


# ---- round 11, F2: an exception Python can only ignore is one warning line -------------------------------------------
@pytest.mark.slow
def test_a_policy_whose_del_raises_gets_one_warning_line_not_a_traceback(tmp_path: Path) -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), tests])}
    args = ["eval", "--env", "scripted/reach", "--policy", "misbehaving_policies:del_raises", "--episodes", "1",
            "--max-steps", "2", "--out", str(tmp_path / "r"), "--json"]  # fmt: skip
    got = subprocess.run([sys.executable, "-m", "rollbench", *args], env=env, capture_output=True, text=True,
                         timeout=240)  # fmt: skip
    assert got.returncode == 0 and json.loads(got.stdout)["status"] == "OK"
    assert "Traceback" not in got.stderr and "Exception ignored" not in got.stderr, got.stderr
    assert "warning: RuntimeError: del boom raised in DelRaises.__del__ was ignored" in got.stderr.splitlines()


# ---- round 11, F4/F5: Ctrl-C while the command line imports, and after the run finished -----------------------------
EARLY_CTRL_C = """
import os, signal, sys
class CtrlCDuringImport:
    def find_spec(self, name, path=None, target=None):
        if name == "rollbench.cli.main":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlCDuringImport())
from rollbench.cli.entry import main
sys.argv = ["rollbench", "--help"]
main()
"""


def test_ctrl_c_while_the_command_line_imports_is_one_line_and_exit_130() -> None:
    import signal

    got = subprocess.run([sys.executable, "-c", EARLY_CTRL_C], capture_output=True, text=True, timeout=120,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert (got.returncode, got.stderr, got.stdout) == (130, "interrupted before anything ran\n", "")


def test_a_ctrl_c_message_says_what_run_json_says(tmp_path: Path) -> None:
    from rollbench.api import evaluate
    from rollbench.cli.eval_run import _interrupted
    from rollbench.core.spec import build_spec

    spec = build_spec(env="scripted/reach", policy="zero", episodes=2, max_steps=2)
    run = tmp_path / "r"
    evaluate(spec, out=run)
    assert (
        _interrupted(spec, run)
        == f"interrupted after the run finished: run.json says OK; rollbench grade {run} shows it"
    )
    edit_json(run / "run.json", lambda log: log.update(status="INTERRUPTED"))
    assert _interrupted(spec, run).startswith(
        "interrupted: finished episodes are committed and run.json says INTERRUPTED; resume with: "
    )
    assert (
        _interrupted(spec, tmp_path / "none") == "interrupted before any run directory was made; nothing was recorded"
    )
    assert _interrupted(spec, None) == "interrupted before any run directory was made; nothing was recorded"


# ---- round 11, F8: a user's release pattern runs in linear time, whatever it is ------------------------------------
def test_a_users_backtracking_pattern_scans_a_hostile_string_and_still_finds_its_matches() -> None:
    from rollbench.release.rules import Scanner

    rules = {"patterns": [{"name": "corp-id", "regex": r"([a-z0-9]+[._-]?)+#corp"},
                          {"name": "alt", "regex": r"(a|aa)+#corp"}]}  # fmt: skip
    scanner = Scanner(set(), set(), rules=rules, environ={})
    assert scanner.find("a" * 200_000 + "!") == []  # exponential for a backtracking engine
    found = scanner.find("ticket jo.doe#corp now")
    assert [(f.rule, f.value) for f in found] == [("corp-id", "jo.doe#corp")]


@pytest.mark.parametrize(
    ("rules", "words"),
    [
        ({"patterns": [{"name": "x", "regex": r"(?<!a)b"}]}, "--rules: patterns[0] is not a pattern release can run in linear time (RE2 syntax: no lookaround, no backreferences): invalid perl operator: (?<!"),
        ({"patterns": [{"name": "x", "regex": r"(a)\1"}]}, "--rules: patterns[0] is not a pattern release can run in linear time"),
        ({"allow": ["ok", "(?=x)"]}, "--rules: allow[1] is not a pattern release can run in linear time"),
        ({"patterns": ["just a string"]}, '--rules: patterns[0] is not an object with a string "name" and "regex"'),
        ({"patterns": [{"name": "x", "regex": 3}]}, '--rules: patterns[0] is not an object with a string "name" and "regex"'),
        ({"literals": [{"value": None}]}, '--rules: literals[0] is not an object with a string "value"'),
        ({"patterns": {"name": "x"}}, "--rules: patterns must be a list"),
        ({"allow": [7]}, "--rules: allow[0] is not a string"),
    ],
)  # fmt: skip
def test_a_rule_release_cannot_run_is_refused_by_its_place_in_the_file(rules: dict[str, Any], words: str) -> None:
    from rollbench.release.rules import Scanner

    with pytest.raises(ConfigError) as caught:
        Scanner(set(), set(), rules=rules, environ={})
    assert str(caught.value).startswith(words), str(caught.value)


# ---- round 11, F9: a peer's run whose identity another source serves is named, never silently dropped ---------------
@pytest.mark.slow
def test_two_peers_serving_one_identity_list_one_run_and_name_the_other(tmp_path: Path) -> None:
    from dashboard_support import ServerThread, fake_peer, peer_run

    listing_a = json.dumps({"runs": [peer_run("vm", "point", "same")]}).encode()
    listing_b = json.dumps({"runs": [{**peer_run("vm", "point", "same"), "policy": "random"}]}).encode()
    with fake_peer(b"{}", runs_listing=listing_a) as a, fake_peer(b"{}", runs_listing=listing_b) as b:
        central = ServerThread([], tmp_path / "labels.json", peers=[a, b], peer_refresh_s=0).start()
        try:
            doc = httpx.get(central.url + "/api/runs", timeout=60).json()
        finally:
            central.stop()
    assert [(r["key"], r["source"], r["policy"]) for r in doc["runs"]] == [("vm/point/same", a, "zero")]
    assert doc["errors"] == [f"{b}: identity vm/point/same is already served from {a}"]


# ---- round 11, F11/F12: a gym env's raising info is one line; its NaN reward is the env's error -------------------
def test_a_gym_env_whose_step_info_raises_is_refused_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    got = CliRunner().invoke(app, ["eval", "--env", "gym:odd_envs:RollbenchInfoRaises-v0", "--policy", "zero",
                                   "--episodes", "1", "--out", str(tmp_path / "r")])  # fmt: skip
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert got.output.strip().splitlines() == [
        "error: gymnasium env 'odd_envs:RollbenchInfoRaises-v0': reading its step info raised RuntimeError: info boom"
    ]


def test_an_env_reward_that_is_not_finite_ends_its_episode_as_the_envs_error(tmp_path: Path) -> None:
    from rollbench.api import evaluate, grade

    got = evaluate(env="gym:odd_envs:RollbenchNanReward-v0", policy="zero", episodes=2, out=tmp_path / "r")
    assert [(e.termination_reason, e.length, e.error_fault) for e in got.episodes] == [("error", 2, "environment")] * 2
    assert {e.error for e in got.episodes} == {"EpisodeError: env returned a non-finite reward (nan) at step 2"}
    assert grade(tmp_path / "r").violations == []


# ---- round 11, F10: stray bytes in a worker's channel cost that worker, never a hang --------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="the double finds its sockets in /proc (Linux)")
def test_stray_bytes_in_a_workers_channel_end_its_episode_and_the_run_goes_on(tmp_path: Path) -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), tests])}
    args = ["eval", "--env", "scripted/reach", "--policy", "misbehaving_policies:garbles_channel", "--episodes", "2",
            "--max-steps", "2", "--workers", "2", "--out", str(tmp_path / "r"), "--json"]  # fmt: skip
    got = subprocess.run([sys.executable, "-m", "rollbench", *args], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert "Traceback" not in got.stderr, got.stderr[-800:]
    doc = json.loads(got.stdout)
    assert doc["episodes_recorded"] == 2
    died = [e for e in doc["episodes"] if e["termination_reason"] == "error"]
    assert died and all(e["error_fault"] is not None for e in died)


# ---- round 11, F14: --spec RUN/run.json is handed-over content, as --resume's ---------------------------------------
def test_a_recorded_run_json_as_spec_imports_nothing_unasked(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rollbench.api import evaluate
    from rollbench.cli.main import app

    evaluate(env="scripted/reach", policy="fault_policies:slow", episodes=1, max_steps=2, out=tmp_path / "theirs")
    base = ["eval", "--spec", str(tmp_path / "theirs/run.json"), "--episodes", "1"]
    refused = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a")])
    assert refused.exit_code == 2 and not (tmp_path / "a").exists()
    assert refused.output.strip() == (
        f"error: --spec {tmp_path}/theirs/run.json is a recorded run.json naming policy 'fault_policies:slow', which "
        "rollbench would import, run, read, connect to or send your token or API key to; use it only if you trust "
        "it: repeat the name on the command line (e.g. --policy/--env as recorded) or add --trust-run"
    )
    typed = CliRunner().invoke(app, [*base, "--policy", "fault_policies:slow", "--out", str(tmp_path / "b")])
    trusted = CliRunner().invoke(app, [*base, "--trust-run", "--out", str(tmp_path / "c")])
    assert (typed.exit_code, trusted.exit_code) == (0, 0), (typed.output, trusted.output)
    own = tmp_path / "mine.json"
    own.write_text(json.dumps({"env": "scripted/reach", "policy": "fault_policies:slow", "max_steps": 2}))
    assert (
        CliRunner().invoke(app, ["eval", "--spec", str(own), "--episodes", "1", "--out", str(tmp_path / "d")]).exit_code
        == 0
    )


# ---- round 12, F2: a --peer URL the peer client could not use is refused at start, its host part unshown ------------
@pytest.mark.parametrize(
    "peer",
    ["http://127.0.0.1:9;token=abcdefgh12", "http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:٩",
     "http://127.0.0.1:0", "http:///nohost", "https://h:x/"],
)  # fmt: skip
def test_a_peer_url_the_client_cannot_use_is_refused_without_showing_its_host_part(peer: str) -> None:
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    got = CliRunner().invoke(app, ["dashboard", "--peer", peer, "--port", "1"])
    scheme = peer.split("://", 1)[0]
    assert got.exit_code == 2
    assert got.output.strip() == (
        f"error: --peer {scheme}://… is not a valid http(s) URL: give http://HOST:PORT (a port from 1 to 65535), "
        "and a token after '#'"
    )


# ---- round 12, F5/F7: a plug-in cannot switch its deadline off; an MCP argument that is not UTF-8 is named ----------
def test_a_plugin_declaring_itself_bounded_keeps_its_deadline() -> None:
    from rollbench.core.registry import make_policy

    assert not make_policy("misbehaving_policies:claims_bounded", {}).info.bounded
    assert make_policy("scripted-expert", {}).info.bounded  # rollbench's own still may


def test_an_mcp_argument_holding_a_lone_surrogate_is_a_tool_error_naming_it() -> None:
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import BaseModel

    from rollbench.mcp.strict import check_arguments

    class Args(BaseModel):
        instruction: str

    with pytest.raises(ToolError) as caught:
        check_arguments("run_policy_rollout", Args, set(), {"instruction": "reach \ud800"})
    assert str(caught.value) == "run_policy_rollout: argument instruction is not UTF-8 text (it holds a lone surrogate)"


@pytest.mark.parametrize("raw", ["٣", "３", "3_0", " 3", "3 "])
def test_an_env_deadline_in_other_digits_or_with_separators_is_refused(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.core.env_timeout import env_timeout_s

    monkeypatch.setenv("ROLLBENCH_ENV_TIMEOUT_S", raw)
    with pytest.raises(ConfigError) as caught:
        env_timeout_s()
    assert str(caught.value) == f"ROLLBENCH_ENV_TIMEOUT_S={raw!r} is not a number of seconds"


@pytest.mark.parametrize("value", ["３２x３２", "٣٢", "3_2", " 32", "32x 32"])
def test_an_image_size_in_other_digits_or_with_separators_is_refused(value: str) -> None:
    import typer

    from rollbench.cli.spec_flags import image_size

    with pytest.raises(typer.BadParameter, match="is not HEIGHTxWIDTH or a single size"):
        image_size(value)
    assert image_size("240x320") == (240, 320) and image_size("32") == (32, 32)
