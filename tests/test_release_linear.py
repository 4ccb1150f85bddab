"""release's scanner does linear work per string (hostile8 F4: a run.json string ``"a.a.a.…"`` of 80,000 characters
took the e-mail rule 110 s, quadratic in its length).

No timing here (the machine is shared): the bound is proved from each pattern's structure, which fails on the old
patterns, and a seeded table of 200,000-character adversarial strings checks what the rules find in them (a hand
count). The measured n-vs-4n ratios are in BENCHMARKS.md.

The structural rule (see :func:`violations`): for a pattern to cost O(n) over ``finditer`` of n characters,

* no unbounded quantifier that backtracks holds another one that backtracks (nested quantifiers);
* an unbounded run that a later item can still fail after (so the attempt ends in failure after scanning the run)
  cannot hold the start of another attempt: either some item before it in the match cannot occur inside the run
  (``gh[pousr]_`` before ``[A-Za-z0-9]``), or a negative lookbehind (or a leading ``\\b`` before word characters)
  excludes every character of the run, so attempts start only where a run starts.
"""

from __future__ import annotations

import random
import re
import re._constants as C
import re._parser as P
from dataclasses import dataclass, field

import pytest

from rollbench.core import secret_echo, urlcreds
from rollbench.release import credentials, patterns, rules
from rollbench.release.learnt import LearntNames
from rollbench.release.rules import Scanner

ALPHABET = frozenset(chr(i) for i in range(256)) | {"é", "\u200b", "Ω"}
WORD = frozenset(c for c in ALPHABET if re.fullmatch(r"\w", c))
_CATEGORY = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}


@dataclass
class Atom:
    kind: str  # "char" (a run of one class), "zero" (zero width, may fail), "guard" (negative lookbehind)
    chars: frozenset[str] = frozenset()
    min: int = 1
    unbounded: bool = False
    lookahead: bool = False
    boundary: bool = False
    extra: list[str] = field(default_factory=list)


def _fold(chars: set[str], icase: bool) -> frozenset[str]:
    return frozenset(c for c in ALPHABET if c in chars or (icase and (c.lower() in chars or c.upper() in chars)))


def _chars(op: object, av: object, icase: bool) -> frozenset[str]:
    """The characters one single-character node matches."""
    if op is C.LITERAL:
        return _fold({chr(av)}, icase)  # type: ignore[arg-type]
    if op is C.NOT_LITERAL:
        return ALPHABET - _fold({chr(av)}, icase)  # type: ignore[arg-type]
    if op is C.ANY:
        return ALPHABET
    assert op is C.IN, op
    out: set[str] = set()
    negate = False
    for iop, iav in av:  # type: ignore[attr-defined]
        if iop is C.NEGATE:
            negate = True
        elif iop is C.LITERAL:
            out.add(chr(iav))
        elif iop is C.RANGE:
            out |= {c for c in ALPHABET if iav[0] <= ord(c) <= iav[1]}
        elif iop is C.CATEGORY:
            out |= {c for c in ALPHABET if re.fullmatch(_CATEGORY[iav], c)}
        else:
            raise AssertionError(iop)
    folded = _fold(out, icase)
    return ALPHABET - folded if negate else folded


SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)
REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)


def _all_chars(items: object, icase: bool) -> frozenset[str]:
    out: set[str] = set()
    for op, av in items:  # type: ignore[attr-defined]
        if op in SINGLE:
            out |= _chars(op, av, icase)
        elif op in REPEATS:
            out |= _all_chars(av[2], icase)
        elif op is C.SUBPATTERN:
            out |= _all_chars(av[3], icase)
        elif op is C.ATOMIC_GROUP:
            out |= _all_chars(av, icase)
        elif op is C.BRANCH:
            for alt in av[1]:
                out |= _all_chars(alt, icase)
        elif op is C.GROUPREF_EXISTS:
            out |= _all_chars(av[1], icase) | (_all_chars(av[2], icase) if av[2] else set())
    return frozenset(out)


