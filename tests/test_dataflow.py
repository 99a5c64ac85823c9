"""The statement walker and variable helpers of `ptlint.analysis.dataflow`."""
from __future__ import annotations

import textwrap

import libcst as cst

from ptlint.analysis.dataflow import (calls_in, closure, method_name, statements, target_vars, var,
                                     vars_in)


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


def test_method_name_only_for_method_calls():
    def of(code: str) -> str | None:
        return method_name(cst.parse_expression(code))

    assert of("model.state_dict()") == "state_dict"
    assert of("a.b.to(device).cuda()") == "cuda"
    assert of("f(x)") is None and of("x.item") is None and of("f(x)(y)") is None
    assert method_name(None) is None


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
    from ptlint.analysis.dataflow import evaluated

    module = cst.parse_module("for x in f(y):\n    pass\nwith a(), b() as c:\n    pass\n")
    loop, with_ = module.body
    code = cst.Module([]).code_for_node
    assert code(evaluated("for", loop)) == "f(y)"
    assert {n for n in vars_in(evaluated("with", with_))} == {"a", "b"}
    assert evaluated("small", loop) is loop


def test_value_keys_stop_at_host_values():
    from ptlint.analysis.dataflow import value_keys

    expr = cst.parse_expression("out.logits.softmax(1) + loss.item() + float(x) + y.shape[0]")
    assert value_keys(expr) == {"out", "softmax", "loss", "item", "x", "y"} - {"softmax", "item"}
    resolve = {"float": "builtins.float"}.get
    assert value_keys(expr, lambda n: resolve(getattr(n, "value", "")), stop_at_host=True) == {"out"}


def test_assignments_of_a_loop():
    from ptlint.analysis.dataflow import assignments

    loop = cst.parse_module(textwrap.dedent("""
        for x, y in loader:
            x = x.to(device)
            noise = torch.randn(3)
            out = model(x)
            total += out.item()
    """)).body[0]
    found = assignments(statements([loop]), lambda n: None)
    assert [sorted(a.targets) for a in found] == [["x", "y"], ["x"], ["noise"], ["out"], ["total"]]
    header, moved, noise, out, total = found
    assert header.fresh and moved.move and noise.fresh and not out.move
    assert out.reads == {"x"} and not out.arithmetic  # a callee is not read
    assert total.host is False and total.reads == {"total"}


def test_bound_in_and_from_calls():
    from ptlint.analysis.dataflow import bound_in

    events = list(statements(cst.parse_module(textwrap.dedent("""
        opt = SGD(params)
        self.sched = other
        for p in params:
            pass
        with ctx() as c:
            pass
    """)).body))
    assert bound_in(events) == {"opt", "self.sched", "p", "c"}
    assert bound_in(events, from_calls=True) == {"opt"}
