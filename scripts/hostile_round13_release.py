"""Hostile round 13's release classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``):

* F8: a low-entropy value (a short e-mail address, a home path's user name) planted in a run's spec, then
  ``release``: no digest in the release (MANIFEST.json or any released file, the 16-digit ``spec_identity``
  included) is the hash of the recorded text or spec rebuilt from a dictionary holding the planted value;
* F12: an e-mail address, a home path or a long host name in an mp4 ``free`` box of a run's own video: ``release``
  refuses it (exit 1) naming the rule, writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import struct
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"<REDACTED:([a-z_]+):(\d+)>|REDACTED-([a-z_]+)-(\d+)-")
WORDS = ["al", "bo", "cy", "di", "ed", "fa", "gu", "hu"]
HOSTS = ["vm", "localhost", socket.gethostname()]  # an attacker's guesses of the recording host


def _candidates(text: str, guesses: list[str]) -> dict[str, str]:
    """The released text with each redacted value's placeholders (both forms) replaced by a guess (host names from
    :data:`HOSTS`, other values from ``guesses``), for every combination over the values."""
    out = {"": text}
    for category, n in sorted({(a or c, b or d) for a, b, c, d in PLACEHOLDER.findall(text)}):
        pat = re.compile(rf"<REDACTED:{category}:{n}>|REDACTED-{category}-{n}-")
        out = {
            f"{name} {category}:{n}={g}": pat.sub(lambda _m, g=g: g, cand)
            for name, cand in out.items()
            for g in (HOSTS if category == "host_name" else guesses)
        }
    return out


def _attack(released: Path, run_json: str, guesses: list[str]) -> list[str]:
    """The guesses whose released run.json rebuilt with them hashes to a digest the release holds, or whose spec
    hashes to the released ``spec_identity``."""
    from rollbench.core.spec import EvalSpec

    everything = b"".join(p.read_bytes() for p in sorted(released.rglob("*")) if p.is_file())
    spec = json.loads(run_json)["spec"]
    hits = []
    for name, cand in _candidates(run_json, guesses).items():
        doc = json.loads(cand)
        if hashlib.sha256(cand.encode()).hexdigest().encode() in everything:
            hits.append(f"file hash with{name}")
        if doc["spec"] != spec and EvalSpec.model_validate(doc["spec"]).identity() == doc["spec_identity"]:
            hits.append(f"spec_identity with{name}")
    return hits


def manifest_dictionary(r: Any, n: int) -> None:
    for i in range(n):
        cid = f"r13-release-dictionary-{i}"
        if r.pattern not in cid:
            continue
        name = r.rng.choice(WORDS) + r.rng.choice(WORDS)
        value = r.rng.choice([f"{name}@ex.io", f"/home/{name}"])

        def plant(run: Path, value: str = value) -> None:
            log = json.loads((run / "run.json").read_text())
            log["spec"]["instruction"] = f"ask {value}"
            (run / "run.json").write_text(json.dumps(log, indent=2))

        r.case(cid, plant, ["release", "RUN", "--out", "DIR/rel", "--allow-violations", "--date", "2026-01-01"],
               {0}, True)  # fmt: skip
        rel = r.work / "cases" / cid / "rel"
        texts = sorted(rel.glob("*/run.json"))
        if not texts:
            continue
        r.count += 1
        guesses = sorted({value, *(f"{a}{b}@ex.io" for a in WORDS for b in WORDS), f"/home/{name}"})
        hits = _attack(rel, texts[0].read_text(), guesses)
        if hits:
            r.failures.append(f"{cid}: a redacted value is recoverable from the release ({hits[0]})")


def video_text(r: Any, n: int) -> None:
    if not any(r.pattern in f"r13-release-video-text-{i}" for i in range(n)):
        return
    video_run = r.work / "r13-video"
    if not video_run.exists():
        r.cli("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "2", "--max-steps", "3",
              "--video", "--host-label", "workstation-gpu01", "--out", video_run)  # fmt: skip
    for i in range(n):
        payload = r.rng.choice(
            [b"by alice@example.com", b"at /home/alice/proj", b"on workstation-gpu01 at night", b"/Users/bob/x"]
        )
        pad = bytes(r.rng.randrange(32, 127) for _ in range(r.rng.randrange(16)))

        def plant(run: Path, payload: bytes = payload, pad: bytes = pad) -> None:
            shutil.rmtree(run)
            shutil.copytree(video_run, run)
            video = next(iter(sorted(run.glob("videos/*/chunk-*/file-*.mp4"))))
            body = pad + b" " + payload + b" " + pad
            with open(video, "ab") as f:
                f.write(struct.pack(">I", 8 + len(body)) + b"free" + body)

        r.case(f"r13-release-video-text-{i}", plant, ["release", "RUN", "--out", "DIR/rel"], {1}, True,
               "the video holds a match of rule")  # fmt: skip


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of each."""
    manifest_dictionary(r, max(2, n // 2))
    video_text(r, max(2, n // 2))
