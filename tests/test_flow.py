"""Unit tests of the statement walker and variable helpers in `ptlint.analysis.flow`."""
from __future__ import annotations

import textwrap

import libcst as cst

from ptlint.analysis.flow import calls_in, closure, statements, target_vars, var, vars_in


def _events(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    return [(kind, cst.Module([]).code_for_node(node).strip().splitlines()[0], len(loops))
            for kind, node, loops in statements(module.body)]


def test_statements_in_order_with_loop_depth():
    events = _events("""
        a = 1
        for x in xs:
            if x: b = 2
            while c:
                d += 1
            else:
                e = 3
        with ctx() as f:
            g()
        def h():
            inner = 1
        try:
            i = 1
        except E as err:
            j = 2
        finally:
            k = 3
    """)
    assert events == [
        ("small", "a = 1", 0),
        ("for", "for x in xs:", 1),
        ("expr", "x", 1),
        ("small", "b = 2", 1),
        ("expr", "c", 2),
        ("small", "d += 1", 2),
        ("small", "e = 3", 1),
        ("with", "with ctx() as f:", 0),
        ("small", "g()", 0),
        ("end_with", "with ctx() as f:", 0),
        ("def", "def h():", 0),
        ("small", "i = 1", 0),
        ("handler", "except E as err:", 0),
        ("small", "j = 2", 0),
        ("small", "k = 3", 0),
    ]


def test_var_and_target_vars():
    assert var(cst.parse_expression('h["train"]')) == "h"
    assert var(cst.parse_expression("self.losses")) == "self.losses"
    assert var(cst.parse_expression("f().x")) is None
    assert list(target_vars(cst.parse_expression("(a, [b, *c]), d.e"))) == ["a", "b", "c", "d.e"]


def test_vars_in_skips_keywords_and_attributes_of_results():
    found = vars_in(cst.parse_expression('torch.stack(losses, dim=0).mean() + self.w * "s"'))
    assert found == {"torch.stack", "torch", "losses", "self.w", "self"}


def test_calls_in_outermost_first_and_not_in_lambdas():
    node = cst.parse_expression("f(g(x), lambda: h())")
    names = [cst.Module([]).code_for_node(c.func) for c in calls_in(node)]
    assert names == ["f", "g"]


def test_closure_follows_flows_backwards():
    flows = [({"total"}, {"loss"}), ({"loss"}, {"out", "y"}), ({"other"}, {"z"})]
    assert closure({"total"}, flows) == {"total", "loss", "out", "y"}


def test_evaluated_parts_of_headers():
    from ptlint.analysis.flow import evaluated

    module = cst.parse_module("for x in f(y):\n    pass\nwith a(), b() as c:\n    pass\n")
    loop, with_ = module.body
    code = cst.Module([]).code_for_node
    assert code(evaluated("for", loop)) == "f(y)"
    assert {n for n in vars_in(evaluated("with", with_))} == {"a", "b"}
    assert evaluated("small", loop) is loop
