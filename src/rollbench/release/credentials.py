"""Where ``rollbench release`` takes a value for a credential from where it stands (issue 42), one place for the
rules :class:`rollbench.release.rules.Scanner` applies on top of its patterns:

* secret-named fields (rule ``secret_field``, category ``credential``): every string value anywhere under a key
  (at any depth: ``policy_options.headers.X-Custom``, a parquet struct field, a map's key) one of whose words
  (split at ``-``, ``_``, ``.``, spaces and camelCase; any case) is in :data:`SECRET_KEY_WORDS` (``authorization``,
  ``auth`` as in ``X-Auth``, ``token``, ``secret``, ``password``, ``cookie``...; containers ``headers``, ``cookies``,
  ``credentials``, ``auth``), or whose letters hold one of :data:`SECRET_KEY_COMPOUNDS` (``apikey`` as in
  ``x-api-key``, ``ApiKey``); is redacted whole, except under a key naming where or what a credential is
  (:data:`NAMING_WORDS`: ``api_key_env``, ``token_type``) and the standard headers of :data:`PLAIN_HEADERS`
  (``content-type``...); a ``Bearer TOKEN`` value keeps its scheme word
  (``bearer_token``'s placeholder in place of the token, at any length); in free text, a ``NAME=VALUE`` /
  ``NAME: VALUE`` pair (:func:`pair_secrets`) whose ``NAME`` (any run of ``[A-Za-z0-9_.-]``: ``HF_TOKEN``,
  ``export DB_PASSWORD``, ``x-api-key``) is such a key by the same words (:func:`pair_name`; the container words
  ``header``/``headers`` excepted there, and ``X-…-Key`` / ``X-…-Token`` / ``X-…-Secret`` header names and
  upper-case variable names ending in ``_KEY`` added):
  the value to the next space, quote, ``,``, ``;`` or ``}`` (6 or more characters), or a quoted value
  (``KEY="value with spaces"``, ``KEY='v'``) whole;
* ``cookie`` (category ``credential``): the value after ``Cookie:`` / ``Set-Cookie:`` (also ``cookies=``) in free
  text, to the end of its line or string, every ``name=value`` pair and attribute of it;
* ``url_path_credential`` (category ``credential``): in a URL, a path segment ``NAME=VALUE`` / ``;NAME=VALUE`` with
  a :data:`rollbench.core.urlcreds.SECRET_PARAMS` name, and a token-like segment after such a name
  (``/token/VALUE``): :func:`rollbench.core.urlcreds.path_secrets`, the rule ``eval`` refuses such URLs by;
* ``url_fragment`` (category ``credential``): a URL's whole fragment (``#tok=...``, ``#access_token=...``).

The URL rules are for runs recorded before such policy URLs were refused (:mod:`rollbench.core.urlcreds`).
"""

from __future__ import annotations

import functools
import re

from rollbench.core.urlcreds import path_secrets

SECRET_KEY_WORDS = frozenset(
    {
        "authorization", "authentication", "auth", "oauth", "token", "secret", "secrets", "password", "passwd",
        "pwd", "passphrase", "credential", "credentials", "cookie", "cookies", "header", "headers",
    }
)  # fmt: skip
"""Words of a key (any case) whose values are credentials: secret names and the containers that hold them."""
SECRET_KEY_COMPOUNDS = ("apikey", "accesskey", "privatekey", "secretkey")
"""Letters (lower case, separators removed) of a key whose values are credentials: ``x-api-key``, ``ApiKey``."""
NAMING_WORDS = frozenset({"env", "var", "variable", "file", "path", "name", "mode", "type", "kind", "url", "count"})
"""Last words of a key that names where a credential is or what kind it is, not the credential:
``api_key_env`` (a variable's name), ``token_type``, ``auth_mode``."""
PLAIN_HEADERS = frozenset(
    {
        "accept", "accept-encoding", "cache-control", "connection", "content-encoding", "content-length",
        "content-type", "date", "host", "server", "transfer-encoding", "user-agent", "vary",
    }
)  # fmt: skip
"""Standard HTTP headers that never carry a credential: kept under a ``headers`` container."""
COOKIE = (
    r"(?i)\b(?:set-)?cookies?\b[\"']?[ \t]*+[:=][ \t]*+[\"']?((?![ \t])(?!<REDACTED:)(?:=\"[^\"\r\n]*+\"|[^\r\n\"'}])++)",
    1,
)
PAIR = r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]++)[\"']?[ \t]*+[:=][ \t]*+"  # a name's run, then its separator
"""Where a ``NAME=`` / ``NAME:`` of free text stands (group 1: the name); :func:`pair_secrets` decides the name and
takes the value. An attempt starts only where a run of name characters starts (linear work)."""
_QUOTED = {q: re.compile(f"{q}([^{q}\r\n]*+){q}") for q in "\"'"}  # a quoted value, closed on its line
_BARE = re.compile(r"(?i)[\"']?((?!bearer\b)(?!<REDACTED:)[^\s\"',;}]{6,}+)")  # Bearer's token is bearer_token's
_HOLDS_SECRET_WORD = re.compile(r"(?i)auth|token|secret|pass|pwd|credential|cookie|key")  # every secret name has one
FREE_TEXT_CONTAINERS = frozenset({"header", "headers"})
"""Container words of :data:`SECRET_KEY_WORDS` that do not make a free-text name secret (``headers: X-Auth: v``
names the header after them)."""
ENV_KEY_NAME = re.compile(r"[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)*_KEY")
"""An environment variable's name ending in ``_KEY`` (``STRIPE_KEY``, ``MY_SERVICE_KEY``): a credential in a free-text
pair, as rollbench treats such a variable's value (a ``key`` in a JSON document or ``sort_key: v`` is not one)."""
_URL = re.compile(r"(?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*+://[^\s\"'<>]++")  # starts where a scheme's run starts
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def secret_key(name: str) -> bool:
    """True when values under a key named ``name`` are credentials (see the module docstring)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if len(words) > 1 and words[-1] in NAMING_WORDS:
        return False
    joined = "".join(words)
    return any(w in SECRET_KEY_WORDS for w in words) or any(c in joined for c in SECRET_KEY_COMPOUNDS)


def pair_name(name: str) -> bool:
    """True when a free-text ``name=value`` / ``name: value`` pair's ``name`` (``HF_TOKEN``, ``db.password``,
    ``X-Custom-Key``) names a credential: a :func:`secret_key` whose secret words are not only
    :data:`FREE_TEXT_CONTAINERS`, an ``X-…-Key`` / ``X-…-Token`` / ``X-…-Secret`` header name, or an
    environment variable's :data:`ENV_KEY_NAME` (``STRIPE_KEY``)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if len(words) > 2 and words[0] == "x" and words[-1] in ("key", "token", "secret"):
        return True
    if ENV_KEY_NAME.fullmatch(name):
        return True
    if not secret_key(name):
        return False
    return any(c in "".join(words) for c in SECRET_KEY_COMPOUNDS) or any(
        w in SECRET_KEY_WORDS and w not in FREE_TEXT_CONTAINERS for w in words
    )


