"""Deterministic rewordings of an instruction, for ``eval --instruction-perturb`` robustness sweeps.

Each perturbation is a pure function of the instruction text (no randomness, no model): the same instruction always
gives the same variant, so a perturbation sweep is reproducible and resumable. Word lists: :mod:`.lexicon`.

* ``paraphrase``: the instruction put in a sentence frame (``could you ...?``, ``your task: ...``), the frame chosen
  by the CRC-32 of the text among :data:`.lexicon.FRAMES` (never the bare one);
* ``synonym``: every word with a lexicon synonym replaced by its first synonym;
* ``drop-object``: every object noun (:data:`.lexicon.OBJECTS`) removed with the article before it; an instruction
  without one is returned unchanged (the robustness table then shows an identical variant);
* ``distractor``: a scene sentence naming an unrelated object appended (chosen by CRC-32 among
  :data:`.lexicon.DISTRACTORS`).
"""

from __future__ import annotations

import re
import zlib

from rollbench.core.lexicon import DISTRACTORS, FRAMES, OBJECTS, SYNONYMS

PERTURBATIONS: tuple[str, ...] = ("paraphrase", "synonym", "drop-object", "distractor")
ARTICLES = frozenset({"a", "an", "the"})


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def _tokens(text: str) -> list[str]:
    """Words and the separators between them, so a rewrite keeps the original punctuation."""
    return re.findall(r"[A-Za-z]+|[^A-Za-z]+", text)


def _is_word(tok: str) -> bool:
    return tok[:1].isalpha()


def _match_case(new: str, old: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def paraphrase(text: str) -> str:
    frames = FRAMES[1:]
    core = text.strip().rstrip(".!")
    core = core[:1].lower() + core[1:] if core[:1].isupper() and not core[:2].isupper() else core
    return frames[_crc(text) % len(frames)].format(i=core)


def synonym(text: str) -> str:
    out = []
    for tok in _tokens(text):
        syn = SYNONYMS.get(tok.lower()) if _is_word(tok) else None
        out.append(_match_case(syn[0], tok) if syn else tok)
    return "".join(out)


def drop_object(text: str) -> str:
    toks = _tokens(text)
    keep = [True] * len(toks)
    for i, tok in enumerate(toks):
        if _is_word(tok) and tok.lower() in OBJECTS:
            keep[i] = False
            j = i - 1  # the separator and article before it
            while j >= 0 and not _is_word(toks[j]):
                j -= 1
            if j >= 0 and toks[j].lower() in ARTICLES and keep[j]:
                keep[j] = False
    kept = "".join(t for t, k in zip(toks, keep, strict=True) if k)
    return re.sub(r"\s+", " ", kept).strip() or text


def distractor(text: str) -> str:
    core = text.strip().rstrip(".")
    return f"{core}; {DISTRACTORS[_crc(text) % len(DISTRACTORS)]}"


_FUNCS = {"paraphrase": paraphrase, "synonym": synonym, "drop-object": drop_object, "distractor": distractor}


def perturb(text: str, kind: str) -> str:
    """The ``kind`` rewording of ``text``. Raises KeyError for a kind not in :data:`PERTURBATIONS`."""
    return _FUNCS[kind](text)