def _paths(items: list[tuple[object, object]], icase: bool, ahead: bool = False) -> list[list[Atom]]:
    """Every sequence of atoms a match can follow (alternatives and optional groups expanded)."""
    paths: list[list[Atom]] = [[]]
    for op, av in items:
        options: list[list[Atom]]
        if op in SINGLE:
            options = [[Atom("char", _chars(op, av, icase), lookahead=ahead)]]
        elif op in REPEATS:
            lo, hi, sub = av  # type: ignore[misc]
            unbounded = hi is C.MAXREPEAT
            if len(sub) == 1 and sub[0][0] in SINGLE:
                options = [[Atom("char", _chars(*sub[0], icase), lo, unbounded, ahead)]]
            elif hi <= 1:
                options = ([[]] if lo == 0 else []) + _paths(list(sub), icase, ahead)
            else:
                least = lo if sub.getwidth()[0] > 0 else 0
                options = [[Atom("char", _all_chars(sub, icase), least, unbounded, ahead)]]
        elif op is C.SUBPATTERN:
            options = _paths(list(av[3]), icase or bool(av[1] & re.IGNORECASE), ahead)  # type: ignore[index]
        elif op is C.ATOMIC_GROUP:
            options = _paths(list(av), icase, ahead)  # type: ignore[arg-type]
        elif op is C.BRANCH:
            options = [p for alt in av[1] for p in _paths(list(alt), icase, ahead)]  # type: ignore[index]
        elif op is C.GROUPREF_EXISTS:
            yes, no = av[1], av[2]  # type: ignore[index]
            options = _paths(list(yes), icase, ahead) + (_paths(list(no), icase, ahead) if no else [[]])
        elif op is C.AT:
            options = [[Atom("zero", boundary=av is C.AT_BOUNDARY)]]
        elif op is C.ASSERT_NOT and av[0] == -1:  # type: ignore[index]
            options = [[Atom("guard", _all_chars(av[1], icase))]]  # type: ignore[index]
        elif op is C.ASSERT and av[0] == 1:  # type: ignore[index]
            options = [[*p, Atom("zero")] for p in _paths(list(av[1]), icase, True)]  # type: ignore[index]
        elif op in (C.ASSERT, C.ASSERT_NOT):
            options = [[Atom("zero")]]
        else:
            raise AssertionError(f"no rule for {op}")
        paths = [p + o for p in paths for o in options]
    return paths


def _nested(items: object, outer: bool) -> bool:
    """True when a backtracking unbounded quantifier holds another (``outer``: inside one already)."""
    for op, av in items:  # type: ignore[attr-defined]
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] is C.MAXREPEAT:
            if outer or _nested(av[2], True):
                return True
            continue
        inner = outer and op is not C.POSSESSIVE_REPEAT and op is not C.ATOMIC_GROUP
        subs = {
            C.SUBPATTERN: lambda a: [a[3]],
            C.ATOMIC_GROUP: lambda a: [a],
            C.BRANCH: lambda a: list(a[1]),
            C.ASSERT: lambda a: [a[1]],
            C.ASSERT_NOT: lambda a: [a[1]],
            C.GROUPREF_EXISTS: lambda a: [x for x in a[1:] if x],
            **{r: (lambda a: [a[2]]) for r in REPEATS},
        }.get(op, lambda a: [])
        if any(_nested(sub, inner) for sub in subs(av)):
            return True
    return False


