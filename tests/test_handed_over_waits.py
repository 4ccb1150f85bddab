"""A handed-over run directory cannot hold the user to its own deadlines or waits (hostile round 13, F10).

``eval --resume RUN`` and ``eval --spec RUN/run.json`` honour a recorded ``policy_timeout_s`` over the 300 s
default, or any recorded policy option that sets a deadline, a sleep or retries (``timeout_s``, ``latency_ms``,
``retries``...), only when the user types it again or adds ``--trust-run``; and every such option has a stated
maximum where it is parsed, typed or recorded alike. ``rollbench`` commands, run in the test process
(``tests/cli_in_process.py``: the claims are about what a command refuses or resumes, not about the process boundary),
on copies of one recorded ``scripted/reach`` run whose run.json is edited with its identity recomputed (a consistent
hand-over).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from rollbench.core.contracts import ConfigError
from rollbench.core.registry import make_policy
from rollbench.core.spec import build_spec


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("recorded") / "run"
    r = invoke("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "2", "--max-steps", "3",
                "--out", run)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return run


def handed_over(recorded: Path, tmp_path: Path, **spec: Any) -> Path:
    run = Path(shutil.copytree(recorded, tmp_path / "run", symlinks=True))
    log = json.loads((run / "run.json").read_text())
    log["spec"].update(spec)
    log["spec_identity"] = build_spec(**log["spec"]).identity()
    (run / "run.json").write_text(json.dumps(log))
    return run


def one_line_refusal(r: Any) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (r.returncode, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    return lines[0]


STANDIN = {"policy": "gpu-standin", "policy_options": {"inner": "zero", "latency_ms": 1e12}}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"policy_timeout_s": 86400.0}, "policy_timeout_s=86400"),
        ({"policy_timeout_s": 300.5}, "policy_timeout_s=300.5"),
        (STANDIN, "latency_ms=1000000000000.0"),
        ({**STANDIN, "policy_timeout_s": 86400.0}, "policy_timeout_s=86400, latency_ms=1000000000000.0"),
        ({"policy": "gpu-standin", "policy_options": {"inner": "zero", "x": {"retries": 7}}}, "x.retries=7"),
        ({"policy": "gpu-standin", "policy_options": {"inner": "zero", "x": [{"sleep_s": 9}]}}, "x[0].sleep_s=9"),
    ],
)
def test_a_handed_over_deadline_or_wait_is_refused_naming_it_before_anything_runs(
    recorded: Path, tmp_path: Path, spec: dict[str, Any], named: str
) -> None:
    run = handed_over(recorded, tmp_path, **spec)
    before = (run / "run.json").read_bytes()
    for args in (["--resume", run], ["--spec", run / "run.json", "--out", tmp_path / "other"]):
        line = one_line_refusal(invoke("eval", *args))
        assert f"run.json sets {named}: a deadline or wait rollbench would hold you to" in line
        assert line.endswith("type it again (--policy-timeout, --policy-options as recorded) or add --trust-run")
    assert (run / "run.json").read_bytes() == before and not (tmp_path / "other").exists()


@pytest.mark.slow
def test_typing_the_recorded_deadline_or_trusting_the_run_resumes_it(recorded: Path, tmp_path: Path) -> None:
    run = handed_over(recorded, tmp_path, policy_timeout_s=900.0)
    for extra in (["--policy-timeout", "900"], ["--trust-run"]):
        r = invoke("eval", "--resume", run, *extra)
        assert r.returncode == 0, r.stderr
    line = one_line_refusal(invoke("eval", "--resume", run, "--policy-timeout", "5"))
    assert "its run.json records policy_timeout_s 900.0, not 5.0" in line


@pytest.mark.slow
def test_a_recorded_deadline_within_the_default_resumes_with_nothing_typed(recorded: Path, tmp_path: Path) -> None:
    run = handed_over(recorded, tmp_path, policy_timeout_s=30.0)
    r = invoke("eval", "--resume", run)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_a_trusted_latency_past_its_maximum_is_still_refused_by_the_stand_in(recorded: Path, tmp_path: Path) -> None:
    run = handed_over(recorded, tmp_path, **STANDIN)
    line = one_line_refusal(invoke("eval", "--resume", run, "--trust-run"))
    assert line.endswith("gpu-standin: latency_ms must be from 0 to 60000, got 1000000000000.0")


@pytest.mark.parametrize(
    ("policy", "options", "says"),
    [
        ("gpu-standin", {"latency_ms": 60000.5}, "gpu-standin: latency_ms must be from 0 to 60000, got 60000.5"),
        ("http://127.0.0.1:9/act", {"timeout_s": 86400.5}, "timeout_s must be a positive number at most 86400"),
        ("ws://127.0.0.1:9", {"connect_timeout_s": 1e300}, "connect_timeout_s must be a positive number at most"),
        ("http://127.0.0.1:9/act", {"retries": 101}, "retries must be an integer from 0 to 100, got 101"),
        ("agent:local/m", {"base_url": "http://127.0.0.1:9/v1", "retries": 10**6}, "from 0 to 100, got 1000000"),
        ("agent:local/m", {"base_url": "http://127.0.0.1:9/v1", "backoff_s": 1e9}, "backoff_s must be a positive"),
    ],
)
def test_every_wait_option_has_a_stated_maximum_where_it_is_parsed(
    policy: str, options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as err:  # before any connection: port 9 is never reached
        make_policy(policy, options)
    assert says in str(err.value)


def test_a_gpu_standin_at_its_maximum_latency_is_accepted() -> None:
    policy = make_policy("gpu-standin", {"latency_ms": 60000})
    assert policy.info.provenance["latency_ms"] == 60000.0


def test_option_names_that_set_a_wait_are_flagged_and_others_are_not() -> None:
    from rollbench.core.spec import what_it_waits

    options = {"inner": "zero", "hang_s": 1, "RetryCount": 2, "poll_delay": 3, "latency_ms": 4, "chunk_size": 5,
               "max_steps": 6, "gain": 7, "obs_map": {"state": "x"}}  # fmt: skip
    spec = build_spec(env="scripted/reach", policy="gpu-standin", episodes=1, policy_options=options)
    assert what_it_waits(spec) == [
        ("policy_options", t) for t in ("hang_s=1", "RetryCount=2", "poll_delay=3", "latency_ms=4")
    ]


def test_the_printed_resume_command_types_the_recorded_waits_again(tmp_path: Path) -> None:
    from rollbench.cli.resume import resume_command

    spec = build_spec(env="scripted/reach", policy="gpu-standin", episodes=2, policy_timeout_s=900,
                      policy_options={"latency_ms": 300})  # fmt: skip
    assert resume_command(spec, tmp_path / "r").split(" ", 1)[1] == (
        f"eval --resume {tmp_path / 'r'} --policy-options '{{\"latency_ms\":300}}' --policy-timeout 900"
    )


def test_the_printed_resume_command_runs_the_resume_as_the_interrupted_invocation_ran(tmp_path: Path) -> None:
    from rollbench.cli.resume import resume_command
    from rollbench.run.execution import Execution
    from rollbench.run.ray_options import RayOptions

    spec = build_spec(env="scripted/reach", policy="zero", episodes=2)
    ray = RayOptions(gpus=0.25, resources={"libero": 1.0}, placement="pack", policy="node", shared_fs=True)
    execution = Execution(workers=16, executor="ray", ray_address="HEAD:6379", batch_size=4, ray=ray)
    assert resume_command(spec, tmp_path / "r", execution).split(" ", 1)[1] == (
        f"eval --resume {tmp_path / 'r'} --workers 16 --executor ray --ray-address HEAD:6379 --batch-size 4 "
        "--ray-gpus 0.25 --ray-resources '{\"libero\":1.0}' --ray-placement pack --ray-policy-per-node --ray-shared-fs"
    )
    assert resume_command(spec, tmp_path / "r", Execution()).split(" ", 1)[1] == f"eval --resume {tmp_path / 'r'}"
