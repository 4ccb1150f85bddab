"""A provider's numbers and listings that are not what they should be (hostile round 7: F1, F2, F6).

A ``usage`` token count that is text (carrying the API key), a bool, a list, a fraction, a negative or ``1e400``
is recorded as null with ``cost_error`` naming the field and the value's kind, never the value; it is not counted
and the episode goes on. A ``/models`` listing of the wrong shape or too deep to parse gives ``model_listed: null``
and the run goes on. The provider is :mod:`tests.agent_double` (a documented test double: no LLM provider is
reachable here), served for real on loopback; rollout, recording and grading are the real thing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_double import KEY, Double
from cli_in_process import invoke
from conftest import run_cli
from rollbench.api import evaluate
from rollbench.policies.agent.client import usage_count

REACH = "scripted/reach"
PLANTED = f"SEKRETMARK {KEY}"
NOT_WHOLE = "the provider's usage.prompt_tokens is not a whole number of tokens from 0 to 1,000,000,000,000"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12, (12, None)),
        (0, (0, None)),
        (12.0, (12, None)),
        (10**12, (10**12, None)),
        (None, (None, None)),
        (10**12 + 1, (None, NOT_WHOLE)),
        (-1, (None, NOT_WHOLE)),
        (1.5, (None, NOT_WHOLE)),
        (float("inf"), (None, NOT_WHOLE)),
        (float("nan"), (None, NOT_WHOLE)),
        (10**400, (None, NOT_WHOLE)),
        (PLANTED, (None, "the provider's usage.prompt_tokens is text, not a number of tokens")),
        (True, (None, "the provider's usage.prompt_tokens is a bool, not a number of tokens")),
        ([PLANTED], (None, "the provider's usage.prompt_tokens is a list, not a number of tokens")),
        ({"k": PLANTED}, (None, "the provider's usage.prompt_tokens is an object, not a number of tokens")),
    ],
)  # fmt: skip
def test_a_usage_count_is_a_whole_number_in_bounds_or_null_with_a_reason_that_never_quotes_it(
    value: Any, expected: tuple[int | None, str | None]
) -> None:
    assert usage_count({"prompt_tokens": value}, "prompt_tokens") == expected


# the raw JSON text of prompt_tokens in every reply (the double splices it in), and the call line's cost_error
HOSTILE_USAGE = [
    (json.dumps(PLANTED), "the provider's usage.prompt_tokens is text, not a number of tokens"),
    ("1e400", NOT_WHOLE),
    ("-5", NOT_WHOLE),
    ("2.5", NOT_WHOLE),
    ("true", "the provider's usage.prompt_tokens is a bool, not a number of tokens"),
    (json.dumps([PLANTED]), "the provider's usage.prompt_tokens is a list, not a number of tokens"),
    (json.dumps({"why": PLANTED}), "the provider's usage.prompt_tokens is an object, not a number of tokens"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("prompt_tokens", "reason"), HOSTILE_USAGE, ids=[t[:12] for t, _ in HOSTILE_USAGE])
def test_a_usage_count_that_is_not_a_count_is_recorded_null_with_cost_error_and_the_episode_goes_on(
    double: Double, tmp_path: Path, prompt_tokens: str, reason: str, capfd: pytest.CaptureFixture[str]
) -> None:
    double.usage_text = f'{{"prompt_tokens": {prompt_tokens}, "completion_tokens": 5, "total_tokens": 7}}'
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy="agent:local/giver", episodes=2, out=out)
    assert result.status == "OK", result.reasons
    assert [(e.termination_reason, e.error) for e in result.episodes] == [("give_up", None)] * 2
    lines = [json.loads(t) for t in (out / "transcripts/chunk-000/file-000.jsonl").read_text().splitlines()]
    calls = [ln for ln in lines if ln["type"] == "call"]
    assert [(c["usage"], c["cost_usd"], c["cost_error"]) for c in calls] == [
        ({"prompt_tokens": None, "completion_tokens": 5, "total_tokens": 7}, None, reason)
    ] * 2  # move_delta, then give_up
    assert lines[-1]["totals"] == {
        "model_calls": 2, "prompt_tokens": 0, "completion_tokens": 10, "total_tokens": 14, "cost_usd": None,
    }  # fmt: skip
    usage = result.agent_usage.overall
    assert (usage.model_calls, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd) == (4, 0, 20, None)
    graded = invoke("grade", out, "--json")  # in the test process (tests/cli_in_process.py): what it prints
    assert graded.returncode == 0 and json.loads(graded.stdout)["status"] == "OK", graded.stdout + graded.stderr
    seen = capfd.readouterr()
    everything = b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())
    everything += (json.dumps(result.to_json()) + graded.stdout + graded.stderr + seen.out + seen.err).encode()
    assert KEY.encode() not in everything and b"SEKRETMARK" not in everything


@pytest.mark.slow
def test_the_cli_eval_output_never_shows_a_key_planted_in_usage(double: Double, tmp_path: Path) -> None:
    double.usage_text = f'{{"prompt_tokens": {json.dumps(PLANTED)}, "completion_tokens": 1e400}}'
    made = run_cli("eval", "--env", REACH, "--policy", "agent:local/giver", "--episodes", "2", "--out", tmp_path / "r")
    assert made.returncode == 0, made.stderr
    assert "status: OK" in made.stdout, made.stdout
    assert KEY not in made.stdout + made.stderr and "SEKRETMARK" not in made.stdout + made.stderr


MODELS_LISTINGS = [
    ('{"data": 5}', None),
    ('{"data": "solver"}', None),
    ("[1, 2]", None),
    ('{"data": [5, null, {"id": ["giver"]}]}', False),
    ('{"data": [{"id": "giver"}]}', True),
    ("not json", None),
    ('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}", None),
]


@pytest.mark.parametrize(("listing", "listed"), MODELS_LISTINGS, ids=[t[:16] for t, _ in MODELS_LISTINGS])
def test_a_malformed_or_too_deep_models_listing_is_model_listed_null_and_the_run_goes_on(
    double: Double, tmp_path: Path, listing: str, listed: bool | None
) -> None:
    double.models_text = listing
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy="agent:local/giver", episodes=1, out=out)
    assert result.status == "OK", result.reasons
    prov = json.loads((out / "run.json").read_text())["plan"]["policy"]["provenance"]
    assert (prov["models_endpoint_status"], prov["model_listed"]) == (200, listed)


DEEP = "[" * 100_000 + "]" * 100_000
DEEP_CALL = {"id": "c1", "type": "function", "function": {"name": "move_delta", "arguments": DEEP}}
SHALLOWER_CALL = {**DEEP_CALL, "function": {"name": "move_delta", "arguments": "[" * 5000 + "]" * 5000}}
DEEP_REPLIES = [
    (
        "body",
        DEEP,
        "InfrastructureError: the model API URL/chat/completions sent a body that is not a JSON object "
        "(HTTP 200, 200000 bytes)",
    ),
    (  # 200,000 characters: over the 16,384 of one kept tool call (agent/replies.py), named before it is parsed
        "tool arguments",
        json.dumps({"choices": [{"message": {"role": "assistant", "tool_calls": [DEEP_CALL]}}]}),
        "EpisodeError: malformed tool call: an object of 3 keys, over 16384 characters",
    ),
    (  # 10,000 characters: within the size bound, too deep for json.loads
        "tool arguments within the size bound",
        json.dumps({"choices": [{"message": {"role": "assistant", "tool_calls": [SHALLOWER_CALL]}}]}),
        "EpisodeError: malformed tool call (RecursionError; the call is an object of 3 keys)",
    ),
]


@pytest.mark.parametrize(("what", "reply", "says"), DEEP_REPLIES, ids=[w for w, _, _ in DEEP_REPLIES])
def test_a_reply_nested_too_deep_to_parse_ends_the_episode_with_its_reason(
    double: Double, tmp_path: Path, what: str, reply: str, says: str
) -> None:
    double.reply_text = reply
    result = evaluate(env=REACH, policy="agent:local/giver", episodes=1, out=tmp_path / "run")
    [episode] = result.episodes
    assert episode.termination_reason == "error"
    assert (episode.error or "").replace(double.url, "URL") == says


def test_a_hand_edited_transcripts_token_counts_are_summed_only_where_they_are_whole_numbers() -> None:
    """grade's recount of a transcript (record/transcript.usage_totals) never parses a count's text: a count that
    is not a whole number counts 0, so a stated total disagrees and grade names that (never a ValueError quoting
    the text)."""
    from rollbench.record.transcript import usage_totals

    lines = [
        {"type": "call", "usage": {"prompt_tokens": "SECRET 12", "completion_tokens": 5}},
        {"type": "call", "usage": {"prompt_tokens": 7, "completion_tokens": True, "total_tokens": -3}},
        {"type": "call", "usage": [1, 2]},
        {"type": "call", "usage": {"prompt_tokens": 2.5, "total_tokens": 9}, "cost_usd": 0.25},
        {"type": "end"},
    ]
    assert usage_totals(lines) == {
        "model_calls": 4,
        "prompt_tokens": 7,  # "SECRET 12", 2.5: not whole numbers
        "completion_tokens": 5,  # True is not a count
        "total_tokens": 9,  # -3 is not a count
        "cost_usd": 0.25,
    }
