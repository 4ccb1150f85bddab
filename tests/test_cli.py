"""The `rollbench` command line as a user runs it: a subprocess, exit codes, messages, files written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import invoke

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
        "COLUMNS": "200",
    }
    return subprocess.run([ROLLBENCH, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_eval_prints_the_table_and_grade_json_reproduces_run_json(tmp_path: Path) -> None:
    r = cli(
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "scripted-expert",
        "--episodes",
        "5",
        "--out",
        "run",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "scripted/reach" in r.stdout and "100.0%" in r.stdout
    assert "status: OK — 5 of 5 requested episodes recorded" in r.stdout
    g = cli("grade", "run", "--json", cwd=tmp_path)
    assert g.returncode == 0
    assert json.loads(g.stdout) == json.loads((tmp_path / "run/run.json").read_text())["results"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing written outside --out


def test_default_run_directory_is_under_runs(tmp_path: Path) -> None:
    r = cli("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--max-steps", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("scripted-reach-zero-") and (run / "meta/info.json").exists()


def test_unknown_env_lists_valid_tasks_and_writes_nothing(tmp_path: Path) -> None:
    r = cli("eval", "--env", "scripted/rech", "--policy", "zero", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown task or suite 'scripted/rech'. Did you mean scripted/reach" in r.stderr
    assert "Valid tasks and suites: scripted/all, scripted/reach, scripted/reach-final, scripted/reach-init" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_policy_lists_valid_policies(tmp_path: Path) -> None:
    r = cli("eval", "--env", "scripted/reach", "--policy", "expert", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown policy 'expert'" in r.stderr and "scripted-expert" in r.stderr and "random" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_invalid_flag_values_exit_2_with_one_line(tmp_path: Path) -> None:
    for args in (
        ["--episodes", "0"],
        ["--image-size", "abc"],
        ["--success-rule", "sometimes"],
        ["--image-size", "15"],
        ["--executor", "slurm"],
    ):
        r = cli("eval", "--env", "scripted/reach", "--policy", "zero", "--out", "run", *args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
    assert list(tmp_path.iterdir()) == []


def record_small_run(cwd: Path) -> None:
    """`rollbench eval` of 2 zero-policy episodes of 3 steps into ``cwd/run``."""
    r = cli(
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "zero",
        "--episodes",
        "2",
        "--max-steps",
        "3",
        "--out",
        "run",
        cwd=cwd,
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_existing_out_from_a_different_spec_is_refused_and_left_untouched(tmp_path: Path) -> None:
    record_small_run(tmp_path)
    before = (tmp_path / "run/run.json").read_text()
    r = cli(
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "zero",
        "--episodes",
        "3",
        "--max-steps",
        "3",
        "--out",
        "run",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "already holds a run of a different spec" in r.stderr
    assert (tmp_path / "run/run.json").read_text() == before


def test_partial_run_exits_1_and_prints_the_reason(tmp_path: Path) -> None:
    r = cli(
        "eval",
        "--env",
        "scripted/faulty",
        "--policy",
        "scripted-expert",
        "--episodes",
        "3",
        "--out",
        "run",
        cwd=tmp_path,
    )
    assert r.returncode == 1
    assert "status: PARTIAL" in r.stdout
    assert "episode 2 (scripted/faulty, seed 2) ended in error" in r.stdout


@pytest.mark.slow
def test_envs_and_policies_list_what_exists(tmp_path: Path) -> None:
    envs = json.loads(cli("envs", "--json", cwd=tmp_path).stdout)
    scripted = next(f for f in envs if f["family"] == "scripted")
    assert scripted["installed"] and {t["name"] for t in scripted["tasks"]} >= {"scripted/reach"}
    pols = cli("policies", cwd=tmp_path).stdout
    for name in ("random", "zero", "scripted-expert", "metaworld-expert"):
        assert name in pols


def test_envs_alone_lists_families_and_a_family_named_lists_its_tasks(tmp_path: Path) -> None:
    """All families' tasks printed ~1,400 lines by default (a new user's hour): now the families, and how to see more."""
    alone = invoke("envs", env={"COLUMNS": "200"})
    assert "scripted/reach" not in alone.stdout and "metaworld/reach-v3" not in alone.stdout
    assert "scripted — " in alone.stdout and "metaworld — " in alone.stdout
    assert alone.stdout.rstrip().endswith("rollbench envs FAMILY lists a family's tasks; --tasks lists every family's.")
    named = invoke("envs", "scripted", env={"COLUMNS": "200"})
    assert "scripted/reach" in named.stdout and "metaworld" not in named.stdout
    everything = invoke("envs", "--tasks", env={"COLUMNS": "200"})
    assert "scripted/reach" in everything.stdout and "metaworld/reach-v3" in everything.stdout


@pytest.mark.slow
def test_spec_file_with_flag_overrides_and_run_json_as_spec(tmp_path: Path) -> None:
    spec = {"env": "scripted/reach", "policy": "random", "episodes": 3, "max_steps": 5, "seed": 7}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    r = cli("eval", "--spec", "spec.json", "--episodes", "4", "--out", "a", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [e["seed"] for e in json.loads(r.stdout)["episodes"]] == [7, 8, 9, 10]  # spec file + --episodes 4
    again = cli("eval", "--spec", "a/run.json", "--out", "b", "--json", cwd=tmp_path)  # a run.json reproduces
    assert json.loads(again.stdout)["episodes"] == json.loads(r.stdout)["episodes"]


@pytest.mark.slow
def test_a_spec_file_without_episodes_runs_the_flags_default_of_ten(tmp_path: Path) -> None:
    """Issue 30 (h-cli 4): `--episodes` has a default (10), so a spec file that names none runs 10, as the same
    command line without `--episodes` does; both record the same spec (same seeds 0..9)."""
    (tmp_path / "spec.json").write_text(json.dumps({"env": "scripted/reach", "policy": "zero", "max_steps": 2}))
    r = cli("eval", "--spec", "spec.json", "--out", "a", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    flags = cli("eval", "--env", "scripted/reach", "--policy", "zero", "--max-steps", "2", "--out", "b", "--json",
                cwd=tmp_path)  # fmt: skip
    assert [e["seed"] for e in json.loads(r.stdout)["episodes"]] == list(range(10))
    specs = [json.loads((tmp_path / d / "run.json").read_text())["spec"] for d in ("a", "b")]
    assert specs[0] == specs[1] and specs[0]["episodes"] == 10
    assert json.loads(flags.stdout)["episodes"] == json.loads(r.stdout)["episodes"]


@pytest.mark.slow
def test_resume_refuses_spec_flags_instead_of_ignoring_them(tmp_path: Path) -> None:
    record_small_run(tmp_path)
    r = cli("eval", "--resume", "run", "--episodes", "9", cwd=tmp_path)
    assert r.returncode == 2 and "--resume takes the spec from run/run.json; drop --episodes" in r.stderr


def test_version_prints_the_installed_distribution_version(tmp_path: Path) -> None:
    import importlib.metadata

    r = cli("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == f"rollbench {importlib.metadata.version('rollbench')}\n"


def test_policies_prints_each_description_whole_on_one_line(tmp_path: Path) -> None:
    lines = cli("policies", cwd=tmp_path).stdout.splitlines()
    (http,) = [ln for ln in lines if ln.startswith("http://HOST:PORT ")]
    assert http == (
        "http://HOST:PORT       A policy served over the JSON /act protocol at http(s)://HOST:PORT[/PATH] "
        "(path default /act; see rollbench serve-policy --protocol http)."
    )
    assert "``" not in "\n".join(lines)  # reStructuredText literals are shown as `x`
    assert lines[-1] == (
        "module:factory         Your own policy: factory(name, options) in an importable module (docs/plugins.md)."
    )
    assert len(lines) - 1 == len(json.loads(cli("policies", "--json", cwd=tmp_path).stdout))


@pytest.mark.slow
def test_a_task_typed_without_its_family_suggests_the_full_name_and_writes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    r = cli("eval", "--env", "pick-place-v3", "--policy", "zero", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "error: unknown env family 'pick-place-v3'. Did you mean metaworld/pick-place-v3? (tasks are named "
        "FAMILY/TASK) Valid env families: aloha, fetch, gym, hostedgym, libero, libero_ref, liberoplus, metaworld, pusht, "
        "robosuite, "
        "scripted"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_typo_in_a_long_task_list_shows_the_closest_and_how_to_list_all(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    r = cli("eval", "--env", "metaworld/pick-plce-v3", "--policy", "zero", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "error: unknown task or suite 'metaworld/pick-plce-v3'. Did you mean metaworld/pick-place-v3, "
        "metaworld/pick-place-wall-v3, metaworld/stick-pull-v3? 57 valid tasks and suites: list them with "
        "`rollbench envs metaworld`"
    )
    assert list(tmp_path.iterdir()) == []


def test_serve_policy_on_a_busy_port_exits_2_naming_the_address(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = cli("serve-policy", "--policy", "zero", "--port", str(port), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: [Errno 98] cannot listen on 127.0.0.1:{port}: Address already in use"


def test_gpu_standin_with_an_unknown_inner_policy_exits_2_naming_the_option(tmp_path: Path) -> None:
    r = cli("serve-policy", "--policy", "gpu-standin", "--policy-options", '{"inner": "nonexistent"}', cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("error: gpu-standin: option inner: unknown policy 'nonexistent'. Valid policies: ")


def test_every_evalspec_field_is_an_eval_option_named_once(tmp_path: Path) -> None:
    from rollbench.cli.spec_flags import SPEC_FLAGS
    from rollbench.core.spec import EvalSpec

    assert sorted(f.field for f in SPEC_FLAGS) == sorted(EvalSpec.model_fields)
    lines = cli("eval", "--help", cwd=tmp_path).stdout.splitlines()
    options = [ln.split()[0] for ln in lines if ln.startswith("  --")]
    for option in ("--env", "--max-steps", "--policy-timeout", "--instruction-perturb", "--fast-render"):
        assert options.count(option) == 1, option


def test_robustness_and_sequential_take_evals_options_with_evals_help_and_defaults() -> None:
    """Every option robustness or sequential shares with eval is eval's (same help text, default, bounds), and
    robustness takes every option of eval's that is not eval's own (--spec, --resume, --trust-run)."""
    import typer.main

    from rollbench.cli.main import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]

    def options(name: str) -> dict[str, tuple[object, ...]]:
        return {
            p.opts[0]: (p.help, p.default, getattr(p, "min", None), getattr(p, "max", None))
            for p in commands[name].params
            if p.opts[0].startswith("--")
        }

    evals = options("eval")
    own = {"--out", "--json"}  # each command's own text (what it writes, what it prints)
    both_arms = {"--env", "--seed", "--max-steps", "--video"}  # sequential's: the settings both arms share
    for name, its_own in (("robustness", own), ("sequential", own | both_arms)):
        shared = {k: v for k, v in options(name).items() if k in evals and k not in its_own}
        assert shared == {k: evals[k] for k in shared}, name
    assert set(evals) - set(options("robustness")) == {"--spec", "--resume", "--trust-run"}
    assert {"--workers", "--batch-size", "--ray-cpus", "--retry-errors", "--robot"} <= set(options("sequential"))


def test_policies_lists_the_test_fixtures_after_the_real_policies_and_marks_them(tmp_path: Path) -> None:
    rows = json.loads(cli("policies", "--json", cwd=tmp_path).stdout)
    fixtures = [r["name"] for r in rows if r["kind"] == "fixture"]
    assert fixtures == ["gpu-standin", "metaworld-lang-expert"]  # the factories in rollbench.testing (pyproject)
    assert [r["kind"] for r in rows] == ["policy"] * (len(rows) - 2) + ["fixture"] * 2
    lines = cli("policies", cwd=tmp_path).stdout.splitlines()
    assert lines[-3].startswith("gpu-standin            test fixture: A fixed-latency model")
    assert lines[-2].startswith("metaworld-lang-expert  test fixture: MetaWorld's expert")
