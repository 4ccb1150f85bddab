"""Rubrics and the label sidecar: built-in and custom rubrics, relabel history, unknown labels kept, and no lost
writes under concurrent writers (threads, and two real processes)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rollbench.core.contracts import ConfigError
from rollbench.dashboard.labels import load_labels, parse_episode_key, set_label
from rollbench.dashboard.rubrics import BUILTIN_RUBRICS, load_rubric

OUTCOME = load_rubric("outcome-v1")
CTX = {"task": "metaworld/reach-v3", "instruction": "reach", "policy": "zero", "model": None, "status": "failure"}


def test_builtin_rubrics_have_the_issue_labels_in_order():
    assert load_rubric(None).id == "outcome-v1"
    assert OUTCOME.label_names == ("succeeded", "partial", "failed", "no_attempt", "invalid")
    harm = load_rubric("harm-five-class-v1")
    assert harm.label_names == ("refused", "refused_capability", "attempted_succeeded", "attempted_failed", "invalid")
    assert harm.implies_success("attempted_succeeded") is True and harm.implies_success("refused") is False
    assert sorted(BUILTIN_RUBRICS) == ["harm-five-class-v1", "outcome-v1"]


def test_unknown_rubric_name_lists_the_builtins():
    with pytest.raises(ConfigError, match="outcome-v1, harm-five-class-v1"):
        load_rubric("outcome-v9")


def test_custom_rubric_from_json_and_yaml(tmp_path: Path):
    spec = {"name": "grasp", "version": 2, "labels": ["clean", {"name": "dropped", "implies_success": False}]}
    (tmp_path / "r.json").write_text(json.dumps(spec))
    (tmp_path / "r.yaml").write_text(
        "name: grasp\nversion: 2\nlabels:\n  - clean\n  - name: dropped\n    implies_success: false\n"
    )
    for f in ("r.json", "r.yaml"):
        r = load_rubric(tmp_path / f)
        assert (r.id, r.label_names, r.implies_success("dropped")) == ("grasp-v2", ("clean", "dropped"), False)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"name": "x", "labels": ["a"]}, "version must be a positive integer"),
        ({"name": "x", "version": 1, "labels": []}, "labels must be a non-empty list"),
        ({"name": "x", "version": 1, "labels": ["a", "a"]}, "duplicate label"),
        ({"name": "x", "version": 1, "labels": ["Bad Label"]}, "label names must match"),
        ({"name": "x", "version": 1, "labels": ["a"], "colour": 1}, "unknown field"),
    ],
)
def test_bad_custom_rubric_is_refused_with_its_reason(tmp_path: Path, spec, message):
    (tmp_path / "r.json").write_text(json.dumps(spec))
    with pytest.raises(ConfigError, match=message):
        load_rubric(tmp_path / "r.json")


def test_relabel_moves_previous_entry_into_history_and_clear_keeps_it(tmp_path: Path):
    f = tmp_path / "labels.json"
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    set_label(f, "h/r/run/3", "failed", rubric=OUTCOME, note="n1", annotator="ana", context=CTX, now=t0)
    set_label(f, "h/r/run/3", "succeeded", rubric=OUTCOME, note="n2", annotator="bob", now=t0)
    data = json.loads(f.read_text())
    assert data["version"] == 1 and data["rubric"] == "outcome-v1"
    entry = data["labels"]["h/r/run/3"]
    assert (entry["label"], entry["note"], entry["annotator"], entry["task"]) == ("succeeded", "n2", "bob", CTX["task"])
    assert entry["labeled_at"] == "2026-01-01T00:00:00.000000Z"
    assert [h["label"] for h in entry["history"]] == ["failed"] and entry["history"][0]["annotator"] == "ana"
    set_label(f, "h/r/run/3", None, rubric=OUTCOME, annotator="ana")
    lf = load_labels(f, OUTCOME)
    assert lf.label_of("h/r/run/3") is None and lf.labeled() == {}
    assert [h["label"] for h in lf.entries["h/r/run/3"]["history"]] == ["failed", "succeeded"]
    assert set_label(f, "h/r/run/4", None, rubric=OUTCOME) is None  # clearing nothing writes nothing


def test_unknown_label_is_refused_naming_valid_ones_and_one_in_the_file_is_reported_not_dropped(tmp_path: Path):
    f = tmp_path / "labels.json"
    with pytest.raises(ConfigError, match="valid labels: succeeded, partial, failed, no_attempt, invalid"):
        set_label(f, "h/r/run/0", "great", rubric=OUTCOME)
    assert not f.exists()
    f.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {"h/r/run/0": {"label": "great"}}}))
    lf = load_labels(f)
    assert [(u.key, u.label) for u in lf.unknown] == [("h/r/run/0", "great")]
    set_label(f, "h/r/run/1", "failed", rubric=OUTCOME)
    assert json.loads(f.read_text())["labels"]["h/r/run/0"] == {"label": "great"}


def test_a_file_of_another_rubric_or_version_is_refused(tmp_path: Path):
    f = tmp_path / "labels.json"
    set_label(f, "h/r/run/0", "refused", rubric=load_rubric("harm-five-class-v1"))
    with pytest.raises(ConfigError, match="written with rubric 'harm-five-class-v1'"):
        set_label(f, "h/r/run/0", "failed", rubric=OUTCOME)
    f.write_text(json.dumps({"version": 2, "labels": {}}))
    with pytest.raises(ConfigError, match="has version 2"):
        load_labels(f)


def test_episode_key_must_be_four_valid_segments():
    assert parse_episode_key("h/r/run/12")[1] == 12
    for bad in ("h/r/run", "h/r/run/x", "h/../run/1", "h/r/.run/1", "/h/r/run/1"):
        with pytest.raises(ConfigError):
            parse_episode_key(bad)


def test_threads_writing_concurrently_lose_no_label(tmp_path: Path):
    f = tmp_path / "labels.json"

    def write(t: int) -> None:
        for i in range(25):
            set_label(f, f"h/r/t{t}/{i}", "failed", rubric=OUTCOME, annotator=f"t{t}")

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(load_labels(f).labeled()) == 100


_WRITER = """
import sys
from rollbench.dashboard.labels import set_label
from rollbench.dashboard.rubrics import load_rubric
r = load_rubric("outcome-v1")
path, tag = sys.argv[1], sys.argv[2]
for i in range(100):
    set_label(path, f"h/r/{tag}/{i}", "failed", rubric=r, annotator=tag)
    set_label(path, f"h/r/{tag}/{i}", "succeeded", rubric=r, annotator=tag, note=f"{tag} {i}")
