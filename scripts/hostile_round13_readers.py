"""Hostile round 13's reader classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``), each through the real executable:

* F6: a label file beside the run whose ``rubric`` names a path (a canary file, ``/proc/self/environ``, a relative
  path) or any other non-built-in value: refused naming the label file (tests/test_handed_over_files.py checks the file is never opened or quoted);
* F5: a dashboard export whose ``success`` is not a JSON bool (``"false"``, ``"0"``, ``[0]``, ``0.5``, ``1``, null,
  ``{}``) or whose ``episode_index`` repeats: refused naming the episode and the field;
* F9: a run.json whose ``identity.host`` or ``identity.robot`` is not a segment: graded as a violation;
* F1: a step file's timestamps moved or meta/info.json's fps changed: graded as a violation;
* F14: ``eval --resume`` of a run whose meta/info.json is damaged: refused, the run unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

CANARY = "RBH13-PRIVATE-CANARY"  # what the rubric file named by a label file holds


def label_rubric(r: Any, n: int) -> None:
    secret = r.work / "r13-private.yaml"
    secret.write_text(f"name: x\nversion: 1\nlabels: [{CANARY}, b]\n")
    values: list[object] = [str(secret), "/proc/self/environ", "../r13-private.yaml", "grasp-v2", 7, ["a"]]
    values += [r.rng.choice(["x", "/", "y.json", "-v1"]) * r.rng.randint(1, 30) for _ in range(max(0, n - 6))]
    for i, value in enumerate(values):

        def plant(run: Path, value: object = value) -> None:
            entry = {"label": "failed", "annotator": "x", "labeled_at": "2026-01-01T00:00:00Z", "history": []}
            (run.parent / "labels.json").write_text(
                json.dumps({"version": 1, "rubric": value, "labels": {"vm/point/run/0": entry}})
            )

        r.case(f"r13-label-rubric-{i}", plant, ["summarize", "RUN", "--labels", "DIR/labels.json"], {2}, True,
               "is not a built-in rubric")  # fmt: skip
        r.case(f"r13-label-rubric-report-{i}", plant, ["report", "DIR/", "--out", "DIR/r.html"], {2}, True,
               "is not a built-in rubric")  # fmt: skip


def export_success(r: Any) -> None:
    values: list[object] = ["false", "0", [0], 0.5, 1, None, {}, "true"]
    for i, value in enumerate(values):

        def plant(run: Path, value: object = value) -> None:
            eps = [
                {"episode_index": e, "task": "scripted/reach", "success": value if e == 1 else False} for e in range(3)
            ]
            doc = {"runs": [{"host": "h", "robot": "r", "name": "n", "episodes": eps}]}
            (run.parent / "export.json").write_text(json.dumps(doc))

        r.case(f"r13-export-success-{i}", plant, ["summarize", "DIR/export.json"], {2}, True,
               "episode 1 has success")  # fmt: skip

    def twice(run: Path) -> None:
        eps = [{"episode_index": 0, "task": "scripted/reach", "success": True}] * 2
        (run.parent / "export.json").write_text(json.dumps({"runs": [{"host": "h", "robot": "r", "name": "n",
                                                                      "episodes": eps}]}))  # fmt: skip

    r.case("r13-export-repeated-index", twice, ["summarize", "DIR/export.json"], {2}, True, "appears 2 times")


def bad_identity(r: Any, n: int) -> None:
    values = ["vm/../x", "..", "a b", "-x", "x" * 201, "é"]
    values += ["".join(r.rng.choice("a/. _-") for _ in range(r.rng.randint(1, 8))) + "/" for _ in range(n)]
    for i, value in enumerate(values):
        field = "host" if i % 2 == 0 else "robot"

        def plant(run: Path, value: str = value, field: str = field) -> None:
            doc = json.loads((run / "run.json").read_text())
            doc["identity"][field] = value
            (run / "run.json").write_text(json.dumps(doc, indent=2))

        r.case(f"r13-identity-{i}", plant, ["grade", "RUN"], {1}, True, "is not an identity segment")
        r.case(f"r13-identity-folder-{i}", plant, ["summarize", "DIR", "--allow-damaged"], {0}, True)


def time_axis(r: Any, n: int) -> None:
    for i in range(n):
        shift = r.rng.choice([-1, 1]) * r.rng.uniform(2e-4, 5.0)

        def plant(run: Path, shift: float = shift) -> None:
            f = run / "data" / "chunk-000" / "file-001.parquet"
            t = pq.read_table(f)
            ts = [float(x) + (shift if k == t.num_rows - 1 else 0.0) for k, x in enumerate(t.column("timestamp"))]
            i_ts = t.schema.get_field_index("timestamp")
            pq.write_table(t.set_column(i_ts, t.schema.field("timestamp"), pa.array(ts, pa.float32())), f)

        r.case(f"r13-timestamp-{i}", plant, ["grade", "RUN"], {1}, True, "not frame_index / fps")
    for i, fps in enumerate([99, 1, 11, 10.5]):

        def fps_plant(run: Path, fps: float = fps) -> None:
            p = run / "meta" / "info.json"
            p.write_text(p.read_text().replace('"fps": 10', f'"fps": {fps}', 1))

        r.case(f"r13-info-fps-{i}", fps_plant, ["grade", "RUN"], {1}, True, "but the plan records 10")


def resume_info(r: Any) -> None:
    edits = ['{"codebase_version": "v3.0"}', "[]", "{", '{"fps": ' + "9" * 5000 + "}", "null"]
    for i, text in enumerate(edits):

        def plant(run: Path, text: str = text) -> None:
            (run / "meta" / "info.json").write_text(text)

        r.case(f"r13-resume-info-{i}", plant, ["eval", "--resume", "RUN"], {2}, True, "cannot be resumed")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    label_rubric(r, n)
    export_success(r)
    bad_identity(r, max(2, n // 2))
    time_axis(r, max(2, n // 2))
    resume_info(r)
