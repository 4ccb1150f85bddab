"""Hostile round 9's classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F8/F9: both arms of a sequential comparison with a recorded design outside the command's bounds (a budget over
  5,000, up to 10^30; a budget over 1,000 with looks every few pairs; looks less often than the budget; p_a + delta
  over 1; an impossible discordance): ``compare --sequential`` and ``report`` exit 2, one line, within the runner's
  timeout (no minutes of recomputation);
* F3: ``checkpoints.json`` numbers (``alpha``, ``rule.min_coverage``) replaced by a huge integer, NaN, infinity or
  text: ``report`` names the file damaged, no traceback;
* F6: a dashboard export with an integer out of int64 (length, seed, episode_index, trial): ``report`` exit 2;
* F4/F13: ``checkpoints --watch --poll-s``/``--until-idle`` and ``--eliminate --first-look`` above their bounds:
  exit 2, one line;
* F12: checkpoint folders named as rich markup print as written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

CKPOL = (
    "import rollbench\nfrom rollbench.core.registry import make_policy\n"
    "@rollbench.policy_options(ck=str)\ndef make(name, options):\n    return make_policy('scripted-expert')\n"
)


def _checkpoints(train: Path, *names: str) -> None:
    for name in names:
        folder = train / "checkpoints" / name / "pretrained_model"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"\0" * 16)


def sequential_designs(r: Any, n: int) -> None:
    made = r.work / "r9-sequential"
    r.cli("sequential", "--env", "scripted/reach", "--delta", "0.4", "--policy-a", "zero", "--policy-b",
          "scripted-expert", "--budget", "6", "--max-steps", "5", "--out", made)  # fmt: skip
    for i in range(n):
        rng = r.rng
        edit = rng.choice([
            {"budget": rng.choice([5001, 10**rng.randrange(5, 31)])},
            {"budget": rng.randrange(1001, 5001), "look_every": rng.randrange(2, 50)},
            {"budget": 6, "look_every": rng.randrange(7, 10**6)},
            {"p_a": rng.choice([0.8, 0.95, 0.999])},
            {"discordant": rng.choice([0.05, 0.99])},
        ])  # fmt: skip

        def plant(run: Path, edit: dict[str, Any] = edit) -> None:
            shutil.copytree(made, run.parent / "seq")
            for log_path in (run.parent / "seq").glob("*/run.json"):
                log = json.loads(log_path.read_text())
                log["sequential"]["design"].update(edit)
                log_path.write_text(json.dumps(log))

        r.case(f"r9-compare-sequential-{i}", plant, ["compare", "--sequential", "DIR/seq"], {2}, True, "sequential")
        r.case(f"r9-report-sequential-{i}", plant, ["report", "DIR/seq", "--out", "DIR/r.html"], {2}, True)


def checkpoint_numbers(r: Any, n: int) -> None:
    (r.planted / "rbh9_ckpol.py").write_text(CKPOL)
    made = r.work / "r9-ckpt"
    _checkpoints(made / "train", "001000", "002000")
    r.cli("checkpoints", made / "train", "--env", "scripted/reach", "--episodes", "2", "--max-steps", "5",
          "--policy-template", "rbh9_ckpol:make", "--policy-options", '{"ck": "{path}"}', "--out", made / "out")  # fmt: skip
    for i in range(n):
        field = r.rng.choice(["alpha", "min_coverage"])
        value = r.rng.choice(["1" + "0" * r.rng.randrange(310, 2000), "NaN", "-Infinity", '"0.05x"'])

        def plant(run: Path, field: str = field, value: str = value) -> None:
            out = run.parent / "out"
            shutil.copytree(made / "out", out)
            doc = json.loads((out / "checkpoints.json").read_text())
            (doc if field == "alpha" else doc["rule"])[field] = "@@"
            (out / "checkpoints.json").write_text(json.dumps(doc).replace('"@@"', value))

        r.case(f"r9-report-checkpoints-{i}-{field}", plant, ["report", "DIR/out", "--out", "DIR/r.html"], {0}, True,
               "checkpoints.json is damaged")  # fmt: skip


def export_integers(r: Any, n: int) -> None:
    for i in range(n):
        field = r.rng.choice(["length", "seed", "episode_index", "trial", "initial_state"])
        value = r.rng.choice([2**63, -1, 10 ** r.rng.randrange(20, 400), -(10**30)])
        ep = {"episode_index": 0, "task": "t", "length": 3, "success": True, field: value}

        def plant(run: Path, ep: dict[str, Any] = ep) -> None:
            doc = {"runs": [{"host": "h", "robot": "r", "name": "a", "episodes": [ep]}]}
            (run.parent / "export.json").write_text(json.dumps(doc))

        r.case(f"r9-report-export-{i}-{field}", plant, ["report", "DIR/export.json", "--out", "DIR/r.html"], {2},
               True, f"{field} outside 0 ..")  # fmt: skip


def checkpoint_options(r: Any) -> None:
    def train(run: Path) -> None:
        _checkpoints(run.parent / "train", "001000", "002000")
        (run.parent / "train" / "checkpoints" / "[bold red]ck_6000").mkdir()

    base = ["checkpoints", "DIR/train", "--env", "scripted/reach", "--episodes", "2", "--max-steps", "5",
            "--policy-template", "rbh9_ckpol:make", "--policy-options", '{"ck": "{path}"}', "--out", "DIR/o"]  # fmt: skip
    for cid, extra, words in [
        ("poll-inf", ["--watch", "--poll-s", "inf"], "--poll-s must be between 0 and 86400"),
        ("poll-huge", ["--watch", "--poll-s", "1e300"], "--poll-s must be between 0 and 86400"),
        ("poll-nan", ["--watch", "--poll-s", "nan"], "--poll-s must be between 0 and 86400"),
        ("until-idle", ["--watch", "--until-idle", "1e300"], "--until-idle must be between 0 and"),
        ("first-look", ["--eliminate", "--first-look", "99999999999999"], "--first-look must be between 2 and 738"),
    ]:
        r.case(f"r9-checkpoints-{cid}", train, [*base, *extra], {2}, True, words)
    r.case("r9-checkpoints-markup-name", train, base, {0}, True, "checkpoints/[bold red]ck_6000 lacks")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    sequential_designs(r, max(2, n // 2))
    checkpoint_numbers(r, max(2, n // 2))
    export_integers(r, n)
    checkpoint_options(r)
