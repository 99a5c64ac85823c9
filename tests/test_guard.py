"""ptlint's parse skips most of LibCST's per-node checks (engine/guard.py,
`unvalidated`): it must accept and reject exactly what LibCST's own parse does,
give the same tree, and leave the checks on for nodes made afterwards."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from ptlint.engine.guard import parse

ROOT = Path(__file__).resolve().parent.parent

# Programs only a node's own check rejects (found by comparing both parses on
# the string constants of CPython's and LibCST's test suites), then others.
ONLY_THE_CHECK_REJECTS = [
    "b'' f''\n",
    "f'' b''\n",
    "x = 'a' b'b'\n",
    "try:\n  pass\nexcept:\n  pass\nexcept ValueError:\n  pass\n",
    "\U00014000\n",
    "# é\nx = \U00014000\n",
]
OTHERS = [
    "f(**a, *b)\n",
    "def f(a=1, b): pass\n",
    "lambda a=1, b: 0\n",
    "print 'x'\n",
    "x = 0x\n",
    "x = 1if 1else 2\n",
    "x = [i for i in(1,2)]\n",
    "é = 'ü'\n",
    "try:\n  pass\nexcept ValueError:\n  pass\nexcept:\n  pass\n",
    "x = 'a' 'b' f'{c!r}'\n",
    "def f(a, /, b=2, *c, d, **e): return (yield)\n",
]


def outcome(parser, text: str) -> object:
    try:
        return parser(text)
    except cst.CSTValidationError as exc:
        return ("CSTValidationError", str(exc))
    except cst.ParserSyntaxError:
        return "ParserSyntaxError"


@pytest.mark.parametrize("text", ONLY_THE_CHECK_REJECTS + OTHERS)
def test_accepts_and_rejects_what_libcst_does(text):
    ours, theirs = outcome(parse, text), outcome(cst.parse_module, text)
    if isinstance(theirs, cst.Module):
        assert isinstance(ours, cst.Module) and ours.deep_equals(theirs)
    else:
        assert ours == theirs
    if text in ONLY_THE_CHECK_REJECTS:
        assert isinstance(theirs, tuple) and theirs[0] == "CSTValidationError"


def test_same_tree_as_libcst_on_every_fixture():
    files = sorted(ROOT.glob("fixtures/*/*.py"))
    assert len(files) > 100
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert parse(text).deep_equals(cst.parse_module(text)), path


@pytest.mark.parametrize("text", ["x = 1\n", "x = (\n", "x = 'a' b'b'\n"])
def test_nodes_made_afterwards_are_checked(text):
    try:
        parse(text)
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        pass
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("x", lpar=[cst.LeftParen()])


def test_nesting_tokens_are_the_plain_spelling():
    """`_NESTING` spells `\\bif\\b` as `i(?<!\\wi)f\\b` (faster): the same tokens."""
    import re

    from ptlint.engine.guard import _NESTING

    plain = re.compile(r"[()\[\]{},;\n]|\r\n?|\\(?:\r\n?|\n)|[-+*/%@&|^~.]+"
                       r"|\b(?:if|not|lambda|await|yield)\b")
    samples = ["if x: pass", "ifx if notx not lambda: await yield_ yield élif if",
               "x if(y)else z", "_if if_ 1if 2not", "a.b(c)[d] + -e ** f @ g\r\nh \\\n i",
               *(p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("fixtures/*/bad.py")))]
    for text in samples:
        assert ([m.span() for m in _NESTING.finditer(text)]
                == [m.span() for m in plain.finditer(text)]), text[:60]
