"""The rule-agnostic CST edits in `fixers/`."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import without_keywords


def _call(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def test_without_keywords_drops_the_last_argument():
    assert _code(without_keywords(_call("f(a, b=1)"), "b")) == "f(a)"
    assert _code(without_keywords(_call("f(a, b=1, c=2)"), "b")) == "f(a, c=2)"
    assert _code(without_keywords(_call("f(a, c=2,)"), "c")) == "f(a,)"


def test_without_keywords_empties_a_multiline_call():
    assert _code(without_keywords(_call("f(\n    b=1,\n)"), "b")) == "f()"
    assert _code(without_keywords(_call("f(\n    b=1)"), "b")) == "f()"


def test_without_keywords_keeps_a_comment_after_the_parenthesis():
    code = "f(  # note\n    b=1,\n)"
    assert _code(without_keywords(_call(code), "b")) == "f(  # note\n)"


def test_with_keyword_keeps_the_closing_parenthesis_on_its_line():
    from ptlint.fixers.arguments import with_keyword

    code = "f(\n    a, b=1\n)"
    assert _code(with_keyword(_call(code), "c", "True")) == "f(\n    a, b=1, c=True\n)"
    assert _code(with_keyword(_call("f(a)"), "c", "True")) == "f(a, c=True)"
    assert _code(with_keyword(_call("f(\n    a,\n)"), "c", "True")) == "f(\n    a, c=True,\n)"
