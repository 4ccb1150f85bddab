"""Nothing a release carries is a function of a value it redacted (hostile round 13, F8), and a video's bytes are
searched for e-mail addresses, home paths and long names as well as keys (F12).

F8's oracle is the attack itself: put each guess of a dictionary (the true values among them) in place of every
placeholder of the released run.json and hash it, as someone holding only the release would, and look for that
hash anywhere in the release (MANIFEST.json and every released file; the spec's 16-digit identity with
:meth:`EvalSpec.identity`, the public way to hash a spec). The same attack run against the recorded run finds the
true values, so the test can fail. F12's oracle: a text planted in an mp4 ``free`` box (the container still opens),
refused by name; the run's own recorded videos and 200 MB of random bytes give no finding."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.spec import EvalSpec

HOST = "gpu01"  # the run's identity host: redacted everywhere (3+ characters, not a common word)
EMAIL = "alice@example.com"  # in the instruction: inside the spec that spec_identity hashes
GUESSES = ["bob@example.com", EMAIL, "carol@example.org", "gpu00", HOST, "node1", "vm"]
VIDEO = "videos/observation.images.top/chunk-000/file-000.mp4"
PLACEHOLDER = re.compile(r"<REDACTED:([a-z_]+):(\d+)>|REDACTED-([a-z_]+)-(\d+)-")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("derived") / "run"
    evaluate(
        out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1, video=True,
        host_label=HOST, instruction=f"reach; questions to {EMAIL}",
    )  # fmt: skip
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "src" / "run"
    shutil.copytree(recorded, out)
    return out


def _release(run: Path, out: Path) -> tuple[int, str, str]:
    r = invoke("release", run, "--out", out, "--date", "2026-01-01")
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stdout, r.stderr


def _candidates(text: str) -> dict[str, str]:
    """The released text with each redacted value's placeholders (both forms of one value) replaced by a guess,
    for every combination of guesses over the values (``"email:1=G1, host_name:1=G2"``), as an attacker would."""
    out = {"": text}
    for category, n in sorted({(a or c, b or d) for a, b, c, d in PLACEHOLDER.findall(text)}):
        pat = re.compile(rf"<REDACTED:{category}:{n}>|REDACTED-{category}-{n}-")
        out = {
            f"{name}, {category}:{n}={g}".lstrip(", "): pat.sub(lambda _m, g=g: g, cand)
            for name, cand in out.items()
            for g in GUESSES
        }
    return out


def _recovered(run_json: str, released: Path) -> list[str]:
    """The guesses whose run.json candidate hashes to a digest the release holds (MANIFEST.json or any file), or
    whose spec hashes to the released spec_identity."""
    everything = b"".join(p.read_bytes() for p in sorted(released.rglob("*")) if p.is_file())
    spec = json.loads(run_json)["spec"]
    found = []
    for name, cand in _candidates(run_json).items():
        if hashlib.sha256(cand.encode()).hexdigest().encode() in everything:
            found.append(f"file hash: {name}")
        doc = json.loads(cand)  # a guess put into the spec, hashing to the identity recorded beside it
        if doc["spec"] != spec and EvalSpec.model_validate(doc["spec"]).identity() == doc["spec_identity"]:
            found.append(f"spec_identity: {name}")
    return found


def test_the_dictionary_attack_recovers_nothing_from_a_release(run: Path, tmp_path: Path) -> None:
    code, _, err = _release(run, tmp_path / "rel")
    assert code == 0, err
    text = (tmp_path / "rel/run/run.json").read_text()
    assert HOST not in text and EMAIL not in text and "<REDACTED:email:1>" in text
    assert _recovered(text, tmp_path / "rel") == []
    # the same attack on what was recorded finds the true values: the attack works, the release defeats it
    old_manifest = {"files": [{"source_sha256": hashlib.sha256((run / "run.json").read_bytes()).hexdigest()}]}
    (tmp_path / "as_round12").mkdir()  # what release wrote before: the recorded hash in MANIFEST.json, the identity
    (tmp_path / "as_round12/MANIFEST.json").write_text(json.dumps(old_manifest))
    was = json.loads((run / "run.json").read_text())["spec_identity"]
    (tmp_path / "as_round12/run.json").write_text(re.sub(r'"spec_identity": "\w+"', f'"spec_identity": "{was}"', text))
    attacked = _recovered((tmp_path / "as_round12/run.json").read_text(), tmp_path / "as_round12")
    truth = f"email:1={EMAIL}, host_name:1={HOST}, host_name:2=vm"
    assert [a for a in attacked if a.startswith("file hash")] == [f"file hash: {truth}"], attacked
    spec_hits = [a for a in attacked if a.startswith("spec_identity")]
    assert len(spec_hits) == len(GUESSES) ** 2 and all(f"email:1={EMAIL}," in a for a in spec_hits), attacked
    assert "spec_identity is released as the identity of the redacted spec" in err


def test_manifest_holds_no_field_derived_from_a_redacted_source(run: Path, tmp_path: Path) -> None:
    code, _, err = _release(run, tmp_path / "rel")
    assert code == 0, err
    manifest = json.loads((tmp_path / "rel/MANIFEST.json").read_text())
    assert manifest["rollbench_release"] == 3
    sources = {p.relative_to(run.parent).as_posix(): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    changed = []
    for f in manifest["files"]:
        assert set(f) == {"path", "unchanged", "release_sha256", "bytes", "redactions"}, f
        released = (tmp_path / "rel" / f["path"]).read_bytes()
        assert f["release_sha256"] == hashlib.sha256(released).hexdigest() and f["bytes"] == len(released)
        source = sources[f["path"].replace("REDACTED-host_name-1-", HOST)]
        assert f["unchanged"] == (source == released)
        if source != released:  # a redacted file: neither its recorded hash nor its size is anywhere in the release
            changed.append(f["path"])
            assert hashlib.sha256(source).hexdigest() not in json.dumps(manifest)
            assert f["bytes"] != len(source) or f["redactions"] > 0
    holding = [p for p, raw in sources.items() if EMAIL.encode() in raw or HOST.encode() in raw]  # grep's answer
    assert sorted(changed) == sorted(holding) and len(changed) == 4  # run.json, tasks and both episodes files


def test_a_redacted_spec_gets_the_identity_of_its_released_form(run: Path, tmp_path: Path) -> None:
    code, _, err = _release(run, tmp_path / "rel")
    assert code == 0, err
    doc = json.loads((tmp_path / "rel/run/run.json").read_text())
    spec = doc["spec"]
    assert spec["instruction"] == "reach; questions to <REDACTED:email:1>"
    assert doc["spec_identity"] == EvalSpec.model_validate(spec).identity()
    assert doc["spec_identity"] != json.loads((run / "run.json").read_text())["spec_identity"]
    assert invoke("grade", tmp_path / "rel/run").returncode == 0


def _free_box(video: Path, payload: bytes) -> None:
    with open(video, "ab") as f:  # a top-level mp4 box: the container still opens and plays
        f.write(struct.pack(">I", 8 + len(payload)) + b"free" + payload)


@pytest.mark.parametrize(
    ("payload", "rule"),
    [
        (b"user alice@example.com at /home/alice/proj", "email"),
        (b"encoded by someone in /home/alice/proj/out", "home_path"),
        (b"encoded on workstation-gpu01 (x264)", "host_name"),
        (b"db login token=Hunter2Hunter2xyz at prod", "secret_field"),  # a named credential (hostile round 18, F3)
    ],
)
def test_a_name_address_or_home_path_in_a_videos_bytes_refuses_the_release(
    run: Path, tmp_path: Path, payload: bytes, rule: str
) -> None:
    if rule == "host_name":
        shutil.rmtree(run)
        evaluate(out=run, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1, video=True,
                 host_label="workstation-gpu01")  # fmt: skip
    _free_box(run / VIDEO, payload)
    code, _, err = _release(run, tmp_path / "rel")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert f"{VIDEO}: the video holds a match of rule {rule} in its bytes" in lines[0]
    assert b"alice" not in lines[0].encode() and "workstation" not in lines[0]
    assert not (tmp_path / "rel").exists()


def test_recorded_videos_pass_and_the_release_says_what_of_them_was_searched(run: Path, tmp_path: Path) -> None:
    code, out, err = _release(run, tmp_path / "rel")
    assert code == 0, err
    assert (tmp_path / "rel/run" / VIDEO).read_bytes() == (run / VIDEO).read_bytes()
    said = [ln for ln in out.splitlines() if ln.startswith("videos released as recorded:")]
    assert len(said) == 1 and "16+ printable characters" in said[0] and "6+ characters" in said[0]
    assert "video_bytes" in json.loads((tmp_path / "rel/MANIFEST.json").read_text())["filters"]


@pytest.mark.slow
def test_random_bytes_hold_no_text_finding() -> None:
    """200 MB of random bytes (what compressed video looks like to a regex): no e-mail, home path or long name in an
    ASCII or UTF-16 text run."""
    from rollbench.release.kinds import text_runs
    from rollbench.release.rules import Scanner

    scanner = Scanner({"workstation-gpu01"}, {"alice"}, None)
    raw = os.urandom(200_000_000)
    assert [f.rule for _, run in text_runs(raw) for f in scanner.find(run)] == []
