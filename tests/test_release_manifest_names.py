"""What MANIFEST.json and the released files keep of user-given names (hostile round 19, a: F2 and F4).

F4: MANIFEST.json listed every ``--rules`` pattern's regex and every ``allow`` regex, so a pattern written to hide a
password, an internal host or an environment secret's value published it; it now names patterns by name and
category and counts the allow patterns, and its final bytes are scanned before they are written (a finding refuses
the release, nothing written). F2: a label's annotator was redacted only as its field's value; the same name in the
label's note, its history or the run's notes was released. A name release redacts in a user field is now learnt
and replaced wherever it stands as a whole word, as written. Oracles: the planted texts searched for in every
released file's bytes, released texts written out by hand, MANIFEST.json and parquet files read back with json and
pyarrow."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.release.first_pass import learn_values
from rollbench.release.rules import Scanner

DATE = "2026-01-01"
SERVICE_TOKEN = "Zq7vK2mP9xR4tL8wN3bFq"  # an environment secret's value
AS_RELEASER = {"USER": "releaser", "LOGNAME": "releaser", "MY_SERVICE_TOKEN": SERVICE_TOKEN}
NAME, OTHER = "kwendeborn", "mlindqvist"  # annotators: labels made under other accounts than the releasing one
USER_PLACEHOLDER = re.compile(r"<REDACTED:user_name:\d+>")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rel19") / "run"
    evaluate(out=out, env="scripted/reach", policy="scripted-expert", episodes=1, max_steps=3, seed=1)
    return out


def run_with(recorded: Path, tmp_path: Path, notes: dict[str, str]) -> Path:
    """A copy of the recorded run with ``notes/NAME`` text files added."""
    run = tmp_path / "src" / "run"
    shutil.copytree(recorded, run)
    (run / "notes").mkdir()
    for name, body in notes.items():
        (run / "notes" / name).write_text(body)
    return run


def holding(rel: Path, needle: str) -> list[str]:
    """Every released file whose name or bytes hold ``needle`` (as written)."""
    return sorted(
        str(p.relative_to(rel))
        for p in rel.rglob("*")
        if p.is_file() and (needle.encode() in p.read_bytes() or needle in str(p.relative_to(rel)))
    )


def episode_key(run: Path) -> str:
    ident = json.loads((run / "run.json").read_text())["identity"]
    return f"{ident['host']}/{ident['robot']}/{ident['name']}/0"


def label_file(
    path: Path, key: str, annotator: str, note: str, history: list[tuple[str, str]], ascii_only: bool = True
) -> Path:
    """A dashboard label file as a hand would write it (indent 1: not a style rollbench writes, so it is redacted in
    place; UTF-8 text unless ``ascii_only``), one label of ``key`` with ``history`` entries ``(annotator, note)``."""
    entry = {
        "label": "succeeded",
        "note": note,
        "annotator": annotator,
        "labeled_at": "2026-12-01T00:00:00Z",
        "history": [{"label": "failed", "note": n, "annotator": a, "labeled_at": "2026-11-30T00:00:00Z"}
                    for a, n in history],
    }  # fmt: skip
    doc = {"version": 1, "rubric": {"name": "outcome-v1", "version": 1}, "labels": {key: entry}}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=ascii_only), encoding="utf-8")
    return path


# ---- F4: MANIFEST.json never holds a --rules pattern's text; its final bytes are scanned -------------------------


RULES = {
    "patterns": [
        {"name": "internal_hosts", "regex": r"gpu-cluster-zeta\.internal\.acme", "category": "host_name"},
        {"name": "db_password", "regex": "Blue-Falcon-77", "category": "credential"},
        {"name": "svc_token", "regex": SERVICE_TOKEN, "category": "credential"},  # an environment secret's value
    ],
    "literals": [{"value": "Project-Nightjar", "category": "codename"}],
    "allow": [r"Blue-Falcon-7[0-9]-public", r"build-host-17\.corp\.example"],  # a host name in an allow pattern
}
PLANTED = ["gpu-cluster-zeta", "Blue-Falcon-77", SERVICE_TOKEN, "Project-Nightjar", "build-host-17", "Falcon-7[0-9]"]


def test_manifest_names_rules_patterns_by_name_and_category_and_only_counts_allow_patterns(
    recorded: Path, tmp_path: Path
) -> None:
    note = (
        f"trained on gpu-cluster-zeta.internal.acme, db pw Blue-Falcon-77, svc {SERVICE_TOKEN} for Project-Nightjar\n"
    )
    run = run_with(recorded, tmp_path, {"n.txt": note})
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    rel = tmp_path / "rel"
    done = invoke("release", run, "--rules", tmp_path / "rules.json", "--out", rel, "--date", DATE, env=AS_RELEASER)
    assert done.returncode == 0, done.stderr
    assert (rel / "run/notes/n.txt").read_text() == (
        "trained on <REDACTED:host_name:1>, db pw <REDACTED:credential:1>, svc <REDACTED:env_secret:1> for "
        "<REDACTED:codename:1>\n"
    )
    assert {needle: holding(rel, needle) for needle in PLANTED} == {needle: [] for needle in PLANTED}
    manifest = json.loads((rel / "MANIFEST.json").read_text())
    assert manifest["rollbench_release"] == 3
    assert manifest["filters"]["extra_rules"] == [
        {"name": "internal_hosts", "category": "host_name"},
        {"name": "db_password", "category": "credential"},
        {"name": "svc_token", "category": "credential"},
    ]
    assert manifest["filters"]["allow"] == {"patterns": 2, "texts": "never shown"}
    assert manifest["filters"]["literal_names"]["custom"] == 1


@pytest.mark.parametrize(
    ("rules", "culprit"),
    [
        ({"patterns": [{"name": SERVICE_TOKEN, "regex": "x"}]}, "patterns[0]'s name holds a match of rule "
         "environment:MY_SERVICE_TOKEN"),
        ({"patterns": [{"name": "db_Blue-Falcon-77", "regex": "Blue-Falcon-77"}]}, "patterns[0]'s name holds a match "
         "of rule db_Blue-Falcon-77"),  # its own pattern's match
        ({"patterns": [{"name": "h", "regex": "y", "category": "Project-Nightjar"}],
          "literals": [{"value": "Project-Nightjar"}]}, "patterns[0]'s category holds a match of rule literal"),
        ({"literals": [{"value": "abc", "category": SERVICE_TOKEN}]}, "literals[0]'s category holds a match of rule "
         "environment:MY_SERVICE_TOKEN"),
    ],
)  # fmt: skip
def test_a_rules_name_or_category_holding_what_release_replaces_is_refused_naming_the_entry(
    recorded: Path, tmp_path: Path, rules: dict[str, object], culprit: str
) -> None:
    """MANIFEST.json shows each pattern's name and category (and the placeholders show categories): one that holds a
    value release replaces is bad input, refused before anything is written."""
    run = run_with(recorded, tmp_path, {})
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    rel = tmp_path / "rel"
    done = invoke("release", run, "--rules", tmp_path / "rules.json", "--out", rel, "--date", DATE, env=AS_RELEASER)
    what = culprit.split("'s ")[1].split(" ")[0]
    assert (done.returncode, done.stderr) == (
        2,
        f"error: --rules: {culprit}, a value release replaces, and MANIFEST.json shows it; give the entry another "
        f"{what}\n",
    )
    assert not rel.exists()


def test_a_manifest_still_holding_a_rules_pattern_is_refused_and_nothing_is_written(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan of MANIFEST.json's final bytes, against the F4 bug put back: the filters list each pattern's regex
    (the first, ``gpu-cluster-zeta\\.internal\\.acme``, holds no match of itself: the second is found)."""
    from rollbench.release import copy as release_copy

    real = release_copy.manifest

    def with_regexes(*args: object, **kwargs: object) -> dict[str, object]:
        doc = real(*args, **kwargs)  # type: ignore[arg-type]
        for shown, pattern in zip(doc["filters"]["extra_rules"], RULES["patterns"], strict=True):
            shown["regex"] = pattern["regex"]
        return doc

    monkeypatch.setattr(release_copy, "manifest", with_regexes)
    run = run_with(recorded, tmp_path, {"n.txt": "db pw Blue-Falcon-77\n"})
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    rel = tmp_path / "rel"
    for extra in ([], ["--dry-run"]):
        done = invoke("release", run, "--rules", tmp_path / "rules.json", "--out", rel, "--date", DATE, *extra,
                      env=AS_RELEASER)  # fmt: skip
        assert (done.returncode, done.stderr) == (
            1,
            "error: MANIFEST.json would hold a match of rule db_password at filters.extra_rules[1].regex, a value "
            "the release replaces; the release is refused (a bug of release: please report it) (nothing was "
            "written)\n",
        )
        assert not rel.exists()


