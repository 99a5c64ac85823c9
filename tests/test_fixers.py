"""Unit tests of the rule-agnostic edits in `ptlint.fixers`."""
from __future__ import annotations

import ast

import libcst as cst
import pytest

from ptlint.fixers.expressions import as_receiver, call_method, parenthesized, wrapped_in_call


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


# -- fixers/expressions.py ----------------------------------------------------
@pytest.mark.parametrize(("receiver", "expected"), [
    ("loss", "loss.detach()"),
    ("out.loss", "out.loss.detach()"),
    ("criterion(a, b)", "criterion(a, b).detach()"),
    ("losses[0]", "losses[0].detach()"),
    ("(a + b)", "(a + b).detach()"),
    ("loss * n", "(loss * n).detach()"),
    ("-loss", "(-loss).detach()"),
    ("1", "(1).detach()"),
    ("a if c else b", "(a if c else b).detach()"),
    ("await x", "(await x).detach()"),
    ('"a" "b"', '("a" "b").detach()'),
    ("[a, b]", "[a, b].detach()"),
])
def test_call_method_parenthesizes_where_needed(receiver, expected):
    new = call_method(_expr(receiver), "detach")
    assert _code(new) == expected
    compile(_code(new), "<test>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_call_method_passes_arguments():
    new = call_method(_expr("x"), "to", cst.Arg(_expr('"cpu"')))
    assert _code(new) == 'x.to("cpu")'


def test_unparenthesized_tuple_is_parenthesized():
    tuple_ = cst.Tuple([cst.Element(_expr("a")), cst.Element(_expr("b"))], lpar=[], rpar=[])
    assert _code(as_receiver(tuple_)) == "(a, b)"


def test_parenthesized_keeps_existing_parentheses():
    node = _expr("(a + b)")
    assert parenthesized(node) is node
    assert _code(parenthesized(_expr("a + b"))) == "(a + b)"


@pytest.mark.parametrize(("expr", "expected"), [
    ("model.state_dict()", "copy.deepcopy(model.state_dict())"),
    ("(model.state_dict())", "copy.deepcopy(model.state_dict())"),
    ("(a, b)", "copy.deepcopy((a, b))"),
    ("x + y", "copy.deepcopy(x + y)"),
])
def test_wrapped_in_call(expr, expected):
    new = wrapped_in_call(_expr(expr), "copy.deepcopy")
    assert _code(new) == expected