def pair_secrets(text: str, pair: re.Pattern[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of the value of every secret-named pair in ``text`` (``pair``: :data:`PAIR` compiled), in
    order: a quoted value whole (at any length; not one starting with ``Bearer`` or a placeholder), else the value to
    the next space, quote, ``,``, ``;`` or ``}`` of 6 or more characters. Linear work: a search resumes after the
    separator of a name that is not secret (``note:password=v`` finds ``password``) and after the value of one that
    is; a quoted value that is not closed on its line scans to the line's end, which at most one search of each
    quote character per line can do (no later one has a closing quote either). A placeholder's category
    (``<REDACTED:credential:1>``, ``REDACTED-token-1-``) is not a name."""
    out, pos = [], 0
    while (m := pair.search(text, pos)) is not None:
        pos = m.end()
        name = m.group(1)
        in_placeholder = text.endswith("<REDACTED:", 0, m.start()) or name.startswith("REDACTED-")  # its category
        if in_placeholder or not (_HOLDS_SECRET_WORD.search(name) and pair_name(name)):
            continue
        quoted = _QUOTED[text[pos]].match(text, pos) if text[pos : pos + 1] in _QUOTED else None
        inner = quoted.group(1) if quoted else ""
        if quoted and inner and not re.match(r"(?i)bearer\b|<REDACTED:", inner):
            out.append(quoted.span(1))
            pos = quoted.end()
            continue
        bare = _BARE.match(text, pos)
        if bare is not None:
            out.append(bare.span(1))
            pos = bare.end()
    return out


@functools.lru_cache(maxsize=4096)  # field paths repeat on every line of a JSON lines file
def secret_path(field: str | None) -> bool:
    """True when a key on the dotted field path ``field`` (``spec.policy_options.headers.X-Auth``, list indices
    ignored) is a :func:`secret_key`, unless the last is one of :data:`PLAIN_HEADERS` (``headers.content-type``)."""
    parts = [re.sub(r"\[\d+\]", "", part) for part in (field or "").split(".")]
    return bool(field) and parts[-1].lower() not in PLAIN_HEADERS and any(secret_key(p) for p in parts)


def secret_value(text: str, placeholder: re.Pattern[str]) -> tuple[int, str, str] | None:
    """Where the credential in a secret field's value ``text`` starts, with its rule and category: at 0
    (``secret_field``), or after a ``Bearer`` scheme word (``bearer_token``: the token, at any length); None when
    that is empty or already a ``placeholder``. A value that is one finding of a format rule (an OpenAI key) is
    that rule's (the caller's choice), so a secret gets the same placeholder in a field as in free text."""
    at = 7 + len(text[7:]) - len(text[7:].lstrip()) if text.lower().startswith("bearer ") else 0
    if at == len(text) or placeholder.fullmatch(text[at:]):
        return None
    return (at, "bearer_token", "token") if at else (0, "secret_field", "credential")


def url_secrets(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, rule)`` of every secret in a URL's path or fragment in ``text`` (see the module docstring)."""
    out = []
    for m in _URL.finditer(text):
        url, base = m.group(0), m.start()
        rest = url.split("://", 1)[1]
        path_at = len(url) - len(rest) + len(re.split(r"[/?#]", rest, maxsplit=1)[0])
        path = re.split(r"[?#]", url[path_at:], maxsplit=1)[0]
        out += [(base + path_at + s, base + path_at + e, "url_path_credential") for s, e in path_secrets(path)]
        if "#" in url and url.index("#") + 1 < len(url):
            out.append((base + url.index("#") + 1, m.end(), "url_fragment"))
    return out
