"""LLM agent policies end to end: full episodes on the scripted env and MetaWorld against a provider test double.

The provider is :mod:`tests.agent_double` (a documented test double: no LLM provider is reachable here), served
for real on loopback; everything else (rollout, recording, staging, grading) is the real thing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from agent_double import KEY, Double
from conftest import run_cli
from rollbench.api import Execution, evaluate, grade
from rollbench.core.contracts import ConfigError

REACH = "scripted/reach"


def meta_rows(run_dir: Path) -> list[dict[str, Any]]:
    files = sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def transcript(run_dir: Path, rel: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / rel).read_text().splitlines()]


def assert_key_nowhere(run_dir: Path) -> None:
    for f in run_dir.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f"the API key leaked into {f}"


def served_usage(double: Double, model: str) -> dict[str, int]:
    ok = [r for r in double.log if r["model"] == model and r["status"] == 200]
    return {
        "model_calls": len(ok),
        "prompt_tokens": sum(r["usage"]["prompt_tokens"] for r in ok),
        "completion_tokens": 5 * len(ok),
    }


@pytest.mark.slow
def test_an_agent_solves_scripted_reach_with_linked_transcripts_and_usage_graded_from_them(
    double: Double, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    # two worker processes: episodes are staged (transcript included) and committed by the main process
    result = evaluate(env=REACH, policy="agent:local/solver", episodes=2, out=out, execution=Execution(workers=2))
    assert result.status == "OK", result.reasons
    assert [e.termination_reason for e in result.episodes] == ["success", "success"]
    rows = meta_rows(out)
    assert [r["rollbench/transcript"] for r in rows] == [
        "transcripts/chunk-000/file-000.jsonl",
        "transcripts/chunk-000/file-001.jsonl",
    ]
    assert [r["rollbench/wire_capture"] for r in rows] == [None, None]
    lines = transcript(out, rows[0]["rollbench/transcript"])
    assert lines[0]["type"] == "episode" and lines[0]["model"] == "solver" and lines[0]["tool_set"] == "planar"
    roles = [ln["message"]["role"] for ln in lines if ln["type"] == "message"]
    assert roles[:3] == ["system", "user", "assistant"]
    assert lines[-1]["type"] == "end" and lines[-1]["termination_reason"] == "success"
    actions = [ln for ln in lines if ln["type"] == "action"]
    assert actions[0]["tool"] == "move_to" and actions[0]["step"] == 0
    assert sum(a["steps"] for a in actions) >= result.episodes[0].length
    # usage in grade = what the double returned, summed from the transcripts (cost: 0.001 per call)
    usage = result.agent_usage.overall
    served = served_usage(double, "solver")
    assert {k: usage.to_json()[k] for k in served} == served
    assert usage.cost_usd == pytest.approx(0.001 * served["model_calls"])
    assert result.agent_usage.by_task[REACH].episodes == 2
    assert grade(out).agent_usage == result.agent_usage
    log = json.loads((out / "run.json").read_text())
    prov = log["plan"]["policy"]["provenance"]
    assert (prov["provider"], prov["model"], prov["api_key_env"]) == ("local", "solver", "ROLLBENCH_AGENT_API_KEY")
    assert prov["model_listed"] is True
    assert not (out / ".staging").exists()
    assert_key_nowhere(out)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_give_up_is_its_own_termination_reason(double: Double, tmp_path: Path, batch_size: int) -> None:
    result = evaluate(
        env=REACH,
        policy="agent:local/giver",
        episodes=3,
        out=tmp_path / "run",
        execution=Execution(batch_size=batch_size),
    )
    for i, ep in enumerate(result.episodes):
        assert (ep.termination_reason, ep.length, ep.success) == ("give_up", 1, False)
        assert ep.transcript == f"transcripts/chunk-000/file-{i:03d}.jsonl"
        lines = transcript(tmp_path / "run", ep.transcript)
        assert (lines[0]["seed"], lines[-1]["termination_reason"]) == (i, "give_up")
        assert [a["tool"] for a in lines if a["type"] == "action"] == ["move_delta", "give_up"]
        assert lines[-2]["arguments"] == {"reason": "cannot see the goal"}
    assert result.tasks[REACH].termination_reasons == {"give_up": 3}
    assert result.status == "OK"  # giving up is a failure of the task, not a broken run


@pytest.mark.sim
def test_an_agent_drives_metaworld_with_cartesian_gripper_and_picture_tools(double: Double, tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    out = tmp_path / "run"
    result = evaluate(
        env="metaworld/pick-place-v3",
        policy="agent:local/arm",
        episodes=1,
        max_steps=40,
        video=True,
        image_size=(64, 64),
        out=out,
        policy_options={"gripper_steps": 4},
    )
    assert result.status == "OK", result.reasons
    ep = result.episodes[0]
    # move_delta dz=0.05 m at 1 cm per step = 5 steps, gripper 4 steps, picture 1 hold step, then done
    assert (ep.termination_reason, ep.length) == ("policy_stop", 10)
    data = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pylist()
    assert [round(r["action"][2], 6) for r in data[:5]] == [1.0] * 5  # dz units: 0.05 m / (5 steps * 0.01 m)
    assert [r["action"][3] for r in data] == [-1.0] * 5 + [1.0] * 5  # open, then closed and kept closed
    lines = transcript(out, ep.transcript)
    assert lines[0]["tool_set"] == "arm"
    refs = [
        p
        for ln in lines
        if ln["type"] == "message" and isinstance(ln["message"]["content"], list)
        for p in ln["message"]["content"]
        if p.get("type") == "image_ref"
    ]
    assert [(r["camera"], r["step"], r["width"]) for r in refs] == [("corner", 0, 64), ("corner", 10, 64)]
    sent = [r["body"] for r in double.log if r["model"] == "arm"]
    assert "data:image/png;base64," in json.dumps(sent[-1]["messages"])  # the picture went to the model
    assert "data:image/png;base64," not in (out / ep.transcript).read_text()  # referenced, not copied
    assert (out / "videos/observation.images.corner/chunk-000/file-000.mp4").exists()


def test_429_and_503_are_retried_with_backoff_and_the_wire_capture_redacts_the_key(
    double: Double, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = evaluate(
        env=REACH,
        policy="agent:local/flaky",
        episodes=1,
        out=out,
        policy_options={"backoff_s": 0.01, "wire_capture": True},
    )
    assert result.status == "OK", result.reasons
    lines = transcript(out, result.episodes[0].transcript)
    calls = [ln for ln in lines if ln["type"] == "call"]
    # Retry-After: 0 is obeyed after the 429; the 503 has none, so the second wait is backoff_s * 2**1
    waits = [[(a["status"], a["waited_s"]) for a in c["attempts"]] for c in calls]
    assert calls and waits == [[(429, 0.0), (503, 0.0), (200, 0.02)]] * len(calls)
    wire = [json.loads(x) for x in (out / "wire/chunk-000/file-000.jsonl").read_text().splitlines()]
    assert [w["response"]["status"] for w in wire] == [429, 503, 200] * len(calls)
    assert all(w["request"]["headers"]["authorization"] == "<redacted>" for w in wire)
    assert meta_rows(out)[0]["rollbench/wire_capture"] == "wire/chunk-000/file-000.jsonl"
    assert_key_nowhere(out)


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        ("slow", {"timeout_s": 0.5}, "InfrastructureError: no reply from the model API"),
        ("always429", {"retries": 1, "backoff_s": 0.01}, "InfrastructureError: the model API"),
        ("badjson", {}, "EpisodeError: malformed tool call"),
        ("texty", {"max_text_replies": 1}, "EpisodeError: the model replied 2 times in a row without a tool call"),
    ],
)
@pytest.mark.slow
def test_provider_and_model_faults_end_the_episode_as_error_with_the_reason(
    double: Double, tmp_path: Path, model: str, options: dict[str, Any], expected: str
) -> None:
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy=f"agent:local/{model}", episodes=2, out=out, policy_options=options)
    assert result.status == "FAILED"
    assert [e.termination_reason for e in result.episodes] == ["error", "error"]  # the run went on
    for e in result.episodes:
        assert e.error.startswith(expected), e.error
        assert transcript(out, e.transcript)[-1]["error"] == e.error
    if model == "always429":
        assert "HTTP 429" in result.episodes[0].error
        assert [r["status"] for r in double.log] == [429] * 4  # 2 episodes x (1 try + 1 retry)


def test_bad_agent_setups_fail_before_anything_is_written(
    double: Double, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="agent:PROVIDER/MODEL"):
        evaluate(env=REACH, policy="agent:nomodel", episodes=1, out=tmp_path / "a")
    monkeypatch.setenv("ROLLBENCH_AGENT_API_KEY", "sk-wrong-key-0000000000000000")
    with pytest.raises(ConfigError, match="refused the API key") as exc:
        evaluate(env=REACH, policy="agent:local/solver", episodes=1, out=tmp_path / "b")
    assert "sk-wrong-key" not in str(exc.value)
    monkeypatch.setenv("ROLLBENCH_AGENT_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="cannot reach the model API"):
        evaluate(env=REACH, policy="agent:local/solver", episodes=1, out=tmp_path / "c")
    monkeypatch.delenv("ROLLBENCH_AGENT_BASE_URL")
    with pytest.raises(ConfigError, match="ROLLBENCH_AGENT_BASE_URL or ACME_BASE_URL"):
        evaluate(env=REACH, policy="agent:acme/m1", episodes=1, out=tmp_path / "d")
    assert not any((tmp_path / n).exists() for n in "abcd")
    proc = run_cli("eval", "--env", REACH, "--policy", "zero", "--wire-capture", "--out", tmp_path / "e")
    assert proc.returncode == 2 and "--wire-capture applies to agent:PROVIDER/MODEL" in proc.stderr


def test_a_transcript_is_committed_with_its_episode_and_an_orphan_is_removed_on_open(
    double: Double, tmp_path: Path
) -> None:
    from rollbench.record.writer import DatasetWriter

    out = tmp_path / "run"
    evaluate(env=REACH, policy="agent:local/giver", episodes=2, out=out)
    ref = grade(out)
    # a crash after episode 1's data and transcript were placed but before its meta row (the commit point)
    meta = out / "meta/episodes/chunk-000/file-001.parquet"
    data, tr = out / "data/chunk-000/file-001.parquet", out / "transcripts/chunk-000/file-001.jsonl"
    staged = out / ".staging/episode-000001"
    staged.mkdir(parents=True)
    pq.write_table(pq.read_table(data).drop_columns(["index"]), staged / "data.parquet")
    (staged / "transcript.jsonl").write_bytes(tr.read_bytes())
    row = pq.read_table(meta).to_pylist()[0]
    keep = {k: v for k, v in row.items() if k.startswith("rollbench/")}
    (staged / "episode.json").write_text(
        json.dumps({**keep, "length": row["length"], "episode_index": 1, "task_index": 0, "traceback": None})
    )
    meta.unlink()
    info = json.loads((out / "meta/info.json").read_text())
    writer = DatasetWriter(out, info["features"], 10, [row["rollbench/instruction"]], "scripted")
    assert writer.committed == 1 and not tr.exists() and not data.exists()  # orphans of the uncommitted episode
    assert writer.promote_ready() == [1]
    writer.write_stats()  # as a resume's finish does (rollbench.api._finish): stats.json describes both episodes
    assert tr.exists() and grade(out) == ref


def test_grade_reports_a_transcript_that_disagrees_with_its_calls_or_is_missing(double: Double, tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(env=REACH, policy="agent:local/giver", episodes=2, out=out)
    tr0 = out / "transcripts/chunk-000/file-000.jsonl"
    lines = transcript(out, "transcripts/chunk-000/file-000.jsonl")
    lines[-1]["totals"]["total_tokens"] += 1
    tr0.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    (out / "transcripts/chunk-000/file-001.jsonl").unlink()
    result = grade(out)
    assert result.status == "PARTIAL"
    assert result.violations == [
        f"episode 0: transcript transcripts/chunk-000/file-000.jsonl states total_tokens="
        f"{lines[-1]['totals']['total_tokens']} but its call lines sum to {lines[-1]['totals']['total_tokens'] - 1}",
        "episode 1: transcript transcripts/chunk-000/file-001.jsonl is unreadable ([Errno 2] No such file or directory: "
        f"'{out / 'transcripts/chunk-000/file-001.jsonl'}')",
    ]


def test_an_api_key_given_as_a_policy_option_is_refused_saying_where_keys_come_from() -> None:
    from rollbench.core.registry import make_policy

    with pytest.raises(ConfigError) as err:
        make_policy("agent:openai/gpt-4o", {"api_key": "sk-not-here"})
    assert str(err.value) == ("the API key is read from $ROLLBENCH_AGENT_API_KEY or $<PROVIDER>_API_KEY, not options")


def strict_lines(path: Path) -> list[dict[str, Any]]:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{path} holds the non-JSON constant {name}")

    return [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]


def test_a_provider_cost_of_nan_is_recorded_as_null_with_its_reason_in_strict_json(
    double: Double, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy="agent:local/nancost", episodes=1, out=out)
    lines = strict_lines(out / "transcripts/chunk-000/file-000.jsonl")
    calls = [ln for ln in lines if ln["type"] == "call"]
    assert len(calls) == 2  # move_delta, then give_up
    assert [(c["cost_usd"], c["cost_error"]) for c in calls] == [
        (None, "the provider reported usage.cost nan, not a finite number")
    ] * 2
    assert lines[-1]["totals"]["cost_usd"] is None
    assert result.status == "OK" and result.violations == []
    assert result.agent_usage.overall.cost_usd is None
    assert result.agent_usage.overall.model_calls == 2


def test_grade_names_a_nan_written_into_a_transcript(double: Double, tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(env=REACH, policy="agent:local/giver", episodes=1, out=out)
    rel = "transcripts/chunk-000/file-000.jsonl"
    text = (out / rel).read_text().splitlines()
    at = next(i for i, ln in enumerate(text) if '"type": "call"' in ln)
    text[at] = text[at].replace('"cost_usd": 0.001', '"cost_usd": NaN')
    assert "NaN" in text[at]
    (out / rel).write_text("\n".join(text) + "\n")
    result = grade(out)
    assert result.status == "PARTIAL"
    assert result.violations == [
        f"episode 0: transcript {rel} is unreadable (line {at + 1} is not JSON (NaN is not a JSON number))"
    ]


@pytest.mark.parametrize(
    ("prices", "says"),
    [
        ({"input": "inf", "output": 1}, "price_per_mtok.input must be a number of USD per million tokens from 0 to 1e+06, got 'inf'"),
        ({"input": 1, "output": 1e308}, "price_per_mtok.output must be a number of USD per million tokens from 0 to 1e+06, got 1e+308"),
        ({"input": -0.5, "output": 1}, "got -0.5"),
        ({"input": True, "output": 1}, "got True"),
        ({"input": 1}, 'price_per_mtok must be {"input": USD, "output": USD} per million tokens'),
    ],
)  # fmt: skip
def test_a_price_that_is_not_a_finite_non_negative_number_is_refused(prices: dict[str, Any], says: str) -> None:
    from rollbench.policies.agent.client import parse_prices

    with pytest.raises(ConfigError) as err:
        parse_prices(prices)
    assert says in str(err.value)


def test_a_cost_that_overflows_a_float_is_null_with_its_reason() -> None:
    from rollbench.policies.agent.client import call_cost, parse_prices

    prices = parse_prices({"input": 1e6, "output": 1e6})
    assert call_cost({"prompt_tokens": 2_000_000, "completion_tokens": 1_000_000}, prices) == (3e6, None)
    assert call_cost({"prompt_tokens": 10**400, "completion_tokens": 5}, prices) == (
        None,
        "the provider's usage.prompt_tokens is not a whole number of tokens from 0 to 1,000,000,000,000",
    )
    assert call_cost({"cost": 10**400}, None) == (None, "the provider reported usage.cost inf, not a finite number")
    assert call_cost({"cost": True}, None) == (None, None)


@pytest.mark.parametrize(("model", "reason"), [("quitter", "give_up"), ("stopper", "policy_stop")])
def test_an_agent_that_stops_at_its_first_turn_ends_the_episode_with_its_reason_and_grades_ok(
    double: Double, tmp_path: Path, model: str, reason: str
) -> None:
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy=f"agent:local/{model}", episodes=2, out=out)
    assert [(e.termination_reason, e.length, e.success, e.error) for e in result.episodes] == [
        (reason, 0, False, None)
    ] * 2
    assert (result.status, result.violations) == ("OK", [])
    assert grade(out).to_json() == result.to_json()
    # the writer's padding frame (LeRobot needs a frame per episode): one all-NaN row, steps 0
    rows = meta_rows(out)
    assert [(r["length"], r["rollbench/steps"], r["rollbench/termination_reason"]) for r in rows] == [
        (1, 0, reason)
    ] * 2
    data = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pylist()
    assert len(data) == 1 and all(x != x for x in data[0]["action"])
    tools = [ln["tool"] for ln in strict_lines(out / rows[0]["rollbench/transcript"]) if ln["type"] == "action"]
    assert tools == ["give_up" if model == "quitter" else "done"]
    assert len(double.log) == 2  # one call per episode
