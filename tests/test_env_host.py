"""The env host (docs/env-host.md) with a third-party adapter loaded by file path (tests/envhost/toy_adapter.py),
run by this interpreter: rollbench's real host script, pipes and near side. A far-side exception, crash or hang is
that call's EpisodeError with fault ``environment`` and its reason; the host is gone afterwards."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rollbench.core.contracts import ConfigError, EpisodeError
from rollbench.envs.hosted.remote import POOL, EnvHost, open_host, release_host

ADAPTER = str(Path(__file__).with_name("envhost") / "toy_adapter.py")


@pytest.fixture
def host() -> EnvHost:
    h = EnvHost("toy env host", sys.executable, ADAPTER, ["--flag", "x"], {})
    h.timeout_s = 3.0
    yield h
    h.close()


def test_host_answers_with_raw_arrays_of_their_dtype_and_shape(host: EnvHost) -> None:
    assert host.info == {"toy": True, "argv": ["--flag", "x"]}
    host.call("make")
    _, out = host.call("step", {"action": np.array([1.5, -0.25])})
    _, out = host.call("step", {"action": np.array([1.0, 0.0])})
    assert out["state"].dtype == np.float64 and out["state"].tolist() == [2.5, -0.25]
    assert out["image"].dtype == np.uint8 and out["image"].shape == (4, 4, 3) and int(out["image"][0, 0, 0]) == 2


def test_a_far_side_exception_is_an_environment_fault_with_its_message(host: EnvHost) -> None:
    with pytest.raises(EpisodeError, match="boom raised ValueError: the toy benchmark raised") as info:
        host.call("boom")
    assert info.value.fault == "environment"
    host.call("make")  # the host survives its benchmark's exception


def test_an_unknown_op_is_refused_by_the_host(host: EnvHost) -> None:
    with pytest.raises(EpisodeError, match="unknown op 'nope'"):
        host.call("nope")


def test_a_far_side_crash_is_an_environment_fault_naming_the_exit_code(host: EnvHost) -> None:
    with pytest.raises(EpisodeError, match="exit code 7") as info:
        host.call("die")
    assert info.value.fault == "environment"
    assert not host.child.alive()


@pytest.mark.slow
def test_a_far_side_hang_is_an_environment_fault_after_the_deadline_and_the_host_is_killed(host: EnvHost) -> None:
    t0 = time.monotonic()
    with pytest.raises(EpisodeError, match="did not answer hang within 3 s") as info:
        host.call("hang")
    assert info.value.fault == "environment"
    assert time.monotonic() - t0 < 10
    assert not host.child.alive()


def test_an_adapter_that_is_not_in_the_host_folder_or_a_file_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match="refused to start: ImportError: no adapter 'os'"):
        EnvHost("toy env host", sys.executable, "os", [], {})


def test_a_released_host_is_handed_to_the_next_env_of_its_command_only_and_stopped_by_close_all() -> None:
    POOL.close_all()
    first = open_host("toy env host", sys.executable, ADAPTER, ["--flag", "x"], {}, reuse=True)
    first.call("make")
    first.call("step", {"action": np.array([2.0, 3.0])})
    release_host(first, reuse=True)  # drop: the far side forgets the env; the process waits in the pool
    other = open_host("toy env host", sys.executable, ADAPTER, ["--flag", "y"], {}, reuse=True)
    assert other.pid != first.pid  # another command line: never the same host
    again = open_host("toy env host", sys.executable, ADAPTER, ["--flag", "x"], {}, reuse=True)
    assert again is first and len(POOL) == 0
    _, out = again.call("step", {"action": np.array([1.0, 1.0])})
    assert out["state"].tolist() == [1.0, 1.0]  # nothing of the earlier env carried over
    release_host(again, reuse=True)
    release_host(other, reuse=False)  # a family that does not allow reuse: stopped
    assert not other.child.alive() and len(POOL) == 1
    POOL.close_all()
    assert not first.child.alive() and len(POOL) == 0


@pytest.mark.slow
def test_a_host_whose_call_failed_is_stopped_instead_of_pooled_and_the_pool_keeps_at_most_four() -> None:
    POOL.close_all()
    bad = open_host("toy env host", sys.executable, ADAPTER, [], {}, reuse=True)
    with pytest.raises(EpisodeError):
        bad.call("boom")
    release_host(bad, reuse=True)
    assert not bad.child.alive() and len(POOL) == 0
    hosts = [open_host("toy env host", sys.executable, ADAPTER, [str(i)], {}, reuse=True) for i in range(5)]
    for h in hosts:
        release_host(h, reuse=True)
    assert len(POOL) == POOL.max_idle == 4
    assert not hosts[0].child.alive() and all(h.child.alive() for h in hosts[1:])  # the oldest went first
    POOL.close_all()
