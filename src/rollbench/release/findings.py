"""What a release rule finds in a string, and how overlapping findings become one span
(:mod:`rollbench.release.rules` makes them; :mod:`rollbench.release.cursor` adds those a terminal shows)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """A rule's match: ``text[start:end]`` (character offsets) is ``value``; ``rule`` names the rule (MANIFEST.json),
    ``category`` names its placeholder (``<REDACTED:category:N>``)."""

    start: int
    end: int
    rule: str
    category: str
    value: str


def merged(found: list[Finding], text: str) -> list[Finding]:
    """``found`` (findings of ``text``) sorted and without overlaps: a finding overlapping the one kept past its end
    makes one span over both, so no part of either is left."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if out and f.start < out[-1].end:
            if f.end > out[-1].end:
                last = out[-1]
                out[-1] = Finding(last.start, f.end, last.rule, last.category, text[last.start : f.end])
            continue
        out.append(f)
    return out
