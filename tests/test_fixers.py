"""Unit tests of the rule-agnostic CST edits in `fixers/`."""
from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, WhitespaceInclusivePositionProvider

from ptlint.engine.fix import apply_edits
from ptlint.engine.locate import edit_content
from ptlint.fixers.statements import (
    hoist_out_of_with,
    insert_after,
    insert_before,
    move_after,
    simple_statement,
    split_leading_lines,
)
from ptlint.model import Edit, Position
from ptlint.fixers.arguments import (
    argument,
    positionals_as_keywords,
    prepend_argument,
    renamed_keywords,
    with_keyword,
    without_keywords,
)
from ptlint.fixers.calls import called
from ptlint.fixers.expressions import as_receiver, call_method, parenthesized, wrapped_in_call
from ptlint.fixers.statements import statement, without_statement


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _replace(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> str:
    """Apply one edit the way the engine does: old's inclusive span, new printed in place."""
    span = MetadataWrapper(module, unsafe_skip_copy=True).resolve(
        WhitespaceInclusivePositionProvider)[old]
    edit = Edit(Position(span.start.line, span.start.column),
                Position(span.end.line, span.end.column), edit_content(module, old, new, span))
    return apply_edits(module.code, [edit])


def _blocks(node: cst.CSTNode, path=()):
    """Every IndentedBlock under `node` with its root-to-block path."""
    path = (*path, node)
    if isinstance(node, cst.IndentedBlock):
        yield node, path
    for child in node.children:
        yield from _blocks(child, path)


NESTED = _code("""
    import torch


    def train(model, loader, optimizer):
        for epoch in range(3):  # epochs
            for x, y in loader:
                loss = model(x)

                # backward pass
                loss.backward()
                optimizer.step()
                # trailing comment
        return model
""")


def test_simple_statement():
    assert cst.Module(body=[simple_statement("opt.zero_grad()")]).code == "opt.zero_grad()\n"
    with pytest.raises(ValueError):
        simple_statement("if x:\n    pass\n")


def test_split_leading_lines():
    line = cst.parse_statement("\n# detached\n\n# one\n# two\nx = 1\n")
    rest, own = split_leading_lines(line.leading_lines)
    assert [e.comment.value for e in own] == ["# one", "# two"]
    assert [e.comment and e.comment.value for e in rest] == [None, "# detached", None]


@pytest.mark.parametrize("source", [
    NESTED,
    "if a:\n\tif b:\n\t\tx = 1\n\t\t# c\n\ty = 2\n",
    "class A:\n  def f(self):\n      with x:  # h\n          pass\n\n  # between\n  def g(self): return 1\n",
])
def test_every_block_replaced_by_itself_is_printed_in_place(source):
    module = cst.parse_module(source)
    for block, path in _blocks(module):
        assert _replace(module, block, block) == source


def _inner_block(module: cst.Module):
    function = module.body[1]
    outer = function.body.body[0]
    inner = outer.body.body[0]
    return inner.body, [module, function, function.body, outer, outer.body, inner, inner.body]


def test_insert_before_keeps_comments_with_their_statement():
    module = cst.parse_module(NESTED)
    block, path = _inner_block(module)
    backward = block.body[1]
    new = insert_before(block, backward, simple_statement("optimizer.zero_grad()"))
    assert _replace(module, block, new) == NESTED.replace(
        "\n\n            # backward pass\n",
        "\n\n            optimizer.zero_grad()\n            # backward pass\n")


def test_insert_before_first_statement():
    module = cst.parse_module("x = 1\ny = 2\n")
    new = insert_before(module, module.body[0], simple_statement("z = 0"))
    assert new.code == "z = 0\nx = 1\ny = 2\n"


def test_insert_after_last_and_middle_statement():
    module = cst.parse_module("x = 1  # one\ny = 2\n")
    assert insert_after(module, module.body[1], simple_statement("z = 0")).code == (
        "x = 1  # one\ny = 2\nz = 0\n")
    assert insert_after(module, module.body[0], simple_statement("z = 0")).code == (
        "x = 1  # one\nz = 0\ny = 2\n")


def test_insert_before_rejects_a_stranger():
    module = cst.parse_module("x = 1\n")
    with pytest.raises(ValueError):
        insert_before(module, simple_statement("y = 2"), simple_statement("z = 0"))


def test_move_after_moves_comments_not_blank_lines():
    source = _code("""
        a()

        # clear
        opt.zero_grad()  # inline
        scaler.step(opt)
        scaler.update()
        rest()
    """)
    module = cst.parse_module(source)
    zero, update = module.body[1], module.body[3]
    assert move_after(module, zero, update).code == _code("""
        a()

        scaler.step(opt)
        scaler.update()
        # clear
        opt.zero_grad()  # inline
        rest()
    """)


def test_move_after_backwards_and_to_the_end():
    module = cst.parse_module("a()\nb()\nc()\n")
    assert move_after(module, module.body[2], module.body[0]).code == "a()\nc()\nb()\n"
    assert move_after(module, module.body[0], module.body[2]).code == "b()\nc()\na()\n"


def test_move_after_the_next_statement_past_blank_lines():
    # the blank line above the moved statement goes to its follower, the anchor
    module = cst.parse_module("a()\n\nb()\nc()\n")
    assert move_after(module, module.body[1], module.body[2]).code == "a()\n\nc()\nb()\n"


def test_move_after_the_first_statement_of_a_block_leaves_no_blank_line_first():
    module = cst.parse_module("for e in r:\n    s.step()\n\n    # train\n    t()\n\n    v()\n")
    block = module.body[0].body
    new = move_after(block, block.body[0], block.body[1])
    assert module.with_deep_changes(block, body=new.body).code == \
        "for e in r:\n    # train\n    t()\n    s.step()\n\n    v()\n"


def test_move_after_last_statement_keeps_blank_lines_in_footer():
    module = cst.parse_module("def f():\n    a()\n\n    b()\n")
    block = module.body[0].body
    new = move_after(block, block.body[1], block.body[0])
    assert module.with_deep_changes(block, body=new.body, footer=new.footer).code == \
        "def f():\n    a()\n    b()\n\n"


WITH = _code("""
    def step(model, x, scaler, opt):
        # forward
        with torch.autocast("cpu"):  # amp
            loss = model(x)
            # backward
            scaler.scale(loss).backward()
            scaler.step(opt)
            # end of block
        return loss
""")


def test_hoist_out_of_with_keeps_the_rest_inside():
    module = cst.parse_module(WITH)
    block = module.body[0].body
    with_node = block.body[0]
    first = with_node.body.body[1]
    new = hoist_out_of_with(block, with_node, first)
    path = [module, module.body[0], block]
    assert _replace(module, block, new) == _code("""
        def step(model, x, scaler, opt):
            # forward
            with torch.autocast("cpu"):  # amp
                loss = model(x)
                # end of block
            # backward
            scaler.scale(loss).backward()
            scaler.step(opt)
            return loss
    """)


def test_hoist_out_of_with_drops_an_emptied_with_but_not_its_comments():
    module = cst.parse_module(WITH)
    block = module.body[0].body
    with_node = block.body[0]
    new = hoist_out_of_with(block, with_node, with_node.body.body[0])
    path = [module, module.body[0], block]
    assert _replace(module, block, new) == _code("""
        def step(model, x, scaler, opt):
            # forward
            # amp
            loss = model(x)
            # backward
            scaler.scale(loss).backward()
            scaler.step(opt)
            # end of block
            return loss
    """)


def test_hoist_out_of_with_at_module_level_and_last():
    module = cst.parse_module("with a:\n    b()\n    # tail\n")
    new = hoist_out_of_with(module, module.body[0], module.body[0].body.body[0])
    assert new.code == "b()\n# tail\n"


def test_hoist_out_of_with_rejects_one_line_body():
    module = cst.parse_module("with a: b()\n")
    with pytest.raises(ValueError):
        hoist_out_of_with(module, module.body[0], module.body[0])



def _call(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


def _printed(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


@pytest.mark.parametrize("before, after", [
    ("f()", 'f("cuda")'),
    ("f(a)", 'f("cuda", a)'),
    ("f(a, k=1)", 'f("cuda", a, k=1)'),
    ("f(**kw)", 'f("cuda", **kw)'),
    ("f(\n    a,\n)", 'f(\n    "cuda",\n    a,\n)'),
])
def test_prepend_argument(before, after):
    assert _printed(prepend_argument(_call(before), '"cuda"')) == after


@pytest.mark.parametrize("before, after", [
    ("f()", "f()"),
    ("f(a)", "f(x=a)"),
    ("f(a, b, k=1)", "f(x=a, y=b, k=1)"),
    ("f(a, **kw)", "f(x=a, **kw)"),
    ("f(k=1)", "f(k=1)"),
])
def test_positionals_as_keywords(before, after):
    assert _printed(positionals_as_keywords(_call(before), ("x", "y"))) == after


@pytest.mark.parametrize("code", ["f(a, b, c)", "f(*args)", "f(a, *args)"])
def test_positionals_as_keywords_refuses(code):
    assert positionals_as_keywords(_call(code), ("x", "y")) is None


@pytest.mark.parametrize("before, after", [
    ("torch.no_grad", "torch.no_grad()"),
    ("no_grad", "no_grad()"),
    ("(torch.no_grad)", "(torch.no_grad())"),
])
def test_called(before, after):
    assert _printed(called(cst.parse_expression(before))) == after


def _block(code: str) -> cst.IndentedBlock:
    module = cst.parse_module(code)
    block = module.body[0].body
    assert isinstance(block, cst.IndentedBlock)
    return block


def test_insert_before_leaves_the_comment_on_its_statement():
    module = cst.parse_module("for b in data:\n    step(b)\n\n    # clip\n    clip(p)\n")
    loop = module.body[0]
    block = loop.body
    new = insert_before(block, block.body[1], statement("unscale(opt)"))
    out = module.with_deep_changes(loop, body=new).code
    assert out == "for b in data:\n    step(b)\n\n    unscale(opt)\n    # clip\n    clip(p)\n"


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


def test_without_keywords_drops_the_last_argument():
    assert _printed(without_keywords(_call("f(a, b=1)"), "b")) == "f(a)"
    assert _printed(without_keywords(_call("f(a, b=1, c=2)"), "b")) == "f(a, c=2)"
    assert _printed(without_keywords(_call("f(a, c=2,)"), "c")) == "f(a,)"


def test_without_keywords_empties_a_multiline_call():
    assert _printed(without_keywords(_call("f(\n    b=1,\n)"), "b")) == "f()"
    assert _printed(without_keywords(_call("f(\n    b=1)"), "b")) == "f()"


def test_without_keywords_keeps_a_comment_after_the_parenthesis():
    code = "f(  # note\n    b=1,\n)"
    assert _printed(without_keywords(_call(code), "b")) == "f(  # note\n)"


def test_without_keywords_keeps_a_comment_after_the_last_kept_argument():
    code = "f(a, b,  # note\n  c=1, d=2)"
    assert _printed(without_keywords(_call(code), "c", "d")) == "f(a, b,  # note\n  )"


def test_with_keyword_keeps_the_closing_parenthesis_on_its_line():
    from ptlint.fixers.arguments import with_keyword

    code = "f(\n    a, b=1\n)"
    assert _printed(with_keyword(_call(code), "c", "True")) == "f(\n    a, b=1, c=True\n)"
    assert _printed(with_keyword(_call("f(a)"), "c", "True")) == "f(a, c=True)"
    assert _printed(with_keyword(_call("f(\n    a,\n)"), "c", "True")) == "f(\n    a, c=True,\n)"


@pytest.mark.parametrize("code, expected", [
    ("f(\n    a,\n    b=1  # why\n)", "f(\n    a,\n    b=1,  # why\n    c=True\n)"),
    ("f(\n    a,  # why\n)", "f(\n    a,  # why\n    c=True,\n)"),
    ("f(a, b=1,  # why\n  )", "f(a, b=1,  # why\n  c=True,\n  )"),  # `)` under the arguments
    ("f(a  # why\n)", "f(a,  # why\n    c=True\n)"),
    ("f(a, **kw  # why\n)", "f(a, c=True, **kw  # why\n)"),  # before `**kw`: the comment stays
])
def test_with_keyword_leaves_a_comment_with_the_argument_it_follows(code, expected):
    from ptlint.fixers.arguments import with_keyword

    assert _printed(with_keyword(_call(code), "c", "True")) == expected


def test_argument_by_keyword_or_position():
    call = _call("f(a, b, c=3)")
    assert _printed(argument(call, "x", 0).value) == "a"
    assert _printed(argument(call, "y", 1).value) == "b"
    assert _printed(argument(call, "c", 2).value) == "3"
    assert argument(call, "z", 5) is None
    assert argument(call, "y") is None  # no index: keyword only


def test_argument_after_star_args_is_unknown():
    call = _call("f(a, *rest, b)")
    assert _printed(argument(call, "x", 0).value) == "a"
    assert argument(call, "y", 1) is None
    assert argument(_call("f(**kw)"), "x", 0) is None


def test_renamed_keywords():
    call = _call("f(a, input=x, some=False)")
    assert _printed(renamed_keywords(call, {"input": "A"})) == "f(a, A=x, some=False)"
    assert _printed(renamed_keywords(call, {"missing": "m"})) == "f(a, input=x, some=False)"


def test_expression_helpers():
    from ptlint.fixers.expressions import bare, is_one, negated, parenthesized

    expr = cst.parse_expression
    assert is_one(expr("1")) and is_one(expr("1.")) and is_one(expr("1.0"))
    assert not is_one(expr("10")) and not is_one(expr("x")) and not is_one(expr("1e-8"))
    assert _printed(parenthesized(expr("a + b"))) == "(a + b)"
    assert _printed(parenthesized(expr("a.b(c)"))) == "a.b(c)"
    assert _printed(bare(expr("(a + b)"))) == "a + b"
    assert _printed(negated(expr("x"))) == "-x"
    assert _printed(negated(expr("a * b"))) == "-(a * b)"
    assert _printed(negated(expr("-x"))) == "x"


def _parsed(text: str) -> cst.BaseExpression:
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
    new = call_method(_parsed(receiver), "detach")
    assert _printed(new) == expected
    compile(_printed(new), "<test>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_call_method_passes_arguments():
    new = call_method(_parsed("x"), "to", cst.Arg(_parsed('"cpu"')))
    assert _printed(new) == 'x.to("cpu")'


def test_unparenthesized_tuple_is_parenthesized():
    tuple_ = cst.Tuple([cst.Element(_parsed("a")), cst.Element(_parsed("b"))], lpar=[], rpar=[])
    assert _printed(as_receiver(tuple_)) == "(a, b)"


def test_parenthesized_keeps_existing_parentheses():
    node = _parsed("(a + b)")
    assert parenthesized(node) is node
    assert _printed(parenthesized(_parsed("a + b"))) == "(a + b)"


@pytest.mark.parametrize(("expr", "expected"), [
    ("model.state_dict()", "copy.deepcopy(model.state_dict())"),
    ("(model.state_dict())", "copy.deepcopy(model.state_dict())"),
    ("(a, b)", "copy.deepcopy((a, b))"),
    ("x + y", "copy.deepcopy(x + y)"),
])
def test_wrapped_in_call(expr, expected):
    new = wrapped_in_call(_parsed(expr), "copy.deepcopy")
    assert _printed(new) == expected