@pytest.mark.parametrize(
    ("planted", "rule"),
    [
        (f"svc {SERVICE_TOKEN.lower()}", "environment:MY_SERVICE_TOKEN"),  # in another letter case
        ("pw hunter2hunter2x", "learnt:secret_field"),  # a value learnt as a credential (notes/config.json)
        (f"by {NAME}", "user_name"),  # a name learnt from the label's annotator
        ("at /home/alice/x", "home_path"),
        ("lab-Project-Nightjar", "literal"),  # a --rules literal
    ],
)
def test_a_manifest_holding_a_value_release_replaces_is_refused_naming_the_place(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str, rule: str
) -> None:
    from rollbench.release import copy as release_copy

    real = release_copy.manifest

    def with_warning(*args: object, **kwargs: object) -> dict[str, object]:
        doc = real(*args, **kwargs)  # type: ignore[arg-type]
        doc["excluded"].append({"path": "run/x", "why": planted})
        return doc

    monkeypatch.setattr(release_copy, "manifest", with_warning)
    run = run_with(recorded, tmp_path, {"config.json": '{"password": "hunter2hunter2x"}'})
    labels = label_file(tmp_path / "labels.json", episode_key(run), NAME, "ok", [])
    (tmp_path / "rules.json").write_text(json.dumps({"literals": [{"value": "Project-Nightjar"}]}))
    rel = tmp_path / "rel"
    done = invoke("release", run, "--labels", labels, "--rules", tmp_path / "rules.json", "--out", rel, "--date", DATE,
                  env=AS_RELEASER)  # fmt: skip
    assert (done.returncode, done.stderr) == (
        1,
        f"error: MANIFEST.json would hold a match of rule {rule} at excluded[0].why, a value the release replaces; "
        "the release is refused (a bug of release: please report it) (nothing was written)\n",
    )
    assert not rel.exists()


