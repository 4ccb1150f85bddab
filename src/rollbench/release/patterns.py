"""The built-in patterns of ``rollbench release`` (what each finds: :mod:`rollbench.release.rules`): one table,
searched by the release scanner in every string and, for the long fixed-prefix forms, in a video's bytes
(:data:`rollbench.release.kinds.BYTE_RULES`). Python :mod:`re` patterns of linear work per string (the comment
below; tests/test_release_linear.py checks each)."""

from __future__ import annotations

import re

from rollbench.core.urlcreds import SECRET_PARAMS
from rollbench.release import credentials as cred

KEY_CHARS = r"[A-Za-z0-9_\-]"
# Linear work (hostile8 F4): a rule's match may start only where no other match attempt's run could already be
# scanning (a negative lookbehind of the run's characters, or a literal prefix the run cannot hold), quantifiers
# never backtrack into one another (possessive ``++`` / ``*+`` where giving back cannot help), so a string of n
# characters costs each rule O(n) steps; tests/test_release_linear.py checks every pattern's structure

# non-ASCII letters, marks and digits of any script (hostile14 F3: user names and addresses are not ASCII): every
# character from U+00C0 up but Unicode's punctuation, space and symbol blocks (Latin-1's, General Punctuation to
# Miscellaneous Symbols, CJK's, full-width ASCII's), surrogates and private use
INTL = (
    r"\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u167F\u1681-\u1FFF\u2C00-\u2DFF\u2E80-\u2FFF\u3040-\uD7FF\uF900-\uFDFF"
    r"\uFE70-\uFEFE\uFF10-\uFF19\uFF21-\uFF3A\uFF41-\uFF5A\uFF66-\uFFDC\U00010000-\U0010FFFF"
)
EMAIL_LOCAL = rf"[A-Za-z0-9._%+\-{INTL}]"
EMAIL_LABEL = rf"[A-Za-z0-9\-{INTL}]"
EMAIL_START = rf"(?<!{EMAIL_LOCAL})"  # an address starts where a run of its characters starts, never inside one
PEM_BODY = r"(?:[^-]++|-(?!----))*+"  # a PEM body never holds "-----": it cannot span another block's header
EMAIL = (  # a top-level domain of 2+ letters (any script), not followed by another letter or digit
    rf"{EMAIL_START}{EMAIL_LOCAL}++@{EMAIL_LABEL}++(?:\.{EMAIL_LABEL}++)*\.[A-Za-z{INTL}]{{2,}}+(?![A-Za-z0-9_{INTL}])"
)
HOME_USER = rf"[A-Za-z0-9._\-{INTL}]++"  # a user name: up to a separator, space, quote or punctuation
HOME_PATH = rf"(?:/home|/Users)/{HOME_USER}|/root\b|[A-Za-z]:\\++Users\\++{HOME_USER}"
GITLAB = r"\b(?:gl(?:pat|dt|rt|rtr|ptt|cbt|ft|imt|oas|agent|soat|ffct|wt)-|GR1348941)"  # GitLab's token prefixes
JWT_PART = r"[A-Za-z0-9_\-]"
URL_CREDENTIAL = (  # group 2: a URL's userinfo password (group 1 marks that branch) or a secret query value
    r"(?i)(?:(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*+://[^\s/?#@:\"'<>]*+:(?=[^\s/?#@\"'<>]++@)()|[?&](?:"
    + "|".join(re.escape(n) for n in sorted(SECRET_PARAMS, key=len, reverse=True))
    + r")=)((?(1)[^\s/?#@\"'<>]+|[^\s&#\"'<>]+))"
)
BUILTIN: list[tuple[str, str, str, int]] = [  # name, category, regex, group redacted
    ("private_key", "private_key", rf"-----BEGIN [A-Z ]*PRIVATE KEY-----{PEM_BODY}-----END [A-Z ]*PRIVATE KEY-----", 0),
    ("anthropic_key", "api_key", rf"\bsk-ant-{KEY_CHARS}{{20,}}+", 0),
    ("openai_key", "api_key", rf"\bsk-(?!ant-){KEY_CHARS}{{20,}}+", 0),
    ("aws_access_key", "api_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", 0),
    ("github_token", "api_key", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}+|github_pat_[A-Za-z0-9_]{22,}+)\b", 0),
    ("huggingface_token", "api_key", r"\bhf_[A-Za-z0-9]{30,}+\b", 0),
    ("slack_token", "api_key", r"\bxox[abposr]-[A-Za-z0-9-]{10,}+", 0),
    ("google_api_key", "api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b", 0),
    ("gitlab_token", "api_key", rf"{GITLAB}[0-9A-Za-z_\-]{{20,}}+(?:\.[0-9A-Za-z_\-]++)*+", 0),
    ("jwt", "token", rf"(?<!{JWT_PART})eyJ{JWT_PART}{{8,}}+\.eyJ{JWT_PART}++\.{JWT_PART}*+", 0),
    ("bearer_token", "token", r"(?i)\bbearer\s++([A-Za-z0-9\-._~+/]{8,}+=*+)", 1),
    ("secret_field", "credential", cred.PAIR, 1),  # free-text pairs: the name decided, the value taken by
    # rollbench.release.credentials.pair_secrets
    (  # any scheme (Basic, Digest, Token, ApiKey, ...; Bearer's token is bearer_token's) or a bare value
        "authorization",
        "credential",
        r"(?i)\b(?:proxy-)?authorization\b[\"']?\s*+[:=]\s*+[\"']?((?!bearer\b)(?!<REDACTED:)"
        r"(?:[A-Za-z][\w.-]*+[ \t]++(?=\S))?(?:[\w-]++=(?:\"[^\"\r\n]*+\"|[^\s,\"';}]*+)|[^\s\"',;}]++)"
        r"(?:[ \t]*+,[ \t]*+(?:[\w-]++=(?:\"[^\"\r\n]*+\"|[^\s,\"';}]*+)|[^\s\"',;}]++))*+)",
        1,
    ),
    ("url_credential", "credential", URL_CREDENTIAL, 2),
    ("cookie", "credential", *cred.COOKIE),
    ("email", "email", EMAIL, 0),
    ("home_path", "private_path", HOME_PATH, 0),
]
