"""Hostile round 19's release manifest and name classes (attacker a, F4 and F2) for ``scripts/hostile_inputs.py``
(its :class:`Runner` ``r``; seeded by ``r.rng``; each variant holds on main and fails before the fix):

* r19 F4 (ids ``r19m-rules-``): a ``--rules`` file whose patterns are the very texts to hide (an internal host name
  as an escaped regex, a password, the value of an environment secret ``RBH19_…_TOKEN`` set for the release, a
  codename literal) and whose allow patterns name a host the run never holds; the run's notes hold the hidden texts
  (text, JSON, in random order and spacing): ``release`` exits 0, no released byte (MANIFEST.json included) holds any
  pattern's or allow pattern's text or value in any letter case, and MANIFEST.json's ``filters.extra_rules`` holds
  names and categories only, ``filters.allow`` the count;
* r19 F2 (ids ``r19m-annotator-``): two random annotator names (letters, 6 to 12, a digit sometimes) on a label and
  its history entry, of a dashboard label file written in a random JSON style; the names stand in the label's note
  and in the run's notes (free text with random punctuation around them, a JSON key and value, a parquet string
  column joined by ``_``), released under another OS user (``USER=releaser``): ``release`` exits 0, no released byte
  holds either name, and the name as part of a longer word (``NAMEs``) is kept (a name is matched as a whole word).
"""

from __future__ import annotations

import json
import string
import subprocess
from pathlib import Path
from typing import Any

WORDS = ["reach", "the", "goal", "then", "stop", "slowly", "grasp", "cube", "left", "near", "bowl", "after", "lift"]
RELEASE = ["--date", "2026-01-01", "--allow-violations"]
AS_RELEASER = {"USER": "releaser", "LOGNAME": "releaser"}


def _word(rng: Any, k: int = 0) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(k or rng.randrange(1, 4)))