def test_manifest_date_is_never_a_recorded_time_that_is_not_a_date(recorded: Path, tmp_path: Path) -> None:
    """A handed-over run.json's ``provenance.created`` can be any text; MANIFEST.json's date (released unredacted)
    takes only times of the ISO 8601 form, else the latest such time (here an execution's end)."""
    run = run_with(recorded, tmp_path, {})
    doc = json.loads((run / "run.json").read_text())
    doc["provenance"]["created"] = "9999 by carol@corp-secret.example"  # sorts after every real time
    (run / "run.json").write_text(json.dumps(doc, indent=2))
    rel = tmp_path / "rel"
    done = invoke("release", run, "--out", rel, env=AS_RELEASER)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((rel / "MANIFEST.json").read_text())
    assert manifest["date"] == max(e["finished"] for e in doc["executions"])
    assert holding(rel, "carol@corp-secret") == []
    # no value of the manifest is (or starts with) the planted time; a bare '9999' search also hit SHA-256 digests
    assert [v for v in _strings(manifest) if v.startswith("9999")] == []


# ---- F2: a name release redacts as an annotator is replaced wherever it stands ------------------------------------


def test_an_annotators_name_is_replaced_wherever_it_stands_with_its_fields_placeholder(
    recorded: Path, tmp_path: Path
) -> None:
    notes = {
        "README.txt": f"reviewed by {NAME}; questions to {NAME} or {OTHER} on chat\n",
        "people.json": json.dumps({NAME: "lead", "team": [f"{OTHER} (second)", "ok"]}),  # a key and an item
    }
    run = run_with(recorded, tmp_path, notes)
    pq.write_table(pa.table({"who": [f"checked_by_{NAME}", "nobody here"]}), run / "notes/who.parquet")
    labels = label_file(tmp_path / "labels.json", episode_key(run), NAME, f"{NAME}: clean grasp",
                        [(OTHER, f"first pass by {OTHER}")])  # fmt: skip
    rel = tmp_path / "rel"
    done = invoke("release", run, "--labels", labels, "--out", rel, "--date", DATE, env=AS_RELEASER)
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads((rel / "labels/labels.json").read_text())["labels"].values()
    one, two = entry["annotator"], entry["history"][0]["annotator"]
    assert USER_PLACEHOLDER.fullmatch(one) and USER_PLACEHOLDER.fullmatch(two) and one != two
    assert (entry["note"], entry["history"][0]["note"]) == (f"{one}: clean grasp", f"first pass by {two}")
    assert (rel / "run/notes/README.txt").read_text() == f"reviewed by {one}; questions to {one} or {two} on chat\n"
    assert json.loads((rel / "run/notes/people.json").read_text()) == {one: "lead", "team": [f"{two} (second)", "ok"]}
    assert pq.read_table(rel / "run/notes/who.parquet").column("who").to_pylist() == [
        f"checked_by_{one}",
        "nobody here",
    ]
    assert holding(rel, NAME) == [] and holding(rel, OTHER) == []
    manifest = json.loads((rel / "MANIFEST.json").read_text())
    assert manifest["filters"]["learnt_names"] == {
        "fields": ["annotator", "operator", "user", "user_name", "username"],
        "min_length": 3,
        "max_length": 256,
        "used": 2,
        "not_used": 0,
        "values": "never shown",
    }


