"""Release leaks of derived names and odd label types (hostile round 14, F6/F8): a run recorded in a directory named
after an e-mail records its identity name as that address with ``@`` made ``-``; release gives it the directory's
released name everywhere. A label's annotator given as an object or array is refused by name; inside a label file
released whole, every string under an annotator is redacted. The oracle: the planted bytes, searched for in every
released file, and the exact released names and refusal line written out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.release.copy import build_release

EMAIL_DIR = "bob.jones@corp-secret.com"
DATE = "2026-01-01"


@pytest.fixture(scope="module")
def email_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("relname") / "src" / EMAIL_DIR
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1)
    return out


def leaked(out: Path, *needles: str) -> list[str]:
    found = []
    for p in sorted(out.rglob("*")):
        if p.is_file() and any(n.encode() in p.read_bytes() or n in str(p.relative_to(out)) for n in needles):
            found.append(str(p.relative_to(out)))
    return found


def sidecar(path: Path, key: str, annotator: object) -> Path:
    entry = {"label": "succeeded", "annotator": annotator}
    path.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {key: entry}}))
    return path


def test_a_run_name_derived_from_an_email_directory_gets_the_directory_placeholder(
    email_run: Path, tmp_path: Path
) -> None:
    ident = json.loads((email_run / "run.json").read_text())["identity"]
    assert ident["name"] == "bob.jones-corp-secret.com"  # what eval recorded: the address with '@' made '-'
    key = f"{ident['host']}/{ident['robot']}/bob.jones-corp-secret.com/0"
    labels = sidecar(tmp_path / "labels.json", key, "ana")
    doc = build_release([email_run], tmp_path / "rel", labels=[labels], date=DATE)
    rel = tmp_path / "rel"
    assert sorted(p.name for p in rel.iterdir()) == ["MANIFEST.json", "REDACTED-email-1-", "labels"]
    assert json.loads((rel / "REDACTED-email-1-/run.json").read_text())["identity"] == {
        "host": "REDACTED-host_name-1-",
        "robot": "point",
        "name": "REDACTED-email-1-",
    }
    released_labels = json.loads((rel / "labels/labels.json").read_text())["labels"]
    assert list(released_labels) == ["REDACTED-host_name-1-/point/REDACTED-email-1-/0"]
    assert leaked(rel, "bob.jones", "corp-secret") == [] and "bob.jones" not in json.dumps(doc)
    assert {(r["file"], r["field"], r["placeholder"]) for r in doc["redactions"] if r["rule"] == "run_name"} == {
        ("REDACTED-email-1-/run.json", "identity.name", "REDACTED-email-1-"),
        ("labels/labels.json", "labels{key}", "REDACTED-email-1-"),
    }
    assert grade(rel / "REDACTED-email-1-").episodes_recorded == 2


@pytest.mark.parametrize(
    ("annotator", "kind"),
    [({"name": "carol.danvers"}, "an object"), (["carol.danvers"], "an array"), (7, "a number")],
)
def test_a_label_annotator_that_is_not_a_string_is_refused_naming_file_and_label(
    email_run: Path, tmp_path: Path, annotator: object, kind: str
) -> None:
    ident = json.loads((email_run / "run.json").read_text())["identity"]
    key = f"{ident['host']}/{ident['robot']}/{ident['name']}/0"
    labels = sidecar(tmp_path / "labels.json", key, annotator)
    r = invoke("release", email_run, "--labels", labels, "--out", tmp_path / "rel", "--date", DATE)
    assert r.returncode == 2 and not (tmp_path / "rel").exists()
    assert r.stderr == (
        f"error: --labels {labels}: label {key}: its annotator is {kind}, not a string (release redacts an "
        "annotator as one name); write it as a string or null\n"
    )


def test_an_annotator_object_in_an_earlier_entry_of_a_jsonl_label_is_refused(email_run: Path, tmp_path: Path) -> None:
    ident = json.loads((email_run / "run.json").read_text())["identity"]
    key = f"{ident['host']}/{ident['robot']}/{ident['name']}/1"
    line = {"episode": key, "label": "good", "annotator": "ana", "history": [{"annotator": {"name": "carol.danvers"}}]}
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps(line) + "\n")
    r = invoke("release", email_run, "--labels", labels, "--out", tmp_path / "rel", "--date", DATE)
    assert r.returncode == 2 and f"label {key}: its annotator is an object" in r.stderr


def test_every_string_under_an_annotator_in_a_label_file_released_whole_is_redacted(
    email_run: Path, tmp_path: Path
) -> None:
    labels = tmp_path / "notes.json"  # neither label form: released whole, scanned string by string
    labels.write_text(json.dumps([{"annotator": {"name": "carol.danvers", "team": ["zed.q"]}, "label": "good"}]))
    build_release([email_run], tmp_path / "rel", labels=[labels], date=DATE)
    (entry,) = json.loads((tmp_path / "rel/labels/notes.json").read_text())
    assert entry == {
        "annotator": {"name": "<REDACTED:user_name:1>", "team": ["<REDACTED:user_name:2>"]},
        "label": "good",
    }
