"""Credentials inside a URL: refused where a policy URL enters a spec, redacted by ``rollbench release``.

A policy name is the run's identity: it is written to run.json and shown by every reader (runs, summarize, compare,
report, dashboard, MCP). A URL carrying userinfo (``http://user:password@host``, or a bare ``http://TOKEN@host``)
or a secret-named query parameter (:data:`SECRET_PARAMS`: ``?api_key=``, ``?access_token=``, ``?token=``...) would
put the credential there, so :func:`check_spec_urls` refuses it before anything runs (hostile finding N1).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rollbench.core.contracts import ConfigError

SECRET_PARAMS = (
    "api_key", "apikey", "api-key", "x-api-key", "key", "token", "access_token", "auth_token", "id_token",
    "refresh_token", "secret", "client_secret", "password", "passwd", "pwd", "sig", "signature", "auth",
)  # fmt: skip
"""Query parameter names (case-insensitive) whose value is taken for a credential."""

ADVICE = (
    "credentials in a URL are recorded in run.json and shown everywhere; pass the token in ROLLBENCH_SERVER_TOKEN "
    "(sent as Authorization: Bearer, never recorded)"
)


def masked_credentials(text: str) -> str | None:
    """``text`` with its credentials replaced by ``***`` when it is a URL (``scheme://...``) carrying userinfo or a
    :data:`SECRET_PARAMS` query parameter with a value; None when it carries none (or is no URL)."""
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
    if "@" not in parts.netloc and not secret:
        return None
    netloc = "***@" + parts.netloc.rpartition("@")[2] if "@" in parts.netloc else parts.netloc
    shown = [(k, "***" if k.lower() in SECRET_PARAMS and v else v) for k, v in query]
    masked = urlencode(shown, safe="*") if secret else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, masked, parts.fragment))


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{where}.{k}")]
    if isinstance(value, list | tuple):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{where}[{i}]")]
    return []


def check_url(where: str, text: str) -> None:
    """ConfigError (one line, the URL shown with its credentials as ``***``) when ``text`` is a URL carrying them."""
    masked = masked_credentials(text)
    if masked is not None:
        raise ConfigError(f"{where} {masked} carries credentials; {ADVICE}")


def check_spec_urls(policy: str, policy_options: dict[str, Any]) -> None:
    """ConfigError when the policy name or any string in the policy options (at any depth: a wrapper's ``inner``)
    is a URL carrying credentials (see :func:`masked_credentials`)."""
    for where, text in [("policy", policy), *_strings(policy_options, "policy_options")]:
        check_url(where, text)