def learnt_from(annotators: list[str], run_names: set[str]) -> Scanner:
    """A scanner (this machine's user ``releaser``) that has learnt from a label file of ``annotators``."""
    scanner = Scanner(set(), {"releaser"}, environ={})
    labels = {"labels": {f"h/r/n/{i}": {"label": "good", "annotator": a} for i, a in enumerate(annotators)}}
    learn_values(scanner, [(json.dumps(labels).encode(), "json")], run_names)
    return scanner


def test_a_learnt_name_is_replaced_as_a_whole_word_as_written() -> None:
    scanner = learnt_from([NAME, "ana"], set())
    text = f"{NAME}, {NAME}s {NAME.title()} {NAME}2 {NAME}_x {NAME}-x x{NAME} (ana) anaïs ana. Ana"
    assert scanner.redact(text)[0] == (
        "<REDACTED:user_name:1>, kwendeborns Kwendeborn kwendeborn2 <REDACTED:user_name:1>_x <REDACTED:user_name:1>-x "
        "xkwendeborn (<REDACTED:user_name:2>) anaïs <REDACTED:user_name:2>. Ana"
    )


def test_annotator_names_that_are_common_short_or_words_of_run_names_are_replaced_only_in_their_field() -> None:
    scanner = learnt_from(["root", "al", "expert", "unknown", "releaser", "Reach", "x" * 257], {"scripted-expert"})
    assert (scanner.names.names, scanner.names.not_used) == ({"Reach": "annotator"}, 5)  # releaser: a user already
    text = "root and al ran scripted-expert as unknown; Reach it, releaser"
    assert scanner.redact(text)[0] == (
        "root and al ran scripted-expert as unknown; <REDACTED:user_name:1> it, <REDACTED:user_name:2>"
    )
    assert scanner.redact("root", "labels.h/r/n/0.annotator")[0] == "<REDACTED:user_name:3>"


def test_names_left_out_are_counted_and_said_in_one_warning_line(recorded: Path, tmp_path: Path) -> None:
    run = run_with(recorded, tmp_path, {"n.txt": "root ran the expert policy\n"})
    labels = label_file(tmp_path / "labels.json", episode_key(run), "root", "ok", [("expert", "by expert")])
    rel = tmp_path / "rel"
    done = invoke("release", run, "--labels", labels, "--out", rel, "--date", DATE, env=AS_RELEASER)
    assert done.returncode == 0, done.stderr
    assert (
        "warning: 2 names found as annotators are redacted only where found (common words, words of run names, "
        "under 3 or over 256 characters: docs/release.md)"
    ) in done.stderr.splitlines()
    assert (rel / "run/notes/n.txt").read_text() == "root ran the expert policy\n"
    (entry,) = json.loads((rel / "labels/labels.json").read_text())["labels"].values()
    assert USER_PLACEHOLDER.fullmatch(entry["annotator"]) and entry["history"][0]["note"] == "by expert"
    learnt = json.loads((rel / "MANIFEST.json").read_text())["filters"]["learnt_names"]
    assert (learnt["used"], learnt["not_used"]) == (0, 2)


def test_a_non_ascii_annotator_name_in_a_hand_written_utf8_label_file_is_replaced_everywhere(
    recorded: Path, tmp_path: Path
) -> None:
    """A label file written as UTF-8 text (not ``\\u`` escapes) in a style rollbench does not write is redacted in
    place: the name is replaced in its UTF-8 spelling (it was refused, exit 1, "could not replace it")."""
    run = run_with(recorded, tmp_path, {"n.txt": "jürgen and jürgens\n"})
    labels = label_file(tmp_path / "labels.json", episode_key(run), "jürgen", "by jürgen", [], ascii_only=False)
    assert "jürgen".encode() in labels.read_bytes()
    rel = tmp_path / "rel"
    done = invoke("release", run, "--labels", labels, "--out", rel, "--date", DATE, env=AS_RELEASER)
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads((rel / "labels/labels.json").read_text())["labels"].values()
    one = entry["annotator"]
    assert USER_PLACEHOLDER.fullmatch(one) and entry["note"] == f"by {one}"
    assert (rel / "run/notes/n.txt").read_text() == f"{one} and jürgens\n"  # a longer word keeps it
    assert holding(rel, "jürgen") == ["run/notes/n.txt"] and holding(rel, "j\\u00fcrgen") == []


def _strings(doc: object) -> list[str]:
    """Every string value and key of a JSON document."""
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (str(k), *_strings(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return [doc] if isinstance(doc, str) else []
