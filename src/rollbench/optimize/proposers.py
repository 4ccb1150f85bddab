"""Candidate instructions from an incumbent: the proposers of ``rollbench optimize-instruction``.

Built in (deterministic: the candidate order is a seeded shuffle, ``numpy.random.default_rng([seed, round,
crc32(incumbent)])``; texts already evaluated in the search are never proposed again):

* ``drop``: the incumbent with one word removed;
* ``insert``: one word inserted at any position, from the task's own instruction (words the incumbent lacks) and
  :data:`.lexicon.FILLERS`;
* ``reorder``: two adjacent words swapped, or the last word moved to the front;
* ``synonym``: one word replaced by a synonym from :data:`.lexicon.SYNONYMS` (both directions);
* ``template``: the incumbent, and the task's own instruction, in the sentence frames of :data:`.lexicon.FRAMES`;
* ``mix`` (default): all of the above, interleaved one proposer at a time;
* ``llm``: asks an OpenAI-compatible chat-completions endpoint (see :class:`LLMProposer`).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.format import printable
from rollbench.core.lexicon import FILLERS, FRAMES, SYNONYMS, words
from rollbench.core.spec import MAX_INSTRUCTION_CHARS

BUILT_IN = ("drop", "insert", "reorder", "synonym", "template")
PROPOSERS = (*BUILT_IN, "mix", "llm")
LLM_ENV = ("ROLLBENCH_LLM_BASE_URL", "ROLLBENCH_LLM_API_KEY", "ROLLBENCH_LLM_MODEL")
DEFAULT_LLM_MODEL = "gpt-4o-mini"
MAX_REPLY_LINES = 256
"""The most non-empty lines of one LLM reply that are read (a reply asks for at most 63 candidates)."""
TOO_LONG = (
    f"longer than {MAX_INSTRUCTION_CHARS} characters (an instruction's limit): dropped, not truncated, since a cut "
    "text is not what was proposed"
)
UNPRINTABLE = "holds control or bidirectional formatting characters: dropped"
HOLDS_KEY = "holds the API key in a form rollbench.core.secret_echo recognises: dropped, never recorded"


@dataclass(frozen=True)
class Context:
    """What a proposer may use: the task, its own instruction, the round, the search seed, the texts already
    evaluated (never proposed again) and the history ``[(instruction, successes, episodes), ...]``."""

    task: str
    task_instruction: str
    round: int
    seed: int
    seen: frozenset[str]
    history: tuple[tuple[str, int, int], ...] = ()


def _join(ws: list[str]) -> str:
    return " ".join(ws)


def _drop(inc: str, ctx: Context) -> list[str]:
    ws = inc.split()
    return [_join(ws[:i] + ws[i + 1 :]) for i in range(len(ws))] if len(ws) > 1 else []


def _insert(inc: str, ctx: Context) -> list[str]:
    ws = inc.split()
    have = set(words(inc))
    vocab = list(dict.fromkeys([w for w in words(ctx.task_instruction) if w not in have] + list(FILLERS)))
    return [_join([*ws[:i], w, *ws[i:]]) for w in vocab for i in range(len(ws) + 1)]


def _reorder(inc: str, ctx: Context) -> list[str]:
    ws = inc.split()
    out = [_join([*ws[:i], ws[i + 1], ws[i], *ws[i + 2 :]]) for i in range(len(ws) - 1)]
    return [*out, _join(ws[-1:] + ws[:-1])] if len(ws) > 2 else out


_BOTH_WAYS: dict[str, list[str]] = {}
for _w, _syns in SYNONYMS.items():
    for _s in _syns:
        _BOTH_WAYS.setdefault(_w, []).append(_s)
        _BOTH_WAYS.setdefault(_s, []).append(_w)


def _synonym(inc: str, ctx: Context) -> list[str]:
    ws = inc.split()
    out = []
    for i, w in enumerate(ws):
        core = re.sub(r"[^A-Za-z]", "", w).lower()
        for s in dict.fromkeys(_BOTH_WAYS.get(core, [])):
            out.append(_join([*ws[:i], w.lower().replace(core, s), *ws[i + 1 :]]))
    return out


def _template(inc: str, ctx: Context) -> list[str]:
    core = inc.strip().rstrip(".!?")
    own = ctx.task_instruction.strip().rstrip(".!?")
    return [f.format(i=core) for f in FRAMES[1:]] + [f.format(i=own) for f in FRAMES]


_RULES: dict[str, Callable[[str, Context], list[str]]] = {
    "drop": _drop,
    "insert": _insert,
    "reorder": _reorder,
    "synonym": _synonym,
    "template": _template,
}


def _rng(incumbent: str, ctx: Context) -> np.random.Generator:
    return np.random.default_rng([ctx.seed, ctx.round, zlib.crc32(incumbent.encode("utf-8"))])


def unfit(text: str) -> str | None:
    """Why ``text`` cannot be a candidate instruction (:data:`TOO_LONG`, :data:`UNPRINTABLE`), else None: every
    proposer's candidates are checked before they are saved, so a saved round always builds a valid spec."""
    if len(text) > MAX_INSTRUCTION_CHARS:
        return TOO_LONG
    if printable(text) != text:
        return UNPRINTABLE
    return None