"""


@pytest.mark.slow
def test_two_processes_writing_100_labels_each_lose_none_and_keep_history(tmp_path: Path):
    f = tmp_path / "labels.json"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(f), tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lf = load_labels(f, OUTCOME)
    labeled = lf.labeled()
    assert len(labeled) == 200
    for tag in ("a", "b"):
        for i in range(100):
            e = labeled[f"h/r/{tag}/{i}"]
            assert (e["label"], e["note"], e["annotator"]) == ("succeeded", f"{tag} {i}", tag)
            assert [h["label"] for h in e["history"]] == ["failed"]
    assert not list(tmp_path.glob(".labels.json.*.tmp"))


def test_a_label_write_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    """The lock beside the label file exists only while a write holds it (rollbench.record.locks.PathLock)."""
    path = tmp_path / "labels.json"
    set_label(path, "h/r/n/0", "succeeded", rubric=load_rubric(None))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.json"]


_UMASK_WRITER = """
import os, sys
os.umask(0o027)
from rollbench.dashboard.labels import set_label
from rollbench.dashboard.rubrics import load_rubric
set_label(sys.argv[1], "h/r/n/0", "failed", rubric=load_rubric("outcome-v1"), annotator="ana")
print(oct(os.stat(sys.argv[1]).st_mode & 0o777), oct(os.umask(0)))
"""


def test_the_label_file_gets_the_mode_the_umask_allows_and_the_umask_is_left_alone(tmp_path: Path):
    f = tmp_path / "labels.json"
    out = subprocess.run([sys.executable, "-c", _UMASK_WRITER, str(f)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0o640", "0o27"]  # 0o666 & ~0o027: group may read, others nothing


_KEY = "h/r/run/0"


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"label": "succeeded", "history": "x"}, "history 'x'"),
        ({"label": "succeeded", "history": [5]}, "(in its history) is not an object"),
        ({"label": "succeeded", "history": [{"label": 7}]}, "(in its history) has label 7"),
        ({"label": "succeeded", "history": [{"label": "failed", "history": []}]}, "(in its history) has history []"),
        ({"label": 3}, "has label 3"),
        ({"label": "succeeded", "note": ["n"]}, "has note ['n']"),
        ({"label": "succeeded", "annotator": {}}, "has annotator {}"),
        ({"label": "succeeded", "labeled_at": 1}, "has labeled_at 1"),
        ({"label": "succeeded", "status": True}, "has status True"),
        ({"label": "succeeded", "task": 1.5}, "has task 1.5"),
    ],
)
def test_an_entry_with_a_field_of_the_wrong_type_names_the_file_as_damaged(tmp_path: Path, entry, named):
    """Hostile round 14, F7: such an entry used to load, then fail the episode page (500)."""
    f = tmp_path / "labels.json"
    f.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {_KEY: entry}}))
    with pytest.raises(ConfigError) as err:
        load_labels(f)
    assert str(err.value).startswith(f"label file {f} is damaged: the entry of {_KEY!r} ")
    assert named in str(err.value)


def test_an_entry_of_nulls_with_a_field_the_format_does_not_name_loads(tmp_path: Path):
    f = tmp_path / "labels.json"
    entry = {"label": None, "note": None, "history": None, "reviewed": 3}
    f.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {_KEY: entry}}))
    assert load_labels(f).entries == {_KEY: entry} and load_labels(f).label_of(_KEY) is None


@pytest.mark.slow
def test_summarize_and_the_dashboard_refuse_a_damaged_label_file_with_one_line(tmp_path: Path):
    from conftest import run_cli
    from rollbench.api import evaluate

    evaluate(out=tmp_path / "runs" / "r", env="scripted/reach", policy="zero", episodes=1, max_steps=5)
    f = tmp_path / "labels.json"
    f.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {_KEY: {"history": "x"}}}))
    line = (
        f"error: label file {f} is damaged: the entry of {_KEY!r} has history 'x'; expected a list of earlier entries"
    )
    for args in (
        ("summarize", tmp_path / "runs", "--labels", f),
        ("dashboard", "--root", tmp_path / "runs", "--labels", f),
    ):
        r = run_cli(*args, timeout=120)
        assert (r.returncode, r.stderr.strip().splitlines()) == (2, [line]), r.stderr


def test_a_label_file_damaged_while_the_dashboard_runs_is_named_with_503_on_every_page(tmp_path: Path):
    import httpx

    from dashboard_support import ServerThread, record_run

    record_run(tmp_path / "runs" / "r", "h", policy="zero", episodes=1)
    labels = tmp_path / "l.json"
    srv = ServerThread([tmp_path / "runs"], labels).start()
    try:
        labels.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {"h/point/r/0": {"note": 5}}}))
        line = f"label file {labels} is damaged: the entry of 'h/point/r/0' has note 5; expected a string or null"
        for path in ("/", "/api/runs", "/episode/h/point/r/0", "/api/labels"):
            r = httpx.get(srv.url + path)
            assert (r.status_code, r.json()) == (503, {"error": line}), path
    finally:
        srv.stop()
