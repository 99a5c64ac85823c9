"""Unit tests of the rule-agnostic CST edits in `ptlint.fixers`."""
from __future__ import annotations

import libcst as cst
import pytest

from ptlint.fixers.arguments import positionals_as_keywords, prepend_argument
from ptlint.fixers.calls import called
from ptlint.fixers.statements import insert_before, statement, without_statement


def _call(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


@pytest.mark.parametrize("before, after", [
    ("f()", 'f("cuda")'),
    ("f(a)", 'f("cuda", a)'),
    ("f(a, k=1)", 'f("cuda", a, k=1)'),
    ("f(**kw)", 'f("cuda", **kw)'),
    ("f(\n    a,\n)", 'f(\n    "cuda",\n    a,\n)'),
])
def test_prepend_argument(before, after):
    assert _code(prepend_argument(_call(before), '"cuda"')) == after


@pytest.mark.parametrize("before, after", [
    ("f()", "f()"),
    ("f(a)", "f(x=a)"),
    ("f(a, b, k=1)", "f(x=a, y=b, k=1)"),
    ("f(a, **kw)", "f(x=a, **kw)"),
    ("f(k=1)", "f(k=1)"),
])
def test_positionals_as_keywords(before, after):
    assert _code(positionals_as_keywords(_call(before), ("x", "y"))) == after


@pytest.mark.parametrize("code", ["f(a, b, c)", "f(*args)", "f(a, *args)"])
def test_positionals_as_keywords_refuses(code):
    assert positionals_as_keywords(_call(code), ("x", "y")) is None


@pytest.mark.parametrize("before, after", [
    ("torch.no_grad", "torch.no_grad()"),
    ("no_grad", "no_grad()"),
    ("(torch.no_grad)", "(torch.no_grad())"),
])
def test_called(before, after):
    assert _code(called(cst.parse_expression(before))) == after


def _block(code: str) -> cst.IndentedBlock:
    module = cst.parse_module(code)
    block = module.body[0].body
    assert isinstance(block, cst.IndentedBlock)
    return block


def test_insert_before_keeps_comments_above_the_group():
    module = cst.parse_module("for b in data:\n    step(b)\n\n    # clip\n    clip(p)\n")
    loop = module.body[0]
    block = loop.body
    new = insert_before(block, block.body[1], statement("unscale(opt)"))
    out = module.with_deep_changes(loop, body=new).code
    assert out == "for b in data:\n    step(b)\n\n    # clip\n    unscale(opt)\n    clip(p)\n"


def test_insert_before_in_a_module():
    module = cst.parse_module("import a\nrun()\n")
    out = insert_before(module, module.body[1], statement("setup()"))
    assert out.code == "import a\nsetup()\nrun()\n"


def test_insert_before_needs_a_direct_child():
    block = _block("if x:\n    if y:\n        go()\n")
    with pytest.raises(ValueError):
        insert_before(block, block.body[0].body.body[0], statement("stop()"))


def test_without_statement():
    module = cst.parse_module("for b in data:\n    s = S()\n    # step\n    step(b)\n")
    loop = module.body[0]
    out = module.with_deep_changes(loop, body=without_statement(loop.body, loop.body.body[0])).code
    assert out == "for b in data:\n    # step\n    step(b)\n"


def test_without_statement_leaves_pass():
    module = cst.parse_module("for b in data:\n    s = S()\n")
    loop = module.body[0]
    out = module.with_deep_changes(loop, body=without_statement(loop.body, loop.body.body[0])).code
    assert out == "for b in data:\n    pass\n"


def test_insert_before_keeps_the_new_statements_comments():
    module = cst.parse_module("a()\nb()\n")
    new = cst.parse_statement("# set up\nsetup()\n")
    assert insert_before(module, module.body[1], new).code == "a()\n# set up\nsetup()\nb()\n"


def test_without_statement_can_drop_its_comments():
    module = cst.parse_module("for b in data:\n    # make s\n    s = S()\n    step(b)\n")
    loop = module.body[0]
    body = without_statement(loop.body, loop.body.body[0], keep_comments=False)
    assert module.with_deep_changes(loop, body=body).code == "for b in data:\n    step(b)\n"
