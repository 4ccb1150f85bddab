"""What ``rollbench release`` looks for, and the stable placeholders it puts in its place.

Rules (``name`` → category; the category names the placeholder ``<REDACTED:category:N>``):

* provider keys (category ``api_key``): ``openai_key`` ``sk-`` / ``sk-proj-`` + 20 or more key characters,
  ``anthropic_key`` ``sk-ant-...``, ``aws_access_key`` ``AKIA``/``ASIA`` + 16, ``github_token`` ``ghp_`` (``gho_``,
  ``ghu_``, ``ghs_``, ``ghr_``) + 36, ``github_pat_...``, ``huggingface_token`` ``hf_`` + 30, ``slack_token``
  ``xoxa-``/``xoxb-``/``xoxp-``/..., ``google_api_key`` ``AIza`` + 35, ``gitlab_token`` ``glpat-`` (``gldt-``,
  ``glrt-``, ``glptt-``, ``glcbt-``, ``glft-``, ``gloas-``, ...; ``GR1348941``) + 20 (the public formats these
  providers document); ``jwt`` (category ``token``): a whole JSON Web Token ``eyJ….eyJ….SIGNATURE``;
* ``private_key`` (category ``private_key``): a PEM ``-----BEGIN ... PRIVATE KEY-----`` block;
* ``bearer_token`` (category ``token``): the token after ``Bearer``;
* ``secret_field`` (category ``credential``): the whole string value of a field under a secret-named key or a
  credential container, at any depth (:mod:`rollbench.release.credentials`: ``headers``, ``X-Auth``, ``x-api-key``,
  ``password``, ``cookie``...), and ``name=value`` / ``name: value`` text of secret names (``api_key``, ``token``,
  ``secret``, ``password``, ``X-Auth-Token``...) in free text; ``cookie``: a ``Cookie:`` / ``Set-Cookie:`` header's
  value in free text; a placeholder is never matched again, so the check after redaction passes;
* ``authorization`` (category ``credential``): the value after ``Authorization:`` / ``Proxy-Authorization:`` in
  free text, with its scheme word (``Basic``, ``Digest`` with its parameters, ``Token``, any word) or bare;
  ``Bearer``'s token is ``bearer_token``'s;
* ``high_entropy`` (category ``secret``): a run of 32..200 characters of ``[A-Za-z0-9+/_=-]`` with a Shannon
  entropy above 4.3 bits per character (random keys have about 5; hex digests at most 4) whose longest piece
  between separators (``-_./+=``) has 20 or more characters mixing upper case, lower case and digits (random key
  bodies are long unbroken pieces; run names such as ``scripted_reach-agent_x-20261201T000912Z`` are short words
  joined by separators, and are kept); runs after ``base64,`` (data URLs: images) are left alone. A key split by
  ``/`` into short pieces (some AWS secret keys) is not caught by this rule; name it in ``--rules``;
* ``hex_string`` (category ``hex_token``): a run of 32 or more hexadecimal digits holding both digits and letters
  and at least 8 distinct digits (``openssl rand -hex 24`` tokens, uuid4 hex, digests in free text; not zero
  padding or a long decimal number, not inside a ``base64,`` data URL), anywhere except as the whole value of a
  field rollbench's own files keep a digest in (:data:`HASH_FIELDS`: ``git_commit``, ``sha256``,
  ``weights_sha256``, ...) when it has that field's form; ``malformed_hash`` (category ``secret``): the whole value
  of such a field when it does not have the form (a token planted in ``git_commit``). Shorter hex (run.json's
  16-digit ``spec_identity``, run names' suffixes) is never touched;
* ``environment:NAME`` (category ``env_secret``): the value, in any letter case, of every variable of the releasing
  process's environment whose name looks like a secret's (:data:`SECRET_ENV_NAME`: ``ROLLBENCH_SERVER_TOKEN``,
  ``ROLLBENCH_MCP_TOKEN``, ``HF_TOKEN``, ``OPENAI_API_KEY``, ...) and whose value has :data:`ENV_MIN_LENGTH` or more characters, anywhere, also inside a longer word; the values are never printed or
  written (MANIFEST.json names the variables only) a value that is one of the runs' own names or an ordinary word
  is not used (:func:`ordinary_value`); in another form (:mod:`rollbench.core.secret_echo`): the whole string;
* ``url_credential`` (category ``credential``): the password of a URL's userinfo (``scheme://user:PASSWORD@``)
  and the value of a secret-named query parameter (:data:`rollbench.core.urlcreds.SECRET_PARAMS`: ``?api_key=``,
  ``&token=``, ``?sig=``...); ``url_path_credential`` and ``url_fragment``: a secret in a URL's path
  (``/token/VALUE``, ``/api_key=VALUE``) and its whole fragment (:mod:`rollbench.release.credentials`); for runs
  recorded before such policy URLs were refused;
* ``email`` (category ``email``), internationalised too (RFC 6531: letters of any script, :data:`INTL`);
* ``home_path`` (category ``private_path``): ``/home/USER``, ``/Users/USER``, ``/root``, ``C:\\Users\\USER`` (the
  rest of the path is kept; ``USER`` in any script: ``/home/jürgen``);
* ``host_name`` / ``user_name`` (categories ``host_name``, ``user_name``): the literal names given to
  :class:`Scanner` (the recording machines' host names from run.json provenance and identity, this machine's host
  name and OS user, user names seen in home paths), matched as whole words (a hyphen or a dot ends a word,
  so ``note-HOST`` is caught); names shorter than 3 characters or
  common words (:data:`COMMON_NAMES`) are matched only as the whole value of the fields that hold them
  (``host``, ``user``, a label's ``annotator``); a host name as the first segment of an identity key ``HOST/ROBOT/NAME[/EPISODE]``
  (labels, URLs) is matched at any length (rule ``host_segment``), and replaced by the segment-safe form of its
  placeholder (``REDACTED-host_name-1-``, what run.json's ``identity.host`` gets), so released labels still join;
  a name redacted by its field (:meth:`Scanner.field_name`: a label's annotator) is learnt by the first pass and
  matched wherever it stands too (:class:`rollbench.release.learnt.LearntNames`: as written, a whole word);
* ``learnt:RULE`` (the category of the finding that taught it): a value one of the context rules (``RULE``:
  ``secret_field``, ``bearer_token``, ``authorization``, ``cookie``, the URL rules, ``malformed_hash``) found in some
  file of the release, wherever else it stands (:mod:`rollbench.release.learnt`: 8 to 256 characters, not an ordinary
  word; found by a first pass over every file, :mod:`rollbench.release.first_pass`);
* ``interleaved:RULE`` (``RULE``'s category): a string holding a finding of ``RULE`` only once its invisible
  characters are removed (:mod:`rollbench.release.invisible`: ``s\\u200bk-…``), the whole string;
* ``cursor:RULE`` (``RULE``'s category): a string whose finding of ``RULE`` only a terminal shows, once the text
  moves its cursor (:mod:`rollbench.release.cursor`: ``sk-ant-…XXXX\\x1b[4Dabcd…``), the whole string (in a text
  file, the line when the cursor stays in its row); ``cursor:withheld`` (category ``withheld``): a string that moves
  the cursor and is too costly to draw, whole;
* ``--rules FILE``: extra ``{"patterns": [{"name", "regex", "category"}], "literals": [{"value", "category"}],
  "allow": [regex...]}``; a match of an ``allow`` regex is never redacted. MANIFEST.json shows the patterns' names
  and categories only, never a regex nor an allow pattern (:mod:`rollbench.release.manifest`).

Overlapping matches: the earliest start wins, then the longest; a match that runs past the end of the one kept
extends it (one placeholder over both), so no part of either is left. Placeholders are numbered per category in the order
the secrets are first met (files are visited in a fixed order), so the same secret gets the same placeholder in
every file of a release, and the same input gives the same release.
"""

