"""Unit tests of the rule-agnostic CST edits in `fixers/`."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import argument, renamed_keywords


def _call(text: str) -> cst.Call:
    node = cst.parse_expression(text)
    assert isinstance(node, cst.Call)
    return node


def _code(node: cst.CSTNode | None) -> str | None:
    return None if node is None else cst.Module([]).code_for_node(node)


def test_argument_by_keyword_or_position():
    call = _call("f(a, b, c=3)")
    assert _code(argument(call, "x", 0).value) == "a"
    assert _code(argument(call, "y", 1).value) == "b"
    assert _code(argument(call, "c", 2).value) == "3"
    assert argument(call, "z", 5) is None
    assert argument(call, "y") is None  # no index: keyword only


def test_argument_after_star_args_is_unknown():
    call = _call("f(a, *rest, b)")
    assert _code(argument(call, "x", 0).value) == "a"
    assert argument(call, "y", 1) is None
    assert argument(_call("f(**kw)"), "x", 0) is None


def test_renamed_keywords():
    call = _call("f(a, input=x, some=False)")
    assert _code(renamed_keywords(call, {"input": "A"})) == "f(a, A=x, some=False)"
    assert _code(renamed_keywords(call, {"missing": "m"})) == "f(a, input=x, some=False)"


def test_with_block_indent_keeps_continuation_lines():
    from ptlint.fixers.layout import with_block_indent

    module = cst.parse_module("def f():\n    if x:\n        y = g(\n            a,  # c\n\n            b)\n")
    call = module.body[0].body.body[0].body.body[0].body[0].value
    assert module.code_for_node(call) == "g(\n    a,  # c\n\n    b)"  # what LibCST does alone
    fixed = with_block_indent(call, "        ")
    assert module.code_for_node(fixed) == "g(\n            a,  # c\n\n            b)"
    assert with_block_indent(call, "") is call


def test_expression_helpers():
    from ptlint.fixers.expressions import bare, is_one, negated, parenthesized

    expr = cst.parse_expression
    assert is_one(expr("1")) and is_one(expr("1.")) and is_one(expr("1.0"))
    assert not is_one(expr("10")) and not is_one(expr("x")) and not is_one(expr("1e-8"))
    assert _code(parenthesized(expr("a + b"))) == "(a + b)"
    assert _code(parenthesized(expr("a.b(c)"))) == "a.b(c)"
    assert _code(bare(expr("(a + b)"))) == "a + b"
    assert _code(negated(expr("x"))) == "-x"
    assert _code(negated(expr("a * b"))) == "-(a * b)"
    assert _code(negated(expr("-x"))) == "x"
