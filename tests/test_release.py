"""``rollbench release`` on a real agent run (provider test double on loopback, see tests/agent_double.py) with
secrets planted in every kind of file it holds: run.json, a transcript, a wire capture, parquet string columns
(through the instruction), a notes file in the run directory, and a labels file."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agent_double import KEY, serve_as_provider
from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.core.contracts import ConfigError
from rollbench.core.identity import sanitize_segment
from rollbench.core.spec import EvalSpec
from rollbench.release.copy import build_release
from rollbench.release.rules import PLACEHOLDER, Scanner

EMAIL = "alice.smith@example.org"
INSTRUCTION = f"move the point to the goal, then mail {EMAIL}"
PLANTED = {
    "openai": "sk-proj-Zq8xW3vB7nM2kL5pR9tY1uI4oP6aS0dF",
    "anthropic": "sk-ant-api03-Hj7Kl9Mn2Bv4Cx6Zz8Qw1Er3Ty5Ui7Op9",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2",
    "hf": "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm1234567890",
    "slack": "xoxb-123456789012-abcdefABCDEF",
    "google": "AIza" + "SyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1v",
    "entropy": "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9",
    "bearer": "tok3nV4lue9Xy8Wz7",
    "xapikey": "abcd1234secretvalue",
    "home": "/home/zoltan",
    "mac_home": "/Users/bob",
    "email": EMAIL,
    "email2": "bob@corp.example.com",
}
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
HOST = socket.gethostname()


def plant(run: Path) -> None:
    log = json.loads((run / "run.json").read_text())
    log["notes"] = {"operator_env": {"OPENAI_API_KEY": PLANTED["openai"]}, "config": f"{PLANTED['home']}/cfg.yaml"}
    (run / "run.json").write_text(json.dumps(log, indent=2) + "\n")
    tr = run / "transcripts/chunk-000/file-000.jsonl"
    lines = tr.read_text().splitlines(keepends=True)
    note = {
        "type": "message",
        "t_s": 0.5,
        "message": {"role": "user", "content": f"use {PLANTED['anthropic']} and {PLANTED['hf']}"},
    }
    tr.write_text("".join([lines[0], json.dumps(note) + "\n", *lines[1:]]))
    wire = run / "wire/chunk-000/file-000.jsonl"
    extra = {
        "response": {"status": 200, "headers": {"x-api-key": PLANTED["xapikey"]}, "body": f"id {PLANTED['aws']}"},
        "request": {"headers": {"authorization": f"Bearer {PLANTED['bearer']}"}},
    }
    wire.write_text(wire.read_text() + json.dumps(extra) + "\n")
    (run / "notes.md").write_text(
        f"# notes\nrecorded from {PLANTED['mac_home']}/robots; slack {PLANTED['slack']}\n"
        f"google {PLANTED['google']} and {PLANTED['entropy']}\ncontact {PLANTED['email2']}\n"
        f"{PEM}\n"
    )


def run_key(run: Path) -> str:
    """``host/robot/name`` as the run's run.json records its identity (what label keys begin with)."""
    ident = json.loads((run / "run.json").read_text())["identity"]
    return f"{ident['host']}/{ident['robot']}/{ident['name']}"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("release-src")
    with serve_as_provider():
        evaluate(
            env="scripted/reach",
            policy="agent:local/solver",
            episodes=2,
            instruction=INSTRUCTION,
            video=True,
            image_size=(32, 32),
            out=root / "agent-run",
            policy_options={"wire_capture": True},
        )
    run = root / "agent-run"
    plant(run)
    labels = root / "labels.jsonl"
    labels.write_text(
        json.dumps({"episode": f"{run_key(run)}/0", "label": "good", "labeler": PLANTED["email2"]})
        + "\n"
        + json.dumps({"episode": f"{run_key(run)}/1", "note": f"see {PLANTED['github']}"})
        + "\n"
    )
    return run, labels


def files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def masked_source(text: str) -> str:
    """The source text with every planted secret (and the recording host in its fields) replaced by one mark."""
    for value in sorted([*PLANTED.values(), PEM], key=len, reverse=True):
        text = text.replace(value, "§")
    text = text.replace(f'"host": "{HOST}"', '"host": "§"')
    return text.replace(f'"{HOST}/point/', '"§/point/')  # the host segment of an identity key (labels)