from __future__ import annotations

import bisect
import math
import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.identity import sanitize_segment
from rollbench.core.secret_echo import SecretEcho
from rollbench.release import credentials as cred
from rollbench.release.cursor import assembled
from rollbench.release.findings import Finding, merged
from rollbench.release.invisible import hidden, hidden_lines
from rollbench.release.learnt import LearntNames, LearntValues
from rollbench.release.patterns import BUILTIN
from rollbench.release.user_rules import linear_pattern, rule_entries

HOST_FIELDS = frozenset({"host", "hostname", "host_name"})
USER_FIELDS = frozenset({"user", "username", "user_name", "operator", "annotator"})  # annotator: the OS user by default
# names that are also ordinary words of run files (``"executor": "ray"``): matched only in their own fields
COMMON_NAMES = frozenset(
    {
        "root", "user", "admin", "ubuntu", "runner", "debian", "localhost", "vm", "host", "test", "ray", "dev",
        "docker", "agent", "robot", "local", "server", "jenkins", "gitlab", "github", "ci", "ml", "gpu", "node",
        "unknown", "nobody", "anonymous", "default", "none", "null",  # the dashboard's annotator with no OS user
    }
)  # fmt: skip

ENTROPY_RUN = re.compile(r"[A-Za-z0-9+/_=\-]{32,}")
ENTROPY_MIN_BITS = 4.3
ENTROPY_MIN_PIECE = 20
PLACEHOLDER = re.compile(r"<REDACTED:[a-z_]+:\d+>|REDACTED-[a-z_]+-\d+-")
HEX_RUN = re.compile(r"[0-9A-Fa-f]{32,}")
HEX_MIN_DISTINCT = 8
DATA_URL = re.compile(r"base64,[A-Za-z0-9+/=]+")
_SHA256 = r"[0-9a-f]{64}"
# fields whose whole value is a digest in the files a release copies: field -> (its form, strict). Strict: a value
# not of that form is redacted whole (``malformed_hash``); not strict: a value of that form is kept, any other
# value is scanned as free text (a revision may be a branch name)
HASH_FIELDS: dict[str, tuple[re.Pattern[str], bool]] = {
    "git_commit": (re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}"), True),  # run.json provenance: rollbench's checkout
    "sha256": (re.compile(_SHA256), True),  # agent transcripts: each frame image's digest
    "weights_sha256": (re.compile(_SHA256), True),  # LeRobot policy provenance: the checkpoint's weights
    "bddl_sha256": (re.compile(_SHA256), True),  # LIBERO-PRO task records
    "init_states_sha256": (re.compile(_SHA256), True),
    "assets_hash": (re.compile("sha256:" + _SHA256), True),  # LIBERO provenance
    "revision": (re.compile(r"[0-9a-f]{40}"), False),  # LeRobot provenance: a Hub checkpoint's resolved commit
    "requested_revision": (re.compile(r"[0-9a-f]{40}"), False),  # as given: a commit, a branch or a tag
}
# rollbench's own names of a run (a run's directory, its files, run.json's run_id and identity name): a hex run in
# them (a run named by a commit sha or a uuid) is kept, else the run would be renamed; other rules still apply
ANNOTATOR_INSIDE = re.compile(r"(?:^|\.)annotator(?:\[\d+\])*\.")  # a string inside an annotator object
STRUCTURAL_FIELDS = frozenset({"run_id", "identity.name"})
SECRET_ENV_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
ENV_MIN_LENGTH = 8
ENV_ORDINARY_LENGTH = 12  # a value shorter, with no digit, is a word, not a secret: not used (a warning names it)


def entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def environment_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` whose name holds TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH (any
    case: ``ROLLBENCH_SERVER_TOKEN``, ``HF_TOKEN``, ``OPENAI_API_KEY``) with a value of :data:`ENV_MIN_LENGTH` or
    more characters: ``{name: value}``, by name."""
    return {k: v for k, v in sorted(environ.items()) if SECRET_ENV_NAME.search(k) and len(v) >= ENV_MIN_LENGTH}


def ordinary_value(value: str, run_names: set[str]) -> str | None:
    """Why an environment secret's ``value`` is not used for redaction (it would rewrite the runs' own names), or
    None: it is (part of) one of ``run_names`` (task, env, policy, robot and host names of the released runs), or
    shorter than :data:`ENV_ORDINARY_LENGTH` with no digit (an ordinary word, e.g. ``MY_SECRET=scripted/reach``)."""
    if any(value.lower() in n.lower() for n in run_names):  # the value is matched in any case
        return "is (part of) a task, env, policy, robot or host name of the released runs"
    if len(value) < ENV_ORDINARY_LENGTH and not re.search(r"[0-9]", value):
        return f"is shorter than {ENV_ORDINARY_LENGTH} characters with no digit (an ordinary word)"
    return None


def hex_findings(text: str, keep: bool) -> list[Finding]:
    """``hex_string`` findings of ``text`` (see the module docstring); none when ``keep`` (a digest field's value of
    its form)."""
    if keep:
        return []
    urls = [m.span() for m in DATA_URL.finditer(text)] if "base64," in text else []
    out = []
    for m in HEX_RUN.finditer(text):
        run = m.group(0)
        at = bisect.bisect_right(urls, (m.start(), len(text))) - 1  # the last data URL starting at or before it
        if at >= 0 and urls[at][1] >= m.end():
            continue
        if re.search(r"[0-9]", run) and re.search(r"[A-Fa-f]", run) and len(set(run.lower())) >= HEX_MIN_DISTINCT:
            out.append(Finding(m.start(), m.end(), "hex_string", "hex_token", run))
    return out


class Scanner:
    """Finds secrets and private data in strings and assigns stable placeholders (see the module docstring).

    Args:
        host_names, user_names: literal names to redact (empty strings are ignored).
        rules: the parsed ``--rules`` file, or None.
        environ: the environment whose secrets' values are redacted (:func:`environment_secrets`); None: this
            process's (``os.environ``).
        run_names: the released runs' own names (tasks, env, policy, robot, host): an environment secret whose
            value is one of them, or an ordinary word, is not used (:func:`ordinary_value`; ``env_unused`` says why).
    """

    def __init__(
        self,
        host_names: set[str],
        user_names: set[str],
        rules: dict[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        run_names: set[str] | None = None,
    ) -> None:
        self.patterns: list[tuple[str, str, re.Pattern[str], int]] = [
            (n, c, re.compile(r), g) for n, c, r, g in BUILTIN
        ]
        secrets = environment_secrets(os.environ if environ is None else environ)
        self.env_unused = {k: why for k, v in secrets.items() if (why := ordinary_value(v, run_names or set()))}
        secrets = {k: v for k, v in secrets.items() if k not in self.env_unused}
        self.env_names = sorted(secrets)  # only the names are ever shown
        self.echo = SecretEcho(secrets)  # their other forms (rollbench.core.secret_echo): a string redacted whole
        self.env_values = secrets  # {name: value}: searched in bytes by rollbench.release.kinds, never shown
        for name, value in secrets.items():  # after BUILTIN: MANIFEST.json shows BUILTIN's regexes only
            pat = re.compile(re.escape(value), re.IGNORECASE)  # in any letter case: KEY.upper() too (hostile6 F2)
            self.patterns.append((f"environment:{name}", "env_secret", pat, 0))
        self.field_only: dict[str, set[str]] = {"host_name": set(), "user_name": set()}
        self.literals: list[tuple[str, str]] = []
        for category, names in (("host_name", host_names), ("user_name", user_names)):
            for name in sorted(n for n in names if n):
                if len(name) < 3 or name.lower() in COMMON_NAMES:
                    self.field_only[category].add(name)
                else:
                    self.literals.append((name, category))
        self.allow: list[re.Pattern[str]] = []
        self.extra: list[dict[str, Any]] = []
        if rules:
            self._add_rules(rules)
        for host in sorted(n for n in host_names if n):  # identity keys HOST/ROBOT/NAME[/EPISODE] (labels, URLs)
            pat = re.compile(rf"(?<![A-Za-z0-9._\-]){re.escape(host)}(?=/[A-Za-z0-9][A-Za-z0-9._\-]*/[A-Za-z0-9])")
            self.patterns.append(("host_segment", "host_name", pat, 0))
        for value, category in self.literals:
            rule = category if category in ("host_name", "user_name") else "literal"
            # a hyphen is a boundary: "note-HOST" and "HOST-x" (a key or value built from the name) are caught
            pat = re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
            self.patterns.append((rule, category, pat, 0))
        self.placeholders: dict[str, str] = {}
        self._counts: Counter[str] = Counter()
        self.learnt = LearntValues()  # filled by the first pass (rollbench.release.first_pass)
        self.names = LearntNames()  # likewise: user names found where they stand (a label's annotator)

    def learn_names(self, names: LearntNames) -> None:
        """Redact ``names`` (compiled; the first pass's :class:`LearntNames`) wherever they stand, as the other user
        names (rule and category ``user_name``: whole words, as written)."""
        self.names = names
        if names.pattern is not None:
            self.patterns.append(("user_name", "user_name", names.pattern, 0))

    def alias(self, value: str, released: str) -> None:
        """Replace ``value`` (a run's name derived from its redacted directory name: ``bob.jones-corp-secret.com``
        from ``bob.jones@corp-secret.com``) by ``released`` (the directory's released name) wherever it stands as a
        word (rule and category ``run_name``), so the derived form of a secret is never released."""
        pat = re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
        self.patterns.append(("run_name", "run_name", pat, 0))
        self.placeholders[f"run_name\0{value}"] = released

    def _add_rules(self, rules: dict[str, Any]) -> None:
        if not isinstance(rules, dict) or set(rules) - {"patterns", "literals", "allow"}:
            raise ConfigError('--rules must be a JSON object with keys "patterns", "literals", "allow"')
        for i, p in enumerate(rule_entries(rules, "patterns")):
            if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not isinstance(p.get("regex"), str):
                raise ConfigError(f'--rules: patterns[{i}] is not an object with a string "name" and "regex"')
            category = str(p.get("category", "custom"))
            self.patterns.append((p["name"], category, linear_pattern(p["regex"], f"patterns[{i}]"), 0))
            self.extra.append({"name": p["name"], "category": category})  # never the regex (MANIFEST.json)
        for i, lit in enumerate(rule_entries(rules, "literals")):
            if not isinstance(lit, dict) or not isinstance(lit.get("value"), str):
                raise ConfigError(f'--rules: literals[{i}] is not an object with a string "value"')
            self.literals.append((lit["value"], str(lit.get("category", "custom"))))
        self.allow = [linear_pattern(a, f"allow[{i}]") for i, a in enumerate(rule_entries(rules, "allow"))]

    def distinct_counts(self) -> dict[str, int]:
        """How many distinct values of each category got a placeholder so far (never the values)."""
        return dict(sorted(self._counts.items()))

    def placeholder(self, value: str, category: str) -> str:
        key = f"{category}\0{value}"
        if key not in self.placeholders:
            self._counts[category] += 1
            self.placeholders[key] = f"<REDACTED:{category}:{self._counts[category]}>"
        return self.placeholders[key]

    def field_name(self, text: str, field: str) -> Finding | None:
        """The finding of ``text`` as a whole when it is a name by the field holding it (``field``: its path): any
        string of a label's ``annotator`` (a person's name, whatever it is, and every string inside an annotator
        object: docs/release.md), or a host or user field's value that is a name matched only there
        (``field_only``); else None."""
        leaf = field.rsplit(".", 1)[-1].lower()
        if leaf == "annotator" or ANNOTATOR_INSIDE.search(field):
            return Finding(0, len(text), "annotator", "user_name", text)
        for category, fields in (("host_name", HOST_FIELDS), ("user_name", USER_FIELDS)):
            if leaf in fields and text in self.field_only[category]:
                return Finding(0, len(text), category, category, text)
        return None

    def find(
        self,
        text: str,
        field: str | None = None,
        structural: bool = False,
        pieces: bool = True,
        lines: bool = False,
        drawn: bool = True,
    ) -> list[Finding]:
        """Non-overlapping findings in ``text``; ``field`` (the JSON key or column holding it) enables the
        field rules (secret fields, digest fields, host and user fields); ``structural``: ``text`` is one of
        rollbench's structural names (a path segment), where hex runs are kept (:data:`STRUCTURAL_FIELDS`);
        ``pieces`` False: a piece of an environment secret is not looked for (the first pass over a JSON document,
        :mod:`rollbench.release.redact`). A finding only ``text`` without its invisible characters holds is the whole
        ``text`` (``interleaved:RULE``: :mod:`rollbench.release.invisible`), or with ``lines`` (a text file's
        content) each line holding one (:func:`~rollbench.release.invisible.hidden_lines`), a text file losing that
        line and not all of its lines (review of hostile round 21). A finding only a terminal shows once ``text``
        moves its cursor is the whole ``text``, or a line's (``cursor:RULE``: :mod:`rollbench.release.cursor`), unless
        ``drawn`` is False (``text`` is a view of another without its invisible characters, itself drawn)."""
        found: list[Finding] = []
        leaf, whole = (field or "").rsplit(".", 1)[-1].lower(), None
        structural = structural or field in STRUCTURAL_FIELDS
        digest = HASH_FIELDS.get(leaf) if field is not None else None
        if field is not None and text and not PLACEHOLDER.fullmatch(text) and text != "<redacted>":
            whole = cred.secret_value(text, PLACEHOLDER) if cred.secret_path(field) else None
            if digest is not None and digest[1] and not digest[0].fullmatch(text):
                return [Finding(0, len(text), "malformed_hash", "secret", text)]
            named = self.field_name(text, field)
            if named is not None:
                return [named]
        for name, category, pat, group in self.patterns:
            if name == "secret_field":  # free-text pairs: the name decided by its words
                found += [Finding(s, e, name, category, text[s:e]) for s, e in cred.pair_secrets(text, pat)]
                continue
            for m in pat.finditer(text):
                s, e = m.span(group)
                if e > s:
                    found.append(Finding(s, e, name, category, text[s:e]))
        found += [Finding(s, e, rule, category, text[s:e]) for s, e, rule, category in self.learnt.find(text)]
        for m in ENTROPY_RUN.finditer(text):
            run = m.group(0)
            piece = max(re.split(r"[-_./+=]", run), key=len)  # identifiers are words joined by separators
            if (
                len(run) <= 200
                and len(piece) >= ENTROPY_MIN_PIECE
                and not text[max(0, m.start() - 7) : m.start()].endswith("base64,")
                and re.search(r"[a-z]", piece)
                and re.search(r"[A-Z]", piece)
                and re.search(r"[0-9]", piece)
                and entropy(run) > ENTROPY_MIN_BITS
            ):
                found.append(Finding(m.start(), m.end(), "high_entropy", "secret", run))
        found += [Finding(s, e, rule, "credential", text[s:e]) for s, e, rule in cred.url_secrets(text)]
        found += hex_findings(text, keep=structural or (digest is not None and bool(digest[0].fullmatch(text))))
        found = [f for f in found if not any(a.search(f.value) for a in self.allow)]
        out = merged(found, text)
        if whole and not (
            len(out) == 1
            and (out[0].start, out[0].end) == (whole[0], len(text))
            and not out[0].rule.startswith("learnt:")
        ):
            return [Finding(whole[0], len(text), whole[1], whole[2], text[whole[0] :])]  # a known form: its rule's
        echo = self.echo if pieces else self.echo.without_pieces
        env = None if PLACEHOLDER.fullmatch(text) else echo.found_outside(text, [(f.start, f.end) for f in out])
        again = lambda s: self.find(s, field, structural, pieces, drawn=False)  # noqa: E731 (a view, scanned alike)
        h = None if env else hidden(text, out, again)
        if h is not None and lines and "\n" in text:  # each line that hides one, whole; then one spanning lines
            out = merged(
                out + [Finding(s, e, f"interleaved:{x.rule}", x.category, text[s:e]) for s, e, x in hidden_lines(text, out, again)],
                text,
            )  # fmt: skip
            h = hidden(text, out, again)
        if h is not None:
            return [Finding(0, len(text), f"interleaved:{h.rule}", h.category, text)]
        if env:
            return [Finding(0, len(text), f"environment:{env}", "env_secret", text)]
        if not drawn:
            return out
        return assembled(text, out, again, lambda found: self.placeholders_of(found, False), lines)

    def placeholders_of(self, findings: list[Finding], assign: bool = True) -> list[str]:
        """The placeholder of each of ``findings`` (in order, as :meth:`redact` puts them in); ``assign`` False: the
        ones they would get now, none given (:mod:`rollbench.release.cursor` renders a text as it will be released)."""
        out, new, counts = [], dict[str, int](), Counter[str]()
        for f in findings:
            value = self.learnt.canonical(f.value) if f.rule.startswith("learnt:") else f.value
            key = f"{f.category}\0{value}"
            if assign or key in self.placeholders:
                ph = self.placeholder(value, f.category)
            else:  # numbered as placeholder() would number it, the counts left as they are
                if key not in new:
                    counts[f.category] += 1
                    new[key] = self._counts[f.category] + counts[f.category]
                ph = f"<REDACTED:{f.category}:{new[key]}>"
            out.append(sanitize_segment(ph) if f.rule == "host_segment" else ph)  # a valid identity segment
        return out

    def redact(
        self, text: str, field: str | None = None, structural: bool = False, pieces: bool = True, lines: bool = False
    ) -> tuple[str, list[tuple[Finding, str]]]:
        """``text`` with every finding replaced by its placeholder; and ``(finding, placeholder)`` pairs
        (``lines``: see :meth:`find`)."""
        findings = self.find(text, field, structural, pieces, lines)
        parts, pos = [], 0
        for f, ph in zip(findings, placeholders := self.placeholders_of(findings), strict=True):
            parts += [text[pos : f.start], ph]
            pos = f.end
        return "".join(parts) + text[pos:], list(zip(findings, placeholders, strict=True))
