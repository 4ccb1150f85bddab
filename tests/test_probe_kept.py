"""A run builds its policy once when it runs in this process: the policy ``prepare_run`` builds to probe the run
(its info, the tasks it drives, ``check_tasks``) is the one its in-process worker runs (``rollbench.run.probed``),
so a LeRobot host or a served policy's connection starts once per run, not twice. Worker processes build their own;
a probed policy the run never takes (nothing left to run, a run refused after the probe) is closed.

Oracle: ``fault_policies:counted`` leaves a file per instance built and per instance closed; the recorded episodes
are compared with a run whose workers all build their own (2 worker processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rollbench
from rollbench.api import Execution, evaluate
from rollbench.core.spec import build_spec
from rollbench.run import probed
from run_tables import same_run

pytestmark = pytest.mark.slow


def _spec(tmp: Path) -> dict[str, object]:
    return {
        "env": "scripted/reach",
        "policy": "fault_policies:counted",
        "policy_options": {"dir": str(tmp / "instances")},
        "episodes": 4,
        "max_steps": 12,
    }


def _files(tmp: Path, kind: str) -> int:
    return len(list((tmp / "instances").glob(f"{kind}-*")))


def test_an_in_process_run_builds_its_policy_once_and_closes_it(tmp_path: Path) -> None:
    result = evaluate(out=tmp_path / "run", **_spec(tmp_path))
    assert result.status == "OK"
    assert _files(tmp_path, "built") == 1 and _files(tmp_path, "closed") == 1


def test_worker_processes_build_their_own_and_record_the_same_episodes(tmp_path: Path) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    one.mkdir()
    two.mkdir()
    evaluate(out=one / "run", **_spec(one))
    evaluate(out=two / "run", execution=Execution(workers=2), **_spec(two))
    assert _files(two, "built") == 3 and _files(two, "closed") == 3  # the probe, then one per worker process
    same_run(one / "run", two / "run")


def test_a_probed_policy_the_run_never_takes_is_closed(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    evaluate(out=tmp_path / "run", **spec)
    again = evaluate(out=tmp_path / "run", **spec)  # resumed with nothing left to run: no worker builds
    assert again.status == "OK"
    assert _files(tmp_path, "built") == 2 and _files(tmp_path, "closed") == 2
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run.json").write_text(json.dumps({"not": "a run"}))
    with pytest.raises(rollbench.ConfigError):
        evaluate(out=tmp_path / "other", **spec)  # refused before the probe: nothing built
    assert _files(tmp_path, "built") == _files(tmp_path, "closed")
    with pytest.raises(rollbench.ConfigError, match="cannot drive"):  # refused after the probe
        evaluate(out=tmp_path / "fetch", **{**spec, "env": "fetch/Reach"})
    assert _files(tmp_path, "built") == _files(tmp_path, "closed")
    assert probed.take(build_spec(**spec)) is None  # nothing left kept in this thread


@pytest.mark.parametrize("workers", [1, 2])
def test_a_policy_whose_close_raises_is_a_warning_never_a_refusal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], workers: int
) -> None:
    """A close() that raises (after the probe, or after the episodes) is named on stderr; the run is recorded OK."""
    spec = {**_spec(tmp_path), "policy_options": {"dir": str(tmp_path / "instances"), "close_raises": True}}
    result = evaluate(out=tmp_path / "run", execution=Execution(workers=workers), **spec)
    assert result.status == "OK" and result.episodes_recorded == 4
    said = capfd.readouterr().err
    assert "warning: policy fault_policies:counted: close() raised RuntimeError: close failed" in said, said
    assert _files(tmp_path, "built") == _files(tmp_path, "closed") == (1 if workers == 1 else 3)


def test_prepare_run_called_alone_closes_its_probe(tmp_path: Path) -> None:
    """Only ``evaluate`` (which runs the episodes next and releases what it did not take) keeps the probe: a caller
    of the public ``prepare_run`` leaves no policy open behind it."""
    from rollbench.api import prepare_run

    spec = build_spec(**_spec(tmp_path))
    prepare_run(spec, tmp_path / "run", execution=Execution())
    assert _files(tmp_path, "built") == _files(tmp_path, "closed") == 1
    assert probed.take(spec) is None