def violations(pattern: re.Pattern[str]) -> list[str]:
    """Why ``pattern`` may cost more than O(n) over n characters (the module docstring's rule); [] if it cannot."""
    tree = P.parse(pattern.pattern, pattern.flags)
    icase = bool(tree.state.flags & re.IGNORECASE)
    out = ["nested quantifiers"] if _nested(tree, False) else []
    for path in _paths(list(tree), icase):
        first = next((i for i, a in enumerate(path) if a.kind == "char"), len(path))
        guard: set[str] = set()
        for a in path[:first]:
            guard |= a.chars if a.kind == "guard" else set()
            if a.boundary and first < len(path) and path[first].chars <= WORD:
                guard |= WORD  # \b before a word character: the character before is not one
        for k, a in enumerate(path):
            if a.kind != "char" or not a.unbounded:
                continue
            prefix = [b for b in path[:k] if b.kind == "char" and b.min > 0 and not (b.lookahead and not a.lookahead)]
            nests = all(b.chars & a.chars for b in prefix)
            can_fail = any((b.kind == "char" and b.min > 0) or b.kind in ("zero", "guard") for b in path[k + 1 :])
            if nests and can_fail and not a.chars <= guard:
                out.append(f"an attempt can start inside the run of {''.join(sorted(a.chars))[:40]!r}")
    return sorted(set(out))


def _patterns() -> dict[str, re.Pattern[str]]:
    scanner = Scanner({"rigbox7"}, {"alice"}, environ={"MY_TOKEN": "tok_3k9s8d7f6g"})
    named = {f"rules.{n}.{i}": p for i, (n, _, p, _) in enumerate(scanner.patterns)}
    named |= {
        "rules.ENTROPY_RUN": rules.ENTROPY_RUN,
        "rules.HEX_RUN": rules.HEX_RUN,
        "rules.DATA_URL": rules.DATA_URL,
        "rules.PLACEHOLDER": rules.PLACEHOLDER,
        "credentials._URL": credentials._URL,
        "credentials._WORDS": credentials._WORDS,
        "urlcreds.SEGMENT_PAIR": urlcreds.SEGMENT_PAIR,
        "urlcreds.SEGMENT_AFTER": urlcreds.SEGMENT_AFTER,
    }
    # the echoed-secret detector the scanner runs on every string (rollbench.core.secret_echo): its module's
    # patterns and those it compiles for a secret's length
    named |= {f"secret_echo.{k}": v for k, v in vars(secret_echo).items() if isinstance(v, re.Pattern)}
    named["secret_echo.printable"] = scanner.echo._printable
    scanner.learnt.add("Blue-Falcon-77", "credential", "secret_field")  # the trie of learnt values (hostile17 F6)
    scanner.learnt.add("Blue-Fox-7788", "credential", "secret_field")
    scanner.learnt.compile()
    assert scanner.learnt.pattern is not None
    named["learnt.trie"] = scanner.learnt.pattern
    names = LearntNames({"kwendeborn": "annotator", "kwen": "annotator", "Jane Doe": "annotator"})
    names.compile()  # the trie of learnt names, bounded by words of any script (hostile19 F2)
    assert names.pattern is not None
    named["learnt.names"] = names.pattern
    named |= {f"secret_echo.run{i}": run[0] for i, run in enumerate(scanner.echo._runs)}
    return named


# patterns whose linearity rests on what the structural rule does not model, each checked below instead:
TEMPERED = {
    # a PEM body never holds "-----" (patterns.PEM_BODY): no attempt starts inside another's body
    "private_key": "test_pem_body_cannot_span_another_header",
    # [A-Z]+(?![a-z]): giving back one capital always passes the lookahead (a capital follows), so no attempt fails
    "_WORDS": "test_key_words_never_fail_after_a_run_of_capitals",
}


@pytest.mark.parametrize("name", sorted(_patterns()))
def test_every_release_pattern_has_linear_structure(name: str) -> None:
    if name.split(".")[1] in TEMPERED:
        pytest.skip(f"checked by {TEMPERED[name.split('.')[1]]}")
    assert violations(_patterns()[name]) == []