def masked_release(text: str) -> str:
    return PLACEHOLDER.sub("§", text)


def test_every_planted_secret_is_replaced_consistently_and_nothing_else_changes(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    run, labels = source
    doc = build_release([run], tmp_path / "rel", labels=[labels])
    out = files(tmp_path / "rel")
    for rel, data in out.items():
        for name, secret in [*PLANTED.items(), ("pem", PEM), ("key", KEY)]:
            assert secret.encode() not in data, f"{name} left in {rel}"
    found = {(r["file"], r["rule"]) for r in doc["redactions"]}
    for expected in [
        ("agent-run/run.json", "openai_key"),
        ("agent-run/run.json", "home_path"),
        ("agent-run/run.json", "email"),
        ("agent-run/run.json", "host_name"),
        ("agent-run/transcripts/chunk-000/file-000.jsonl", "anthropic_key"),
        ("agent-run/transcripts/chunk-000/file-000.jsonl", "huggingface_token"),
        ("agent-run/transcripts/chunk-000/file-000.jsonl", "email"),
        ("agent-run/wire/chunk-000/file-000.jsonl", "secret_field"),
        ("agent-run/wire/chunk-000/file-000.jsonl", "aws_access_key"),
        ("agent-run/wire/chunk-000/file-000.jsonl", "bearer_token"),
        ("agent-run/wire/chunk-000/file-000.jsonl", "email"),
        ("agent-run/meta/tasks.parquet", "email"),
        ("agent-run/meta/episodes/chunk-000/file-000.parquet", "email"),
        ("agent-run/notes.md", "slack_token"),
        ("agent-run/notes.md", "google_api_key"),
        ("agent-run/notes.md", "high_entropy"),
        ("agent-run/notes.md", "private_key"),
        ("agent-run/notes.md", "home_path"),
        ("agent-run/notes.md", "email"),
        ("labels/labels.jsonl", "github_token"),
        ("labels/labels.jsonl", "email"),
        ("labels/labels.jsonl", "host_segment"),
    ]:
        assert expected in found, expected
    # the same secret gets the same placeholder in every file (the instruction's e-mail is met first)
    assert {r["placeholder"] for r in doc["redactions"] if r["file"].endswith(".parquet")} == {"<REDACTED:email:1>"}
    email2 = {r["placeholder"] for r in doc["redactions"] if r["category"] == "email"} - {"<REDACTED:email:1>"}
    assert email2 == {"<REDACTED:email:2>"}
    assert b"<REDACTED:email:2>" in out["labels/labels.jsonl"] and b"<REDACTED:email:2>" in out["agent-run/notes.md"]
    log = json.loads(out["agent-run/run.json"])
    host_ph = log["provenance"]["host"]
    assert host_ph.startswith("<REDACTED:host_name:")
    first_label = json.loads(out["labels/labels.jsonl"].splitlines()[0])
    assert first_label["episode"] == sanitize_segment(host_ph) + "/point/agent-run/0"
    # nothing else changes: unredacted files are byte-identical (data parquet, videos, info.json...); redacted text
    # is the source with each secret swapped for a placeholder; parquet schemas and other columns are untouched
    src = {**{f"agent-run/{k}": v for k, v in files(run).items()}, "labels/labels.jsonl": labels.read_bytes()}
    counted = {f["path"]: f["redactions"] for f in doc["files"]}
    assert set(counted) | {"MANIFEST.json"} == set(out)
    assert set(src) - set(counted) == set()  # a finished run holds no run.lock (it exists only while held)
    assert any(p.endswith(".mp4") for p in counted) and any(p.startswith("agent-run/data/") for p in counted)
    # run.json's spec_identity hashes the spec, which held the e-mail: released as the redacted spec's identity
    recorded_identity = json.loads(src["agent-run/run.json"])["spec_identity"]
    assert log["spec_identity"] == EvalSpec.model_validate(log["spec"]).identity() != recorded_identity
    for rel, n in counted.items():
        if n == 0:
            assert out[rel] == src[rel], rel
        elif not rel.endswith(".parquet"):
            text = (
                out[rel]
                .decode()
                .replace(f'"spec_identity": "{log["spec_identity"]}"', f'"spec_identity": "{recorded_identity}"')
            )
            assert masked_release(text) == masked_source(src[rel].decode()), rel
    for rel in ("agent-run/meta/episodes/chunk-000/file-000.parquet", "agent-run/meta/tasks.parquet"):
        a, b = pq.read_table(run.parent / rel), pq.read_table(tmp_path / "rel" / rel)
        assert a.schema == b.schema and a.schema.metadata == b.schema.metadata
        assert json.dumps(b.to_pylist()) == json.dumps(a.to_pylist()).replace(EMAIL, "<REDACTED:email:1>")


def test_the_released_run_grades_exactly_as_the_original(source: tuple[Path, Path], tmp_path: Path) -> None:
    run, labels = source
    build_release([run], tmp_path / "rel", labels=[labels])
    original, released = grade(run).to_json(), grade(tmp_path / "rel" / "agent-run").to_json()
    assert original["status"] == "OK", original["reasons"]
    # the graded episodes name their instruction, which carried the planted address: redacted, nothing else differs
    assert EMAIL in json.dumps(original) and EMAIL not in json.dumps(released)
    assert json.dumps(released) == json.dumps(original).replace(EMAIL, "<REDACTED:email:1>")


@pytest.mark.slow
def test_a_second_release_is_byte_identical_and_dry_run_writes_nothing(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    run, labels = source
    first = build_release([run], tmp_path / "one", labels=[labels])
    build_release([run], tmp_path / "two", labels=[labels])
    assert files(tmp_path / "one") == files(tmp_path / "two")
    manifest = json.loads((tmp_path / "one" / "MANIFEST.json").read_text())
    assert manifest == json.loads(json.dumps(first))
    assert manifest["date"] == json.loads((run / "run.json").read_text())["executions"][-1]["finished"]
    on_disk = files(tmp_path / "one")
    for f in manifest["files"]:
        assert hashlib.sha256(on_disk[f["path"]]).hexdigest() == f["release_sha256"]
    dry = build_release([run], tmp_path / "dry", labels=[labels], dry_run=True)
    assert not (tmp_path / "dry").exists()
    assert dry["redactions"] == first["redactions"]
    proc = invoke("release", run, "--out", tmp_path / "cli", "--labels", labels, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "would replace" in proc.stdout and "openai_key -> <REDACTED:api_key:" in proc.stdout
    assert not (tmp_path / "cli").exists()


def test_a_release_into_or_around_a_source_is_refused_and_sources_stay_untouched(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = source
    before = files(run)
    for bad in (run, run / "release", run.parent):
        with pytest.raises(ConfigError):
            build_release([run], bad)
    assert not (run / "release").exists()
    proc = invoke("release", run, "--out", run / "sub")
    assert proc.returncode == 2  # the one check of every output option (issue 42, item 8)
    assert (
        proc.stderr
        == f"error: --out {run / 'sub'} lies inside the run directory {run}; write outputs elsewhere (a run directory holds only what its recorder wrote)\n"
    )
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    with pytest.raises(ConfigError, match="nowhere does not exist"):
        build_release([tmp_path / "nowhere"], tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(ConfigError, match="not an empty directory"):
        build_release([copy], tmp_path / "full")
    assert files(run) == before


@pytest.mark.parametrize(
    "text",
    [
        "scripted-reach-agent-local-solver-20261201T000912Z",  # a default run name
        "metaworld-pick-place-v3-agent-openai-gpt-4o-20261201T000912Z",
        "scripted_reach-agent_local_solver-20261201T000912Z",  # a default run name before issue 29
        "metaworld_pick-place-v3-agent_openai_gpt-4o-20261201T000912Z",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAEAAAABACAIAAAAlC+aJAAAA" + "Qk9YZ3p1" * 40,
        "/work/runs/pick-place/meta/episodes/chunk-000/file-000.parquet",
        "pick up the puck and place it at the goal",
        "chatcmpl-1 call_0 tok=5",
    ],
)
def test_ordinary_run_text_is_not_mistaken_for_a_secret(text: str) -> None:
    assert Scanner(set(), set(), environ={}).find(text) == []


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("key sk-proj-Zq8xW3vB7nM2kL5pR9tY1uI4oP6aS0dF end", "openai_key"),
        ("AWS AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("Authorization: Bearer abc.DEF-123_456", "bearer_token"),
        ("password=hunter2hunter2", "secret_field"),
        ("cd /Users/bob/x", "home_path"),
        ("cd /root/x", "home_path"),
        ("mail me: first.last@sub.example.co.uk", "email"),
        ("on workstation-42 today", "host_name"),
    ],
)
def test_each_rule_finds_its_kind(text: str, rule: str) -> None:
    found = Scanner({"workstation-42"}, set(), environ={}).find(text)
    assert [f.rule for f in found] == [rule]


def test_a_labels_annotator_that_is_the_os_user_is_redacted_even_when_a_common_name(
    source: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard records the OS user as the annotator by default; "root" is too common a word to redact
    everywhere, so it is redacted as the value of the annotator field."""
    run, _ = source
    monkeypatch.setenv("USER", "root")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"episode": f"{run_key(run)}/0", "label": "good", "annotator": "root"}) + "\n")
    build_release([run], tmp_path / "rel", labels=[labels])
    (released,) = (tmp_path / "rel" / "labels" / "labels.jsonl").read_text().splitlines()
    assert json.loads(released)["annotator"].startswith("<REDACTED:user_name:")
    assert json.loads(released)["label"] == "good"
    # the dashboard's sidecar form, where the episode key is a JSON key: MANIFEST.json is released too, so the
    # annotator's field path spells that key as the release does (its host replaced), and the source's key is nowhere
    sidecar = tmp_path / "labels.json"
    entry = {"label": "good", "annotator": "root"}
    sidecar.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {f"{run_key(run)}/0": entry}}))
    build_release([run], tmp_path / "rel2", labels=[sidecar])
    as_released = run_key(tmp_path / "rel2" / run.name)
    manifest = json.loads((tmp_path / "rel2/MANIFEST.json").read_text())
    fields = [r["field"] for r in manifest["redactions"] if r["file"] == "labels/labels.json"]
    assert f"labels.{as_released}/0.annotator" in fields and run_key(run) not in json.dumps(manifest)


def test_a_damaged_run_json_is_a_one_line_error_naming_it_and_nothing_is_written(tmp_path: Path) -> None:
    run = tmp_path / "damaged"
    run.mkdir()
    (run / "run.json").write_text("{not json")
    proc = invoke("release", run, "--out", tmp_path / "out")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: {run / 'run.json'} is not a rollbench run log: it is not readable JSON")
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def _two_runs_and_labels(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """Runs ``runs/pick`` and ``runs/video`` (2 episodes each), a dashboard sidecar labelling one episode of each
    (with a note) and the run keys ``host/robot/name`` as run.json records them."""
    keys = {}
    for name in ("pick", "video"):
        evaluate(out=tmp_path / "runs" / name, env="scripted/reach", policy="zero", episodes=2, max_steps=2)
        ident = json.loads((tmp_path / "runs" / name / "run.json").read_text())["identity"]
        keys[name] = f"{ident['host']}/{ident['robot']}/{ident['name']}"
    labels = tmp_path / "runs" / "labels.json"
    entries = {f"{keys['pick']}/0": {"label": "success", "note": "fine"},
               f"{keys['video']}/0": {"label": "failed", "note": "SECRET note of the other run"}}  # fmt: skip
    labels.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": entries}))
    return tmp_path / "runs" / "pick", labels, keys


@pytest.mark.slow
def test_a_release_carries_only_the_released_runs_labels_and_its_dry_run_lists_exactly_them(tmp_path: Path) -> None:
    """Issue 30, item 18, in both label forms (the dashboard's sidecar and JSON lines)."""
    run, labels, keys = _two_runs_and_labels(tmp_path)
    build_release([run], tmp_path / "rel", labels=[labels])
    released = json.loads((tmp_path / "rel/labels/labels.json").read_text())
    assert list(released["labels"]) == [f"{run_key(tmp_path / 'rel/pick')}/0"]  # its host redacted like run.json's
    assert b"SECRET" not in b"".join(p.read_bytes() for p in (tmp_path / "rel").rglob("*") if p.is_file())
    dry = invoke("release", run, "--out", tmp_path / "dry", "--labels", labels, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    listed = [ln for ln in dry.stdout.splitlines() if ln.startswith("labels/labels.json  ") and "->" not in ln]
    # spelled as the release spells them (host replaced), though the dry run writes nothing
    assert listed == [f"labels/labels.json  {run_key(tmp_path / 'rel/pick')}/0"]
    assert "1 label(s) of the released runs; 1 of other runs left out" in dry.stdout
    lines = tmp_path / "l.jsonl"
    lines.write_text(json.dumps({"episode": f"{keys['video']}/1", "note": "SECRET"}) + "\n"
                     + json.dumps({"episode": f"{keys['pick']}/1", "label": "failed"}) + "\n")  # fmt: skip
    doc = build_release([run], tmp_path / "rel2", labels=[lines])
    assert doc["label_entries"]["labels/l.jsonl"] == {
        "kept": [f"{run_key(tmp_path / 'rel2/pick')}/1"],  # MANIFEST.json is released too: no source host in it
        "left_out": 1,
        "left_out_unrecorded": [],
    }
    (kept,) = (tmp_path / "rel2/labels/l.jsonl").read_text().splitlines()
    assert json.loads(kept) == {"episode": f"{run_key(tmp_path / 'rel2/pick')}/1", "label": "failed"}


@pytest.mark.slow
@pytest.mark.parametrize("episode", ["2", "7", "01", "-1", "0/x", "999999999999"])
def test_a_label_of_an_episode_the_released_run_does_not_record_is_dropped_and_said(
    tmp_path: Path, episode: str
) -> None:
    """Issue 30 (a fresh hostile attempt): a label whose key names a released run but an episode it does not record
    (the run records episodes 0 and 1: the recording arguments) is dropped in both label forms, listed by key in
    the dry run and in MANIFEST.json's ``label_entries``; the recorded episode's label is kept."""
    run, labels, keys = _two_runs_and_labels(tmp_path)
    doc = json.loads(labels.read_text())
    ghost = f"{keys['pick']}/{episode}"
    doc["labels"][ghost] = {"label": "failed", "note": "an episode that was never recorded"}
    labels.write_text(json.dumps(doc))
    built = build_release([run], tmp_path / "rel", labels=[labels])
    released = json.loads((tmp_path / "rel/labels/labels.json").read_text())
    as_released = run_key(tmp_path / "rel/pick")  # HOST/ROBOT/NAME with the host replaced, as MANIFEST.json says it
    assert list(released["labels"]) == [f"{as_released}/0"]
    # a key with more than one '/' after the run's is not an episode key of that run: counted with the other runs'
    unrecorded = [] if "/" in episode else [f"{as_released}/{episode}"]
    assert built["label_entries"]["labels/labels.json"] == {
        "kept": [f"{as_released}/0"],
        "left_out": 2 - len(unrecorded),
        "left_out_unrecorded": unrecorded,
    }
    dry = invoke("release", run, "--out", tmp_path / "dry", "--labels", labels, "--dry-run")
    assert dry.returncode == 0 and not (tmp_path / "dry").exists(), dry.stderr
    said = " ".join(dry.stdout.split())
    if unrecorded:
        assert f"1 of episodes the released runs do not record left out ({unrecorded[0]})" in said, dry.stdout
    if "/" in episode:
        return  # a JSON-lines file with a line that is no episode key is released whole (tested above)
    lines = tmp_path / "l.jsonl"
    lines.write_text(json.dumps({"episode": ghost, "label": "failed"}) + "\n"
                     + json.dumps({"episode": f"{keys['pick']}/1", "label": "success"}) + "\n")  # fmt: skip
    entries = build_release([run], tmp_path / "rel2", labels=[lines])["label_entries"]["labels/l.jsonl"]
    assert entries["kept"] == [f"{as_released}/1"] and entries["left_out_unrecorded"] == unrecorded
    assert keys["pick"] not in (tmp_path / "rel2/MANIFEST.json").read_text()
    assert len((tmp_path / "rel2/labels/l.jsonl").read_text().splitlines()) == 1
