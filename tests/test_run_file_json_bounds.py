"""Every JSON document and JSON line of a run directory is parsed by one strict, bounded parser
(:func:`rollbench.core.jsonfile.loads_strict`; hostile round 13, F19): a handed-over run whose ``run.json``,
``meta/info.json``, ``meta/stats.json`` or agent transcript holds a value nested 100,000 deep, an integer of 5,000
digits, a key twice or (in a transcript) a NaN is named in one line with the file (and the line), the run is
damaged like any other damaged run, and the other runs under the same root are still listed and served.

The agent run is recorded against the LLM provider test double (:mod:`agent_double`; no provider is reachable
here); everything else is the real thing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent_double import serve_as_provider
from conftest import run_cli
from dashboard_support import listed_by_a_dashboard
from rollbench.api import evaluate, grade
from rollbench.core.jsonfile import JsonRefused, loads_strict
from rollbench.wire.decode import ProtocolError, loads_json

TRANSCRIPT = "transcripts/chunk-000/file-000.jsonl"
DEEP = "[" * 100_000 + "]" * 100_000
PAYLOADS = {  # what is planted -> why the parser refuses it, in its words (written out by hand)
    "deep": (DEEP, "it is nested too deeply: more than 64 levels"),
    "5000 digits": ("7" * 5000, "it holds a number of more than 4300 digits"),
    "a key twice": ('1, "planted": 2', "an object names a key twice"),
}


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agent") / "run"
    with serve_as_provider():
        evaluate(env="scripted/reach", policy="agent:local/giver", episodes=1, out=out)
    assert grade(out).violations == []
    return out


def _copy(agent_run: Path, to: Path) -> Path:
    shutil.copytree(agent_run, to)
    return to


def _plant_in_document(run: Path, rel: str, payload: str) -> None:
    """``"planted": PAYLOAD,`` as the first member of the document's top object (text edit: Python's json could
    not write most of these)."""
    text = (run / rel).read_text()
    at = text.index("{") + 1
    (run / rel).write_text(text[:at] + f'"planted": {payload},' + text[at:])


def _plant_in_transcript(run: Path, line: int, payload: str) -> None:
    lines = (run / TRANSCRIPT).read_text().splitlines()
    lines[line - 1] = '{"type": "note", "planted": ' + payload + "}"
    (run / TRANSCRIPT).write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("rel", ["meta/info.json", "meta/stats.json"])
def test_a_planted_value_in_a_meta_file_is_one_named_violation(
    agent_run: Path, tmp_path: Path, rel: str, payload: str
) -> None:
    run = _copy(agent_run, tmp_path / "run")
    text, why = PAYLOADS[payload]
    _plant_in_document(run, rel, text)
    result = grade(run)
    assert result.status == "PARTIAL"
    assert result.violations[0] == f"{rel} is not readable JSON ({why})"  # info.json's: then what it cannot locate


@pytest.mark.parametrize(
    "payload", [*sorted(PAYLOADS), "NaN"], ids=lambda p: p.replace(" ", "-")
)  # a NaN is no JSON number (RFC 8259); rollbench's agent writes null
def test_a_planted_value_on_a_transcript_line_names_the_file_and_the_line(
    agent_run: Path, tmp_path: Path, payload: str
) -> None:
    run = _copy(agent_run, tmp_path / "run")
    text, why = PAYLOADS.get(payload, ("NaN", "NaN is not a JSON number"))
    _plant_in_transcript(run, 2, text)
    result = grade(run)
    assert result.status == "PARTIAL"
    assert result.violations == [f"episode 0: transcript {TRANSCRIPT} is unreadable (line 2 is not JSON ({why}))"]


@pytest.mark.slow
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_planted_value_in_run_json_is_exit_2_with_one_line(agent_run: Path, tmp_path: Path, payload: str) -> None:
    run = _copy(agent_run, tmp_path / "run")
    text, why = PAYLOADS[payload]
    _plant_in_document(run, "run.json", text)
    r = run_cli("grade", run)
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout
    assert r.stderr.strip() == f"error: {run}/run.json is not a rollbench run log: it is not readable JSON: {why}"


@pytest.mark.slow
def test_one_run_with_a_deep_transcript_line_costs_only_itself(agent_run: Path, tmp_path: Path) -> None:
    """The CLI's readers and the dashboard over a root holding a sound run and one with a deep transcript line."""
    root = tmp_path / "root"
    good, bad = _copy(agent_run, root / "good"), _copy(agent_run, root / "bad")
    _plant_in_transcript(bad, 3, DEEP)
    said = f"episode 0: transcript {TRANSCRIPT} is unreadable (line 3 is not JSON (it is nested too deeply: more than 64 levels))"
    r = run_cli("grade", bad)
    assert (r.returncode, "Traceback" in r.stdout + r.stderr) == (1, False) and said in r.stdout
    r = run_cli("grade", good)
    assert r.returncode == 0
    r = run_cli("runs", root, "--grade", env={"COLUMNS": "400"})
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    assert [ln.split("│")[1].strip() for ln in r.stdout.splitlines() if ln.startswith("│")] == ["bad", "good"]
    assert f"first: {said}" in r.stdout
    r = run_cli("summarize", root, "--allow-damaged")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    assert listed_by_a_dashboard(root, tmp_path) == ["bad", "good"]


def test_the_strict_parser_counts_levels_outside_strings_only() -> None:
    """64 levels are read, 65 refused; brackets and escaped quotes inside strings are no levels (hand-counted)."""
    assert loads_strict("[" * 64 + "]" * 64) is not None
    with pytest.raises(JsonRefused, match=r"^it is nested too deeply: more than 64 levels$"):
        loads_strict("[" * 65 + "]" * 65)
    tricky = '[{"a": "[[[[{{{{", "b": "\\\\", "c": "\\"]]]]"}]'  # two levels; strings full of brackets
    assert loads_strict(tricky, depth=2) == [{"a": "[[[[{{{{", "b": "\\", "c": '"]]]]'}]
    with pytest.raises(JsonRefused):
        loads_strict(tricky, depth=1)
    with pytest.raises(JsonRefused, match=r"^NaN is not a JSON number$"):
        loads_strict('{"x": NaN}')
    assert loads_strict('{"x": NaN}', finite=False)["x"] != 0


def test_the_wire_reads_through_the_same_parser_at_its_own_depth() -> None:
    assert loads_json("[" * 32 + "]" * 32) is not None
    with pytest.raises(ProtocolError, match=r"^the message nests maps and lists more than 32 deep$"):
        loads_json("[" * 33 + "]" * 33)
    with pytest.raises(ProtocolError, match=r"^the message nests maps and lists more than 32 deep$"):
        loads_json(DEEP)
    with pytest.raises(ProtocolError, match=r"^not JSON \(it holds a number of more than 4300 digits\)$"):
        loads_json("9" * 5000)