def propose(name: str, incumbent: str, ctx: Context, n: int) -> list[tuple[str, str]]:
    """:func:`proposal`'s candidates."""
    return proposal(name, incumbent, ctx, n)[0]


def proposal(name: str, incumbent: str, ctx: Context, n: int) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """Up to ``n`` new candidates ``(instruction, proposer)`` from ``incumbent`` (fewer when the proposer is out of
    ideas), and the ``llm`` reply's lines left out (``{"line", "reason"}``; the built-in rules' unfit texts are
    skipped silently). Raises ConfigError for an unknown proposer and RollbenchError when the ``llm`` endpoint fails
    or its reply's content is not a string."""
    if name == "llm":
        texts, dropped = LLMProposer.from_env().proposal(incumbent, ctx, n)
        return [(t, "llm") for t in texts], dropped
    if name not in _RULES and name != "mix":
        raise ConfigError(f"unknown proposer {name!r}; valid proposers: {', '.join(PROPOSERS)}")
    rng = _rng(incumbent, ctx)
    queues: list[list[tuple[str, str]]] = []
    for rule in BUILT_IN if name == "mix" else (name,):
        cands = [(" ".join(c.split()), rule) for c in _RULES[rule](incumbent, ctx)]
        cands = [c for c in cands if c[0] and unfit(c[0]) is None]
        queues.append([cands[i] for i in rng.permutation(len(cands))])
    out: list[tuple[str, str]] = []
    taken = set(ctx.seen) | {incumbent}
    while len(out) < n and any(queues):
        for q in queues:
            while q:
                text, rule = q.pop(0)
                if text not in taken:
                    taken.add(text)
                    out.append((text, rule))
                    break
            if len(out) == n:
                break
    return out, []