def _value(rng: Any, lo: int, hi: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """Random ``lo`` to ``hi`` characters of ``alphabet`` starting with a letter and ending with a digit."""
    body = [rng.choice(alphabet) for _ in range(rng.randint(lo, hi) - 2)]
    return "".join([rng.choice(string.ascii_letters), *body, rng.choice(string.digits)])


def _held(d: Path, needles: list[str], case: bool = False) -> list[str]:
    """``FILE: NEEDLE`` for every file under ``d`` whose bytes hold a needle (in any letter case unless ``case``)."""
    out = []
    for p in (f for f in sorted(d.rglob("*")) if f.is_file()):
        data = p.read_bytes() if case else p.read_bytes().lower()
        out += [f"{p.relative_to(d)}: {s}" for s in needles if (s if case else s.lower()).encode() in data]
    return out


def _release(r: Any, d: Path, env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    saved = r.env
    r.env = {**saved, **env}
    try:
        return r.cli("release", d / "run", *args, "--out", d / "rel", *RELEASE, check=False)
    finally:
        r.env = saved


def _report(r: Any, cid: str, res: subprocess.CompletedProcess[str], problems: list[str]) -> None:
    problems += ["hung"] * (res.returncode == -999) + ["traceback"] * ("Traceback" in res.stdout + res.stderr)
    problems += ["exit not 0"] * (res.returncode != 0)
    if problems:
        r.failures.append(f"{cid}: exit {res.returncode}, {'; '.join(problems)}; stderr {res.stderr.strip()[-300:]!r}")


def rules_texts(r: Any, n: int) -> None:
    """Round 19 F4: the texts a ``--rules`` file hides are in no released byte, MANIFEST.json included."""
    for i in range(n):
        cid = f"r19m-rules-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        rng = r.rng
        host = f"gpu-{rng.choice(WORDS)}-{rng.randint(10, 99)}.internal.{_value(rng, 4, 8).lower()}"
        password = _value(rng, 10, 20, string.ascii_letters + string.digits + "-_!")
        env_name = "RBH19_" + "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(2, 6))) + "_TOKEN"
        secret = _value(rng, 16, 32)
        codename = f"Project-{_value(rng, 5, 9)}"
        allowed = f"build-{_value(rng, 4, 8).lower()}.corp.example"  # a host named only by an allow pattern
        patterns = [
            {"name": "hosts", "regex": host.replace(".", r"\."), "category": "host_name"},
            {"name": "db", "regex": rng.choice([password, "(?:" + password.replace("-", r"\-") + ")"])},
            {"name": "svc", "regex": secret, "category": "credential"},
        ]
        rng.shuffle(patterns)
        rules = {"patterns": patterns, "literals": [{"value": codename}], "allow": [allowed.replace(".", r"\.")]}
        d = r.copy(cid)
        (d / "run/notes").mkdir(exist_ok=True)
        texts = [host, password, secret, codename]
        rng.shuffle(texts)
        (d / "run/notes/setup.txt").write_text(
            "".join(f"{_word(rng)} {t}{rng.choice(['', ',', ';'])}\n" for t in texts)
        )
        (d / "run/notes/cfg.json").write_text(json.dumps({"note": f"{_word(rng)} {rng.choice(texts)}"}))
        (d / "rules.json").write_text(json.dumps(rules, indent=rng.choice([None, 2])))
        res = _release(r, d, {env_name: secret}, "--rules", d / "rules.json")
        regexes = [p["regex"] for p in patterns] + rules["allow"]
        problems = [f"kept {x}" for x in _held(d / "rel", [*texts, allowed, *regexes])[:3]]
        if res.returncode == 0:
            filters = json.loads((d / "rel/MANIFEST.json").read_text())["filters"]
            shown = [{"name": p["name"], "category": p.get("category", "custom")} for p in patterns]
            if filters["extra_rules"] != shown or filters["allow"] != {"patterns": 1, "texts": "never shown"}:
                problems.append(f"filters show {filters['extra_rules']!r} {filters['allow']!r}")
        _report(r, cid, res, problems)


def _name(rng: Any) -> str:
    """A random annotator name: 6 to 12 lower-case letters, a digit at its end sometimes (never a common word)."""
    body = "".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(rng.randint(3, 6)))
    return body + (str(rng.randint(0, 9)) if rng.random() < 0.3 else "")


def _label_file(path: Path, key: str, name: str, other: str, rng: Any) -> None:
    entry = {
        "label": "succeeded",
        "note": f"{name}{rng.choice([':', ',', ''])} {_word(rng)}",
        "annotator": name,
        "labeled_at": "2026-12-01T00:00:00Z",
        "history": [{"label": "failed", "note": f"{_word(rng)} ({other})", "annotator": other,
                     "labeled_at": "2026-11-30T00:00:00Z"}],
    }  # fmt: skip
    doc = {"version": 1, "rubric": {"name": "outcome-v1", "version": 1}, "labels": {key: entry}}
    path.write_text(json.dumps(doc, indent=rng.choice([None, 1, 2])))


def annotator_names(r: Any, n: int) -> None:
    """Round 19 F2: an annotator's name is in no released byte, wherever it stood; a longer word holding it is kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i in range(n):
        cid = f"r19m-annotator-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        rng = r.rng
        name, other = _name(rng), _name(rng)
        d = r.copy(cid)
        ident = json.loads((d / "run/run.json").read_text())["identity"]
        key = f"{ident['host']}/{ident['robot']}/run/{rng.randrange(3)}"  # a run is keyed by its directory's name
        _label_file(d / "labels.json", key, name, other, rng)
        notes = d / "run/notes"
        notes.mkdir(exist_ok=True)
        longer = f"{name}s"
        around = [f"({name})", f"{name}:", f"by {name}.", f"'{other}'", f"{other}_review", f"note-{name}"]
        rng.shuffle(around)
        (notes / "review.txt").write_text(f"{_word(rng)} {' '.join(around)} {_word(rng)} {longer}\n")
        (notes / "team.json").write_text(json.dumps({name: _word(rng), "also": [f"{_word(rng)} {other}"]}))
        pq.write_table(
            pa.table({"who": [f"{rng.choice(WORDS)}_{name}", f"{other} {_word(rng)}"]}), notes / "who.parquet"
        )
        res = _release(r, d, AS_RELEASER, "--labels", d / "labels.json")
        review = f"run/notes/review.txt: {name}"  # held once, inside the longer word: checked below
        problems = [f"kept {x}" for x in _held(d / "rel", [name, other], case=True) if x != review][:3]
        released = (d / "rel/run/notes/review.txt").read_text() if res.returncode == 0 else ""
        if res.returncode == 0 and (not released.rstrip().endswith(longer) or released.count(name) != 1):
            problems.append(f"the name not replaced as a whole word: {released!r}")
        _report(r, cid, res, problems)


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of each (each copies the runner's run and releases it)."""
    m = max(2, n // 2)
    rules_texts(r, m)
    annotator_names(r, m)