def test_pem_body_cannot_span_another_header() -> None:
    body = re.compile(patterns.PEM_BODY)
    assert body.fullmatch("MIIEv\nQIBADANB-gkq/hkiG9w0=\nProc-Type: 4,ENCRYPTED\n")
    for text in ("-----BEGIN ", "abc-----BEGIN RSA PRIVATE KEY-----", "x-----", "-----"):
        assert body.fullmatch(text) is None


def test_key_words_never_fail_after_a_run_of_capitals() -> None:
    assert credentials._WORDS.findall("X" * N + "y") == ["X" * (N - 1), "Xy"]
    assert credentials._WORDS.findall("xApiKEYName") == ["x", "Api", "KEY", "Name"]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [  # the old rules (hostile8 F4) and textbook cases: the structural rule rejects each
        (r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b", "inside the run"),
        (r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s\"'<>]+", "inside the run"),
        (r"(?i)\b(?:token|x-auth(?:-[a-z]+)*)\b\s*[:=]", "nested"),
        (r"(?i)\bx-[a-z-]*-(?:token|key)\b\s*[:=]", "inside the run"),
        (r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END", "inside the run"),
        (r"(a+)+b", "nested"),
        (r"a*a*b", "inside the run"),
    ],
)
def test_the_structural_rule_rejects_superlinear_patterns(pattern: str, why: str) -> None:
    assert any(why in v for v in violations(re.compile(pattern)))


N = 200_000
rng = random.Random(8)
# (repeated unit, tail, [(rule, value), ...]) found in unit * (N // len(unit)) + tail: counted by hand
ADVERSARIAL = [
    ("a.", "", []),
    ("a.", "@example.com", [("email", None)]),  # the whole string is one address
    ("%+", "é", []),
    ("a@", "", []),
    ("a@a.", "1", []),
    ("x-", "", []),
    ("x-", "token: s3cretvalue", [("secret_field", "s3cretvalue")]),
    ("x-auth-", "", []),
    ("a://", "", []),
    ("h.t://u:", "", []),
    ("-----BEGIN RSA PRIVATE KEY-----", "", []),
    ("Authorization: a,", "", [("authorization", "a,Authorization:")] * (N // 34)),  # one per two units
    ("token=", "", [("secret_field", None)]),
    ("a=", "", []),  # a name that is not secret at every other character (hostile17 F3: any name is decided)
    ('HF_TOKEN="', "", [("secret_field", "HF_TOKEN=")] * (N // 10 // 2)),  # a quoted value: one per two units
    ("x_token='a ", "", [("secret_field", "a x_token=")] * (N // 11 // 2)),
    ('token="a\n', "", []),  # a quote not closed on its line, on every line
    ("bearer ", "", []),
    ('cookie: ="', "", [("cookie", None)]),
    ("sk-", "", [("openai_key", None)]),
    ("github_pat_", "é", []),
    ("C:\\", "", []),
    ("/home/", "", []),
    ("é.", "", []),
    ("http://x/token/", "", []),
    ("base64,A 0123456789abcdef0123456789abcdefa ", "", None),  # one hex_string per unit
    ("".join(rng.choice("a.-_@:/") for _ in range(97)), "", None),  # seeded noise: must finish, any findings
]


@pytest.mark.parametrize(("unit", "tail", "expected"), ADVERSARIAL, ids=[repr(u[:12]) for u, _, _ in ADVERSARIAL])
def test_adversarial_strings_of_200k_characters_are_scanned_whole(
    unit: str, tail: str, expected: list[tuple[str, str | None]] | None
) -> None:
    text = unit * (N // len(unit)) + tail
    found = Scanner(set(), set(), environ={}).find(text)
    if unit.startswith("base64,"):
        assert [f.rule for f in found] == ["hex_string"] * (N // len(unit))
    elif expected is not None:
        assert [f.rule for f in found] == [rule for rule, _ in expected]
        for f, (_, value) in zip(found, expected, strict=True):
            if value is None:  # the finding runs to the end of the string
                assert f.end == len(text)
            else:
                assert f.value == value