class LLMProposer:
    """Candidates from an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

    Configured by environment variables: ``ROLLBENCH_LLM_BASE_URL`` (e.g. ``https://api.openai.com/v1``),
    ``ROLLBENCH_LLM_API_KEY`` (sent as ``Authorization: Bearer``), ``ROLLBENCH_LLM_MODEL`` (default
    ``gpt-4o-mini``). Request: ``{"model", "messages": [system, user], "temperature": 0}``; the reply's
    ``choices[0].message.content`` is read one candidate per line (list numbering, bullets and quotes stripped; at
    most :data:`MAX_REPLY_LINES` non-empty lines). The reply is text from outside: a ``content`` that is not a string
    is a failed proposal (RollbenchError naming its type, never quoting it); a line is dropped, with its line number
    and reason recorded in the round's ``dropped``, when it is over the instruction limit (:data:`TOO_LONG`), holds
    control or bidirectional characters (:data:`UNPRINTABLE`) or holds the API key in any form
    :mod:`rollbench.core.secret_echo` recognises, alone or joined with the candidates kept before it
    (:data:`HOLDS_KEY`). Only then are the candidates stored in ``optimize.json``, before they are evaluated, so a
    resumed search never asks again.

    The call goes through the agent policy's client (:class:`rollbench.policies.agent.client.ChatClient`): each try
    within ``timeout_s`` (connection within 10 s), HTTP 429/5xx and dropped connections retried ``retries`` times
    with backoff from ``backoff_s`` (the agent policy's defaults: 4 and 1 s), the API key redacted from every error.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str = DEFAULT_LLM_MODEL,
        timeout_s: float = 60.0,
        retries: int = 4,
        backoff_s: float = 1.0,
    ) -> None:
        self.base_url, self.api_key, self.model, self.timeout_s = base_url.rstrip("/"), api_key, model, timeout_s
        self.retries, self.backoff_s = retries, backoff_s

    @classmethod
    def from_env(cls) -> LLMProposer:
        base, key = os.environ.get(LLM_ENV[0]), os.environ.get(LLM_ENV[1])
        if not base or not key:
            raise ConfigError(f"the llm proposer needs {LLM_ENV[0]} and {LLM_ENV[1]} in the environment")
        return cls(base, key, os.environ.get(LLM_ENV[2]) or DEFAULT_LLM_MODEL)

    def messages(self, incumbent: str, ctx: Context, n: int) -> list[dict[str, str]]:
        tried = "\n".join(f"- {t!r}: {s}/{e} successes" for t, s, e in ctx.history) or "- (none yet)"
        return [
            {
                "role": "system",
                "content": "You rewrite instructions for a language-conditioned robot policy. Reply with exactly the "
                "requested number of new instructions, one per line, nothing else.",
            },
            {
                "role": "user",
                "content": f"Task {ctx.task}; its reference instruction: {ctx.task_instruction!r}.\n"
                f"Current best instruction: {incumbent!r}.\nInstructions evaluated so far:\n{tried}\n"
                f"Write {n} new instructions likely to make the policy succeed more often.",
            },
        ]

    def propose(self, incumbent: str, ctx: Context, n: int) -> list[str]:
        """:meth:`proposal`'s candidates."""
        return self.proposal(incumbent, ctx, n)[0]

    def proposal(self, incumbent: str, ctx: Context, n: int) -> tuple[list[str], list[dict[str, Any]]]:
        """Up to ``n`` new instructions from the endpoint, and the reply's lines left out (``{"line", "reason"}``);
        RollbenchError naming the endpoint when the call fails (after the retries), the reply has no
        ``choices[0].message.content`` or that content is not a string."""
        from rollbench.policies.agent.client import ChatClient

        body: dict[str, Any] = {"model": self.model, "messages": self.messages(incumbent, ctx, n), "temperature": 0}
        client = ChatClient(
            self.base_url,
            self.api_key,
            timeout_s=self.timeout_s,
            connect_timeout_s=min(self.timeout_s, 10.0),
            retries=self.retries,
            backoff_s=self.backoff_s,
        )
        where = f"the llm proposer's endpoint {self.base_url}/chat/completions"
        try:
            reply, _attempts = client.complete(body, turn=0)
            content = reply["choices"][0]["message"]["content"]
        except RollbenchError as exc:
            raise RollbenchError(f"the llm proposer's endpoint failed: {exc}") from None
        except (KeyError, IndexError, TypeError) as exc:
            raise RollbenchError(f"{where} sent no choices[0].message.content: {type(exc).__name__}: {exc}") from None
        finally:
            client.close()
        if not isinstance(content, str):
            raise RollbenchError(
                f"{where} sent a choices[0].message.content that is a {type(content).__name__}, not text "
                "(not shown: a server's reply is never quoted); no candidate taken"
            )
        return self._candidates(content, incumbent, ctx, n)

    def _candidates(self, content: str, incumbent: str, ctx: Context, n: int) -> tuple[list[str], list[dict[str, Any]]]:
        """The candidate lines of ``content`` and the lines dropped (see the class docstring)."""
        from rollbench.core.secret_echo import SecretEcho

        echo = SecretEcho({"api_key": self.api_key})
        out: list[str] = []
        dropped: list[dict[str, Any]] = []
        read = 0
        for number, line in enumerate(content.splitlines(), start=1):
            text = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip("\"'`").strip()
            if not text:
                continue
            read += 1
            if read > MAX_REPLY_LINES or len(out) == n:
                break
            why = unfit(text)
            if why is None and (
                (self.api_key and self.api_key in text) or echo.found_text(text) or echo.found_joined([*out, text])
            ):
                why = HOLDS_KEY
            if why is not None:
                dropped.append({"line": number, "reason": why})
            elif text != incumbent and text not in ctx.seen and text not in out:
                out.append(text)
        return out, dropped
