"""Remote policies end to end: real ``rollbench serve-policy`` processes on loopback, both protocols.

Every server here is a real subprocess on a free loopback port; faults (wrong shapes, malformed replies, errors,
slowness, a crash) come from serve-policy's documented ``--inject`` failure injection, not from mocks. What the server
received is read from its own ``--log-requests`` file.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError
from rollbench.core.registry import served_layout
from rollbench.wire.decode import decode_array, encode_array
from rollbench.wire.obs_map import ObsMap, default_obs_map, load_policy_options, resolve_obs_map
from served_policy import (
    MW_INSTRUCTION,
    MW_TASK,
    PROTOCOLS,
    REACH,
    ROLLBENCH,
    actions,
    free_port,
    requests,
    rows,
    served,
    url_of,
)

# two episodes: the second starts after a reset on the same server connection (each step's image is a MetaWorld
# render in software GL, most of this file's cost)
EPISODES = 2


@pytest.fixture(scope="module")
def in_process_pick_place(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], np.ndarray]:
    pytest.importorskip("metaworld")
    out = tmp_path_factory.mktemp("inproc") / "run"
    result = evaluate(env=MW_TASK, policy="metaworld-expert", episodes=EPISODES, max_steps=60, out=out)
    return result, actions(out)


@pytest.mark.sim
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_served_metaworld_expert_reproduces_the_in_process_expert_exactly(
    protocol: str, tmp_path: Path, in_process_pick_place: tuple[dict[str, Any], np.ndarray]
) -> None:
    expected, expected_actions = in_process_pick_place
    assert expected.status == "OK"
    with served(tmp_path, "metaworld-expert", protocol) as (url, log, _):
        # images are sent although the expert reads none, to check them on the server side
        result = evaluate(
            env=MW_TASK,
            policy=url,
            episodes=EPISODES,
            max_steps=60,
            out=tmp_path / "run",
            policy_options={"needs_images": True},
        )
    assert result.status == "OK", result.reasons
    assert rows(result) == rows(expected)
    np.testing.assert_array_equal(actions(tmp_path / "run"), expected_actions)

    lengths = [e.length for e in result.episodes]
    assert result.latency.policy_calls == sum(lengths)  # replan_every 1: one call per step
    assert len(lengths) == EPISODES and result.latency.calls_per_episode == pytest.approx(sum(lengths) / 2)
    assert result.latency.by_task[MW_TASK].policy_calls == sum(lengths)
    assert 0 < result.latency.p50_s <= result.latency.p95_s <= result.latency.p99_s

    # server side: a reset with the episode's task and seed, then exactly `length` calls with the task's instruction
    got = [(r["kind"], r["seed"]) for r in requests(log)]
    assert got == [kind_seed for seed, n in enumerate(lengths) for kind_seed in [("reset", seed)] + [("act", seed)] * n]
    acts = [r for r in requests(log) if r["kind"] == "act"]
    assert {r["instruction"] for r in acts} == {MW_INSTRUCTION}
    assert {r["task"] for r in acts} == {MW_TASK}
    assert acts[0]["state"] == ["float64", [39]]  # MetaWorld's native observation, full precision
    assert acts[0]["images"] == {"corner": [224, 224, 3]}

    run_log = json.loads((tmp_path / "run" / "run.json").read_text())
    meta = run_log["plan"]["policy"]["provenance"]["server_metadata"]
    assert (meta["policy"], meta["protocol"], meta["reset"]) == ("metaworld-expert", protocol, True)
    assert run_log["plan"]["replan_every"] == 1


# ------------------------------------------------------------------------------------ scripted, fast


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.slow
def test_server_receives_the_instruction_override_and_chunks_are_replanned(protocol: str, tmp_path: Path) -> None:
    """Through the CLI, as a user runs it: --replan-every, --instruction and --policy-options reach the server."""
    with served(tmp_path, "scripted-expert", protocol, "--policy-options", '{"chunk_size": 4}') as (url, log, _):
        cmd = [ROLLBENCH, "eval", "--env", "scripted/reach", "--policy", url, "--episodes", "3", "--replan-every", "2"]
        cmd += ["--instruction", "go to the green dot", "--policy-options", '{"timeout_s": 10}', "--json"]
        proc = subprocess.run([*cmd, "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "OK", result["reasons"]
    lengths = [e["length"] for e in result["episodes"]]
    calls = [-(-n // 2) for n in lengths]  # 2 actions executed per returned chunk of 4
    assert result["latency"]["policy_calls"] == sum(calls)
    assert result["latency"]["calls_per_episode"] == pytest.approx(sum(calls) / 3)
    acts = [r for r in requests(log) if r["kind"] == "act"]
    assert len(acts) == sum(calls)
    assert {r["instruction"] for r in acts} == {"go to the green dot"}
    resets = [r for r in requests(log) if r["kind"] == "reset"]
    assert [(r["task"], r["seed"]) for r in resets] == [("scripted/reach", s) for s in range(3)]
    run_log = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_log["plan"]["policy"]["chunk_size"] == 4  # advertised by the server
    assert run_log["plan"]["replan_every"] == 2
    assert run_log["plan"]["policy"]["provenance"]["timeout_s"] == 10


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.slow
def test_a_server_that_dies_mid_run_errors_the_remaining_episodes(protocol: str, tmp_path: Path) -> None:
    reference = evaluate(env="scripted/reach", policy="scripted-expert", episodes=4, out=tmp_path / "ref")
    first = reference.episodes[0].length
    die_after = first + 1  # answers all of episode 0 and one call of episode 1, then exits without replying
    with served(tmp_path, "scripted-expert", protocol, "--inject", f"die-after:{die_after}") as (url, _, proc):
        t0 = time.monotonic()
        result = evaluate(
            env="scripted/reach", policy=url, episodes=4, out=tmp_path / "run", policy_options={"retries": 2}
        )
        elapsed = time.monotonic() - t0
        assert proc.wait(timeout=5) == 70  # serve.DIE_EXIT_CODE: it really crashed
    assert result.status == "PARTIAL"
    assert rows(result)[0] == rows(reference)[0]
    eps = result.episodes
    assert [e.termination_reason for e in eps] == ["success", "error", "error", "error"]
    assert eps[1].length == 1  # the step answered before the crash is kept
    assert all("lost the connection" in e.error and url in e.error for e in eps[1:])
    assert elapsed < 60  # bounded: 3 episodes x 2 reconnects with backoff, not a hang


INJECTIONS = [
    ("wrong-shape", "returned actions of shape (1, 3); scripted/reach needs (2,) or (N, 2)"),
    ("malformed", "malformed reply from"),
    ("error", "server error from "),  # its status and size only: a server's text is never quoted
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("injection", "reason"), INJECTIONS, ids=[f for f, _ in INJECTIONS])
@pytest.mark.slow
def test_a_bad_reply_ends_each_episode_as_error_with_the_reason(
    protocol: str, injection: str, reason: str, tmp_path: Path
) -> None:
    with served(tmp_path, "scripted-expert", protocol, "--inject", injection) as (url, _, _):
        result = evaluate(env="scripted/reach", policy=url, episodes=2, out=tmp_path / "run")
    assert result.status == "FAILED"
    assert result.episodes_recorded == 2
    for e in result.episodes:
        assert (e.termination_reason, e.length, e.success) == ("error", 0, False)
        assert reason in e.error, e.error


def test_the_deprecated_fault_option_still_injects_with_a_warning_and_the_metadata_names_the_injection(
    tmp_path: Path,
) -> None:
    """``serve-policy --fault`` (--inject's name before issue 29) still works: a warning on stderr, the same
    injection, recorded under the server metadata's ``injection`` (and its deprecated ``fault``) in run.json."""
    with served(tmp_path, "scripted-expert", "http", "--fault", "error") as (url, _, proc):
        result = evaluate(env="scripted/reach", policy=url, episodes=1, out=tmp_path / "run")
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert "warning: --fault is deprecated: use --inject (the same values)" in err
    assert result.episodes[0].error.startswith(f"EpisodeError: server error from {url}: HTTP 500, a reply of ")
    meta = json.loads((tmp_path / "run" / "run.json").read_text())["plan"]["policy"]["provenance"]["server_metadata"]
    assert (meta["injection"], meta["fault"]) == ("error:0", "error:0")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.slow
def test_a_server_slower_than_the_timeout_errors_the_episode_in_bounded_time(protocol: str, tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", protocol, "--inject", "slow:5") as (url, _, _):
        t0 = time.monotonic()
        result = evaluate(
            env="scripted/reach", policy=url, episodes=2, out=tmp_path / "run", policy_options={"timeout_s": 0.5}
        )
        elapsed = time.monotonic() - t0
    assert [e.termination_reason for e in result.episodes] == ["error", "error"]
    assert all("within timeout_s=0.5 s" in e.error for e in result.episodes)
    assert elapsed < 8  # two 0.5 s timeouts; waiting for the replies would take >= 10 s


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unreachable_server_exits_2_within_seconds_and_writes_nothing(protocol: str, tmp_path: Path) -> None:
    url = url_of(protocol, free_port())
    t0 = time.monotonic()
    cmd = [
        ROLLBENCH,
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        url,
        "--episodes",
        "2",
        "--out",
        str(tmp_path / "r"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr
    assert f"cannot reach the policy server {url}" in proc.stderr.replace("\n", "")
    assert not (tmp_path / "r").exists()
    assert elapsed < 15  # interpreter start-up included; the connection attempt itself is refused at once


def test_obs_map_overrides_rename_keys_on_both_sides_and_a_mismatch_is_an_episode_error(tmp_path: Path) -> None:
    renamed = {"images": {"top": "cam/top"}, "state_key": "obs/state", "prompt_key": "task"}
    with served(tmp_path, "scripted-expert", "ws", "--obs-map", json.dumps(renamed)) as (url, log, _):
        ok = evaluate(
            env="scripted/reach",
            policy=url,
            episodes=1,
            out=tmp_path / "ok",
            policy_options={"obs_map": renamed, "needs_images": True},
        )
        bad = evaluate(env="scripted/reach", policy=url, episodes=1, out=tmp_path / "bad")
        plain = evaluate(
            env="scripted/reach", policy=url, episodes=1, out=tmp_path / "plain", policy_options={"obs_map": renamed}
        )
    assert ok.status == "OK"
    assert requests(log)[1]["images"] == {"top": [224, 224, 3]}  # the server mapped cam/top back to its camera
    # the served scripted expert says it reads no images: by default none are rendered or sent
    assert plain.status == "OK" and requests(log)[-1]["images"] == {}
    assert bad.status == "FAILED"
    assert bad.episodes[0].error.startswith(f"EpisodeError: server error from {url}: an error text frame, a reply")
    assert "obs/state" not in bad.episodes[0].error  # the server's words ("the observation has no ...") stay out


def test_the_server_speaks_openpi_to_openpis_own_client(tmp_path: Path) -> None:
    """openpi-client's WebsocketClientPolicy (no reset message) against serve-policy --env: the task's reset is
    implied by --env, metadata arrives on connect, ``actions`` come back."""
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    with served(tmp_path, "scripted-expert", "ws", "--env", "scripted/reach") as (url, log, _):
        client = WebsocketClientPolicy(url)
        try:
            meta = client.get_server_metadata()
            reply = client.infer({"observation/state": np.array([0.1, 0.1, 0.5, 0.1], np.float32), "prompt": REACH})
        finally:
            client._ws.close()
    assert (meta["policy"], meta["env"], meta["reset"]) == ("scripted-expert", "scripted/reach", True)
    np.testing.assert_array_equal(reply["actions"], np.array([[1.0, 0.0]], np.float32))
    assert [(r["kind"], r["task"], r["instruction"]) for r in requests(log)] == [
        ("reset", "scripted/reach", None),
        ("act", "scripted/reach", REACH),
    ]


# ------------------------------------------------------------------------------------ pure parts


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", "int64", "bool"])
def test_json_arrays_round_trip_exactly(dtype: str) -> None:
    arr = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    wire = json.loads(json.dumps(encode_array(arr)))
    back = decode_array(wire)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


def test_json_arrays_accept_lists_and_reject_inconsistent_sizes() -> None:
    np.testing.assert_array_equal(
        decode_array({"dtype": "float32", "shape": [1, 2], "data": "AACAPwAAAEA="}), [[1.0, 2.0]]
    )
    np.testing.assert_array_equal(decode_array({"dtype": "float32", "shape": [2], "data": [[3, 4]]}), [3.0, 4.0])
    with pytest.raises(ValueError, match=r"array data holds 8 bytes but float32 \[3\] needs 12"):
        decode_array({"dtype": "float32", "shape": [3], "data": "AACAPwAAAEA="})
    with pytest.raises(ValueError, match="unsupported dtype 'complex64'"):
        decode_array({"dtype": "complex64", "shape": [1], "data": []})


def test_obs_map_defaults_and_bad_overrides() -> None:
    mw = default_obs_map(served_layout("metaworld"))
    assert (mw.image_key("corner"), mw.image_key("gripperPOV"), mw.state_source) == (
        "observation/image",
        "observation/wrist_image",
        "raw",
    )
    assert default_obs_map(served_layout("metaworld"), "http").image_key("corner") == "corner"
    assert default_obs_map(served_layout("robosuite")).image_key("topview") == "observation/images/topview"
    assert default_obs_map(served_layout("no-such-family")) == ObsMap()  # a family not installed: no camera map
    with pytest.raises(ConfigError, match="valid keys: images, state_key, prompt_key, state_source, image_size"):
        resolve_obs_map(served_layout("scripted"), "ws", {"state": "x"})
    with pytest.raises(ConfigError, match="state_source must be one of state, raw"):
        resolve_obs_map(served_layout("scripted"), "ws", {"state_source": "float32"})


def test_policy_options_come_from_json_or_a_file(tmp_path: Path) -> None:
    spec = tmp_path / "options.json"
    spec.write_text('{"timeout_s": 2, "obs_map": {"prompt_key": "task"}}')
    assert load_policy_options(str(spec)) == {"timeout_s": 2, "obs_map": {"prompt_key": "task"}}
    assert load_policy_options('{"retries": 0}') == {"retries": 0}
    with pytest.raises(ConfigError, match="neither a JSON object nor an existing file"):
        load_policy_options(str(tmp_path / "missing.json"))


def test_unknown_client_options_are_refused_before_connecting() -> None:
    from rollbench.core.registry import make_policy

    with pytest.raises(ConfigError, match="valid options: timeout_s, connect_timeout_s, retries, obs_map"):
        make_policy(url_of("ws", free_port()), {"timeout": 3})


def test_an_advertised_chunk_length_that_is_not_a_positive_integer_is_refused_by_name() -> None:
    """An invalid ``chunk_size`` (0, negative, a bool, a float, a string) is refused, naming the field (hostile round
    13 F11: it used to be ignored silently); an absent or null one leaves the default of 1, not declared."""
    from rollbench.wire.decode import ProtocolError
    from rollbench.wire.obs_map import advertised, advertised_chunk_size

    for bad, shown in ((0, "0"), (-3, "-3"), (True, "true"), (2.0, "2.0")):
        with pytest.raises(
            ProtocolError, match=rf"^chunk_size is {shown}; chunk_size must be an integer from 1 to 1,000$"
        ):
            advertised({"chunk_size": bad})
    with pytest.raises(ProtocolError, match=r"^chunk_size is a string of 1 character; chunk_size must be an integer"):
        advertised({"chunk_size": "4"})
    assert advertised({"chunk_size": None}) == (1, None) and advertised({}) == (1, None)
    assert advertised_chunk_size({}) is False
    assert advertised({"action_horizon": 10, "replan_steps": 5}) == (10, 5)
    assert advertised_chunk_size({"action_horizon": 10}) is True
