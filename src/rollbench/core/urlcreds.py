"""Credentials inside a URL: refused where a policy URL enters a spec, redacted by ``rollbench release``.

A policy name is the run's identity: it is written to run.json and shown by every reader (runs, summarize, compare,
report, dashboard, MCP). A URL carrying userinfo (``http://user:password@host``, or a bare ``http://TOKEN@host``)
or a secret-named query parameter (:data:`SECRET_PARAMS`: ``?api_key=``, ``?access_token=``, ``?token=``...) would
put the credential there, so :func:`check_spec_urls` refuses it before anything runs (hostile finding N1). So are
a secret in the path (:func:`path_secrets`: a segment ``api_key=VALUE`` or ``;token=VALUE``, or a token-like segment
after a secret-named one, ``/token/VALUE``) and any fragment (``#tok=...``: a fragment is never sent to a server,
so it can only be there to be recorded; issue 42).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rollbench.core.contracts import ConfigError

SECRET_PARAMS = (
    "api_key", "apikey", "api-key", "x-api-key", "key", "token", "access_token", "auth_token", "id_token",
    "refresh_token", "secret", "client_secret", "password", "passwd", "pwd", "sig", "signature", "auth",
)  # fmt: skip
"""Query parameter names (case-insensitive) whose value is taken for a credential."""

_NAMES = "|".join(re.escape(n) for n in sorted(SECRET_PARAMS, key=len, reverse=True))
SEGMENT_PAIR = re.compile(rf"(?i)[/;](?:{_NAMES})=([^/?#;\s\"'<>]+)")
"""A path segment (or ``;`` parameter) ``NAME=VALUE`` with a :data:`SECRET_PARAMS` name; group 1: the value."""
SEGMENT_AFTER = re.compile(
    rf"(?i)/(?:{_NAMES})/((?=[^/?#;\s\"'<>]*[0-9])(?=[^/?#;\s\"'<>]*[A-Za-z])[^/?#;\s\"'<>]{{8,}})"
)
"""A token-like segment (8 or more characters, letters and digits) after a :data:`SECRET_PARAMS`-named one
(``/token/VALUE``, ``/api_key/VALUE``); group 1: the value. ``/act``, ``/v1/act``, ``/policy/pi0`` have none."""

ADVICE = (
    "credentials in a URL are recorded in run.json and shown everywhere; pass the token in ROLLBENCH_SERVER_TOKEN "
    "(sent as Authorization: Bearer, never recorded)"
)


def path_secrets(path: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the secrets in a URL's path (:data:`SEGMENT_PAIR`, :data:`SEGMENT_AFTER`),
    in order, not overlapping."""
    spans = sorted({m.span(1) for pat in (SEGMENT_PAIR, SEGMENT_AFTER) for m in pat.finditer(path)})
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if not out or s >= out[-1][1]:
            out.append((s, e))
    return out


def _mask_path(path: str) -> str:
    for s, e in reversed(path_secrets(path)):
        path = path[:s] + "***" + path[e:]
    return path


def masked_credentials(text: str) -> str | None:
    """``text`` with its credentials replaced by ``***`` when it is a URL (``scheme://...``) carrying userinfo, a
    :data:`SECRET_PARAMS` query parameter with a value, a secret in its path (:func:`path_secrets`) or a fragment
    (replaced whole); None when it carries none (or is no URL)."""
    if "://" not in text:
        return None
    try:
        parts = urlsplit(text.strip())
    except ValueError:  # not a URL urllib can split (a bad IPv6 literal): nothing to mask
        return None
    if not parts.scheme or not parts.netloc:
        return None
    query = parse_qsl(parts.query, keep_blank_values=True)
    secret = [(k, v) for k, v in query if k.lower() in SECRET_PARAMS and v]
    in_path = path_secrets(parts.path)
    if "@" not in parts.netloc and not secret and not in_path and not parts.fragment:
        return None
    netloc = "***@" + parts.netloc.rpartition("@")[2] if "@" in parts.netloc else parts.netloc
    shown = [(k, "***" if k.lower() in SECRET_PARAMS and v else v) for k, v in query]
    masked = urlencode(shown, safe="*") if secret else parts.query
    fragment = "***" if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, _mask_path(parts.path), masked, fragment))


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{where}.{k}")]
    if isinstance(value, list | tuple):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{where}[{i}]")]
    return []


def check_url(where: str, text: str) -> None:
    """ConfigError (one line, the URL shown with its credentials as ``***``) when ``text`` is a URL carrying them,
    or a fragment (``#...``: never sent to a server, so only recorded)."""
    masked = masked_credentials(text)
    if masked is None:
        return
    parts = urlsplit(text.strip())
    if "@" in parts.netloc or masked.split("#", 1)[0] != text.strip().split("#", 1)[0]:
        raise ConfigError(f"{where} {masked} carries credentials; {ADVICE}")
    raise ConfigError(
        f"{where} {masked} has a fragment (#...), which is never sent to a server but would be recorded in run.json; "
        "drop it (a token goes in ROLLBENCH_SERVER_TOKEN, sent as Authorization: Bearer, never recorded)"
    )


def check_spec_urls(policy: str, policy_options: dict[str, Any]) -> None:
    """ConfigError when the policy name or any string in the policy options (at any depth: a wrapper's ``inner``)
    is a URL carrying credentials (see :func:`masked_credentials`)."""
    for where, text in [("policy", policy), *_strings(policy_options, "policy_options")]:
        check_url(where, text)


def check_spec_secrets(spec_fields: dict[str, Any], secrets: Mapping[str, str]) -> None:
    """ConfigError when a run's spec (``spec_fields``: its JSON, as run.json records it) holds one of the user's
    ``secrets`` (``{environment variable: value}``) in a form :class:`~rollbench.core.secret_echo.SecretEcho`
    recognises: typed into an instruction or an option, it would be recorded (hostile round 10, F15)."""
    from rollbench.core.secret_echo import SecretEcho

    if (name := SecretEcho(secrets).found(spec_fields)) is not None:
        raise ConfigError(
            f"the run's spec holds the value of ${name} (in an instruction, a name or an option), which run.json and "
            "the recorded data would keep; take it out"
        )
