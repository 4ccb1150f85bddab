"""``rollbench release`` redacts every ``Authorization`` scheme and ``password=`` / ``token:``-style pairs in free
text (and then releases the run: hostile round 4, N2 and N3), and never rewrites a run's structure silently: a run
directory named by a commit sha keeps its name, an environment secret whose value is a task name or an ordinary
word is not used, and each such case is said in a warning line (N8).

Oracle: the planted strings themselves, searched for in every released file's bytes and name; the grade of the
source run with each planted string swapped for a placeholder; hand-written expected names and warning lines.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import rollbench
from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.release.rules import Scanner

DATE = "2026-01-01"
COMMIT = "80d58e93b4fd201f0bb57ec9986eec2694306e9d"  # a run directory named by a commit sha
# planted credential -> the text it stands in (each after a rule the docs name)
PLANTED = {
    "dXNlcjpodW50ZXIyYWJj": "Authorization: Basic dXNlcjpodW50ZXIyYWJj",
    "hunter2abc": "login failed: password=hunter2abc",
    "hunter3xyz": "password: hunter3xyz",
    "t0kenValue77": "token=t0kenValue77",
    "s3cretValue88": "secret=s3cretValue88",
    "k3yValue99": "api_key=k3yValue99",
}


class LeakyPolicy:
    """A policy whose error message quotes the request's credentials (as a careless client does)."""

    def __init__(self) -> None:
        self.info = rollbench.PolicyInfo(name="leaky", chunk_size=1, tasks=("scripted/*",))

    def reset(self, task: rollbench.TaskInfo, seed: int) -> None:
        pass

    def act(self, observation: rollbench.Observation, instruction: str) -> np.ndarray:
        raise RuntimeError("request refused; " + "; ".join(PLANTED.values()))

    def close(self) -> None:
        pass


def _everything(out: Path) -> list[tuple[str, bytes]]:
    return [(p.relative_to(out).as_posix(), p.read_bytes()) for p in sorted(out.rglob("*")) if p.is_file()]


@pytest.mark.parametrize(
    ("text", "planted"),
    [
        ("Authorization: Basic dXNlcjpodW50ZXIyYWJj", "dXNlcjpodW50ZXIyYWJj"),
        ('authorization: Digest username="carol", response="6629fae49393a05397450978507c4ef1"', "carol"),
        ("Proxy-Authorization: Token abc123", "abc123"),
        ("{'Authorization': 'ApiKey zz9'}", "zz9"),
        ("Authorization: Weird7Scheme q1w2e3", "q1w2e3"),
        ("Authorization=bareValue42", "bareValue42"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9", "eyJhbGciOiJIUzI1NiJ9"),
    ],
)
def test_an_authorization_value_of_any_scheme_is_redacted_and_nothing_is_found_again(text: str, planted: str) -> None:
    scanner = Scanner(set(), set(), environ={})
    new, pairs = scanner.redact(text)
    assert planted not in new and pairs
    assert scanner.find(new) == []  # the post-redaction check passes


@pytest.fixture(scope="module")
def leaky_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("leaky") / "leaky"
    evaluate(env="scripted/reach", policy=LeakyPolicy(), episodes=2, max_steps=3, out=out)
    return out


def test_credentials_in_free_text_are_redacted_and_the_run_is_released_grading_the_same(
    leaky_run: Path, tmp_path: Path
) -> None:
    assert "password=hunter2abc" in (leaky_run / "run.json").read_text()  # planted where the oracle says
    out = tmp_path / "rel"
    proc = invoke("release", leaky_run, "--out", out, "--date", DATE)
    assert proc.returncode == 0, proc.stderr
    for rel, data in _everything(out):
        for secret in PLANTED:
            assert secret.encode() not in data and secret not in rel, f"{secret} left in {rel}"
    assert not any(s in proc.stdout + proc.stderr for s in PLANTED)
    before, after = grade(leaky_run), grade(out / "leaky")
    assert after.violations == []
    expected = json.dumps(before.to_json())
    for secret in ("Basic dXNlcjpodW50ZXIyYWJj", *PLANTED):  # the value (with its scheme) becomes a placeholder
        expected = expected.replace(secret, "X")
    got = re.sub(r"<REDACTED:credential:\d+>", "X", json.dumps(after.to_json()))
    assert got == expected


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "plain"
    evaluate(env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1, out=out)
    return out


def test_a_run_directory_named_by_a_commit_sha_keeps_its_name_and_grades_the_same(
    plain_run: Path, tmp_path: Path
) -> None:
    src = tmp_path / "src" / COMMIT
    shutil.copytree(plain_run, src)
    out = tmp_path / "rel"
    proc = invoke("release", src, "--out", out, "--date", DATE)
    assert proc.returncode == 0, proc.stderr
    assert (out / COMMIT / "run.json").is_file() and "REDACTED" not in proc.stderr
    log, released = (json.loads((d / "run.json").read_text()) for d in (src, out / COMMIT))
    assert released["run_id"] == log["run_id"]
    assert released["identity"]["name"] == log["identity"]["name"]
    assert grade(out / COMMIT).to_json() == grade(src).to_json()


def test_an_environment_secret_holding_a_task_name_or_a_word_is_not_used_and_a_warning_names_it(
    plain_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rel"
    env = {"MY_SECRET": "scripted/reach", "MY_TOKEN": "lanternfish", "REAL_TOKEN": "Zebra-Quartz-77-lantern"}
    proc = invoke("release", plain_run, "--out", out, "--date", DATE, env=env)
    assert proc.returncode == 0, proc.stderr
    src_text, rel_text = (plain_run / "run.json").read_text(), (out / "plain/run.json").read_text()
    assert rel_text.count("scripted/reach") == src_text.count("scripted/reach") > 0
    lines = [ln for ln in proc.stderr.splitlines() if "is not used for redaction" in ln]
    assert len(lines) == 2 and "MY_SECRET" in lines[0] and "MY_TOKEN" in lines[1]
    assert "lanternfish" not in proc.stderr and "REAL_TOKEN" not in proc.stderr
    doc = json.loads((out / "MANIFEST.json").read_text())
    assert doc["filters"]["environment"]["variables"] == ["REAL_TOKEN"]
    assert doc["filters"]["environment"]["not_used"] == ["MY_SECRET", "MY_TOKEN"]
    assert grade(out / "plain").to_json() == grade(plain_run).to_json()
