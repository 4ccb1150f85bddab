"""Hostile round 13's output classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F2/F3: ``report --plots DIR`` where a file named like a figure in DIR is a symbolic link into the run, a hard link
  to one of its files, a dangling link or a FIFO: exit 2, one line naming ``--plots``, the run unchanged;
* F4: ``checkpoints --out`` inside the run (the run itself or a folder below it): exit 2, one line, nothing written
  into the run;
* F15: ``summarize --csv`` of a run whose instruction starts like a spreadsheet formula: the cell is written with a
  leading ``'``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FIGURES = ["success_rate", "episode_length", "latency"]
VICTIMS = ["meta/info.json", "meta/stats.json", "run.json", "meta/tasks.parquet"]
FORMULAS = ['=HYPERLINK("http://127.0.0.1:9/")', "@SUM(1)", "+1+1", "-1+1", "\t=1", "=WEBSERVICE(A1)"]


def plots_links(r: Any, n: int) -> None:
    for i in range(n):
        kind = r.rng.choice(["link-in", "hard-link", "dangling", "fifo"])
        name = f"{r.rng.choice(FIGURES)}.{r.rng.choice(['png', 'svg'])}"
        victim = r.rng.choice(VICTIMS)

        def plant(run: Path, kind: str = kind, name: str = name, victim: str = victim) -> None:
            plots = run.parent / "plots"
            plots.mkdir()
            if kind == "link-in":
                os.symlink(run / victim, plots / name)
            elif kind == "hard-link":
                os.link(run / victim, plots / name)
            elif kind == "dangling":
                os.symlink(run.parent / "nowhere" / "x", plots / name)
            else:
                os.mkfifo(plots / name)

        r.case(f"r13-plots-{kind}-{i}", plant, ["report", "RUN", "--out", "DIR/rep.html", "--plots", "DIR/plots"],
               {2}, True, "--plots")  # fmt: skip


def checkpoints_out_inside(r: Any, n: int) -> None:
    for i in range(n):
        below = r.rng.choice(["", "/meta/ck", "/data/x", "/new"])

        def plant(run: Path) -> None:
            model = run.parent / "CK" / "checkpoints" / "000100" / "pretrained_model"
            model.mkdir(parents=True)
            (model / "config.json").write_text("{}")
            (model / "model.safetensors").write_bytes(b"")

        r.case(f"r13-checkpoints-out-inside-{i}", plant,
               ["checkpoints", "DIR/CK", "--env", "scripted/reach", "--episodes", "1", "--policy-template",
                "scripted-expert", "--policy-options", '{"x": "{path}"}', "--out", f"RUN{below}"], {2}, True, "lies inside the run directory")  # fmt: skip


def csv_formulas(r: Any, n: int) -> None:
    for i in range(n):
        text = r.rng.choice(FORMULAS) + str(r.rng.randrange(100))

        def plant(run: Path, text: str = text) -> None:
            spec = run.parent / "instructions.json"
            spec.write_text(json.dumps([{"name": "f", "instruction": text}]))
            r.cli("eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "1",
                  "--max-steps", "3", "--instructions", spec, "--out", run.parent / "C")  # fmt: skip

        shown = "'" + text.replace('"', '""')  # the cell as RFC 4180 writes it (a tab: a space once split below)
        r.case(f"r13-csv-formula-{i}", plant, ["summarize", "DIR/C", "--by", "instruction", "--csv"], {0}, True,
               " ".join(shown.split()))  # fmt: skip


def run_all(r: Any, n: int) -> None:
    plots_links(r, max(2, n // 4))
    checkpoints_out_inside(r, max(2, n // 4))
    csv_formulas(r, max(2, n // 4))
