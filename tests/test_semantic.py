"""The semantic model: what it says about a file's training code."""
from __future__ import annotations

import textwrap

import libcst as cst

from ptlint.analysis import training as t
from ptlint.analysis.names import NameResolver, ScopeExit
from ptlint.analysis.semantic import BACKWARD, STEP, SemanticModel
from ptlint.analysis.walk import descendants, walk


def _model(source: str) -> tuple[SemanticModel, cst.Module]:
    module = cst.parse_module(textwrap.dedent(source))
    names = NameResolver()
    model = SemanticModel(names)
    walk(module, [names, model, ScopeExit(names)])
    return model, module


def _call(module: cst.Module, text: str) -> cst.Call:
    code = cst.Module([]).code_for_node
    return next(n for n in descendants(module) if type(n) is cst.Call and code(n) == text)


def _function(model: SemanticModel, name: str):
    return next(f for f in model.functions if f.name == name)


def test_training_loops_directly_and_through_helpers():
    model, _ = _model("""
        import torch

        def step(model, batch, optimizer):
            loss = model(batch)
            loss.backward()
            optimizer.step()

        def epoch(model, loader, optimizer):
            for batch in loader:
                step(model, batch, optimizer)

        for e in range(3):
            epoch(model, loader, opt)
            for x in loader:
                loss = model(x)
                loss.backward()
                scheduler.step()
    """)
    outer, inner = model.functions[0].loops
    (per_batch,) = _function(model, "epoch").loops
    assert per_batch.training and per_batch.hot  # through `step`, once per call
    assert outer.training and not outer.hot  # `epoch` runs a whole loop per call
    assert not inner.training  # `scheduler.step()` steps no optimizer
    assert model.helpers(BACKWARD, per_call=True) == {"step"}
    assert model.helpers(STEP) == {"step", "epoch"}


def test_hot_loop_and_periodic_guards():
    model, here, sites = _contexts("""
        for x in loader:
            loss = model(x)
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                a = loss.item()
            if dist.get_rank() == 0:
                b = loss.item()
            if is_main_process():
                c = loss.item()
            try:
                d = 1
            except RuntimeError:
                e = loss.item()
            if loss > 0:
                f = loss.item()
            g = loss.item()
    """)
    (loop,) = model.functions[0].loops
    assert here["g = loss.item()"].hot_loop() is loop
    periodic = {k: sites[k].periodic_within(loop) for k in here if "item" in k}
    assert periodic == {"a = loss.item()": True, "b = loss.item()": True, "c = loss.item()": True,
                        "e = loss.item()": True, "f = loss.item()": False,
                        "g = loss.item()": False}


def test_optimizer_steps_by_construction_and_name():
    model, module = _model("""
        import torch
        from torch.optim.lr_scheduler import StepLR

        o = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = StepLR(o, 10)
        scaler = torch.amp.GradScaler()
        for x in loader:
            net(x).sum().backward()
            o.step()
            sched.step()
            scaler.step(opt_g)
            env.step(action)
    """)
    steps = {cst.Module([]).code_for_node(s.node): model.stepped(s)
             for s in model.functions[0].loops[0].sites if s.kind == STEP}
    assert steps["sched.step()"] is None and steps["env.step(action)"] is None
    assert steps["o.step()"][0].value == "o"
    assert steps["scaler.step(opt_g)"][0].value == "opt_g"
    assert model.bindings.models["o"] == "net"


def _contexts(source: str) -> tuple[SemanticModel, dict, dict]:
    """The model, where the walk was at each simple statement, and the site of
    the statement's first small statement, by the statement's code."""
    module = cst.parse_module(textwrap.dedent(source))
    names = NameResolver()
    model = SemanticModel(names)
    found, sites = {}, {}

    class Probe(cst.BatchableCSTVisitor):
        def visit_SimpleStatementLine(self, node):
            code = cst.Module([]).code_for_node(node).strip()
            found[code], sites[code] = model.here, model.site(node.body[0])

    walk(module, [names, model, Probe(), ScopeExit(names)])
    return model, found, sites


def test_grad_modes_block_decorator_and_own_context_manager():
    model, here, _ = _contexts("""
        import contextlib
        import torch

        @contextlib.contextmanager
        def evaluating(net):
            net.eval()
            with torch.no_grad():
                yield net
            net.train()

        @torch.inference_mode()
        def predict(x):
            return net(x)

        def run(flag):
            with torch.set_grad_enabled(flag):
                a = net(x)
            with evaluating(net):
                b = net(x)
            with torch.no_grad():
                with torch.enable_grad():
                    c = net(x)
            d = net(x)
            with torch.inference_mode(False):
                e = net(x)
    """)
    assert here["return net(x)"].grad == t.OFF
    assert here["a = net(x)"].grad == t.MAYBE
    assert here["b = net(x)"].grad == t.OFF
    assert here["c = net(x)"].grad == t.ON
    assert here["d = net(x)"].grad is None
    assert here["e = net(x)"].grad is None


def test_grad_mode_of_a_decorator_defined_in_the_file():
    model, here, _ = _contexts("""
        import torch

        def nograd(f):
            def run(*args):
                with torch.no_grad():
                    return f(*args)
            return run

        def logged(f):
            def run(*args):
                print(f)
                return f(*args)
            return run

        @nograd
        def predict(x):
            a = net(x)

        @logged
        def train(x):
            b = net(x)
    """)
    assert here["a = net(x)"].grad == t.OFF
    assert here["b = net(x)"].grad is None


def test_autocast_regions_literal_held_and_partial():
    model, here, _ = _contexts("""
        import functools
        from contextlib import nullcontext
        import torch

        class Trainer:
            def __init__(self):
                self.amp = functools.partial(torch.autocast, device_type="cuda")

            def fit(self):
                with self.amp():
                    a = 1

        ctx = nullcontext() if cpu else torch.amp.autocast("cuda")
        with ctx:
            b = 2
        with torch.autocast("cuda", enabled=False):
            c = 3
        with torch.cuda.amp.autocast(use_amp):
            d = 4

        @torch.autocast("cuda")
        def forward(x):
            e = 5
            def later():
                f = 6
        with nullcontext():
            g = 7
    """)
    enabled = {k: (v.autocast[1] if v.autocast else "none") for k, v in here.items()}
    assert enabled["a = 1"] is True
    assert enabled["b = 2"] is True
    assert enabled["c = 3"] is False
    assert enabled["d = 4"] is None  # not a literal
    assert enabled["e = 5"] is True
    assert enabled["f = 6"] == "none"  # runs later
    assert enabled["g = 7"] == "none"


def test_what_names_hold():
    model, module = _model("""
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        class Net(nn.Module):
            pass

        class AverageMeter:
            pass

        class History(list):
            pass

        net = Net().cuda()
        criterion = nn.CrossEntropyLoss()
        loader = DataLoader(data)

        def train(meter):
            opt = torch.optim.Adam(net.parameters())
            avg = AverageMeter()
            hist = History()
            losses = []
            snapshot = net.state_dict()
            cls_loss, loc_loss = criterion(out, y), 0
            a, b = criterion(out, y)
            noise = torch.randn(3)
            self.meter = AverageMeter()
    """)
    top, train = model.functions[0], _function(model, "train")
    assert model.holds("net", train) == t.MODULE
    assert model.holds("criterion", train) == t.LOSS_FN
    assert model.holds("loader", top) == t.LOADER
    assert model.holds("opt", train) == t.OPTIMIZER
    assert model.holds("avg", train) == t.INSTANCE
    assert model.holds("hist", train) == t.CONTAINER
    assert model.holds("losses", train) == t.CONTAINER
    assert model.holds("snapshot", train) == t.STATE_DICT
    assert model.holds("cls_loss", train) == t.LOSS and model.holds("loc_loss", train) is None
    assert model.holds("a", train) == t.LOSS and model.holds("b", train) == t.LOSS
    assert model.holds("noise", train) == t.TENSOR
    assert model.holds("meter", train) is None  # a parameter: unknown
    assert model.holds("self.meter", top) == t.INSTANCE


def test_engine_step_functions():
    model, _ = _model("""
        from functools import partial
        from ignite.engine import Engine

        def update(engine, batch):
            loss = model(batch)
            loss.backward()
            optimizer.step()

        def validate(engine, batch):
            return model(batch)

        trainer = Engine(partial(update))
        evaluator = Engine(validate)
        other = NotAnEngine(validate)
    """)
    assert [f.name for f in model.engine_steps] == ["update", "validate"]


def test_path_and_scan():
    model, module = _model("""
        def f(x):
            a = 1
            if x:
                b = 2
                return
            else:
                c = 3
            d = 4
    """)
    call_free = [n for n in descendants(module) if type(n) is cst.SimpleStatementLine]
    path = model.path(call_free[1], module)
    assert [type(n).__name__ for n in path] == [
        "Module", "FunctionDef", "IndentedBlock", "If", "IndentedBlock", "SimpleStatementLine"]
    code = cst.Module([]).code_for_node

    def apply(holder, seen):
        return seen + (code(holder).strip().split("\n")[0],)

    def join(*states):
        return max(states, key=len)

    fn = _function(model, "f")
    assert model.scan(fn.node.body, (), apply, join) == ("a = 1", "if x:", "c = 3", "d = 4")


def test_built_only_for_rules_that_ask_and_a_failure_fails_only_them(monkeypatch):
    from conftest import settings_for
    from ptlint.engine.lint import lint_text

    text = textwrap.dedent("""
        import torch
        for x in loader:
            loss = model(x)
            loss.backward()
            optimizer.step()
        net = torch.nn.DataParallel(net)
    """)
    built = []
    original = SemanticModel.__init__

    def counting(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(SemanticModel, "__init__", counting)
    assert [f.code for f in lint_text(text, "t.py", settings_for("PTL102")).findings] == ["PTL102"]
    assert built == []  # no enabled rule asked for it
    assert [f.code for f in lint_text(text, "t.py", settings_for("PTL003")).findings] == ["PTL003"]
    assert len(built) == 1

    def boom(self, node):
        raise RuntimeError("injected")

    monkeypatch.setattr(SemanticModel, "_visit_Call", boom)
    for timings in (None, {}):
        result = lint_text(text, "t.py", settings_for("PTL003", "PTL102"), timings=timings)
        assert result.errors == ["t.py: internal error in PTL003: RuntimeError: injected"]
        assert [f.code for f in result.findings] == ["PTL102"]


def test_the_statement_that_holds_a_site():
    model, _ = _model("""
        def f(opt, x):
            if opt.step():
                opt.zero_grad()
            while x: opt.zero_grad()
            with ctx(opt.step()):
                loss.backward()
            run(lambda: y.backward())
    """)
    code = cst.Module([]).code_for_node
    sites = sorted((s for f in model.functions for s in f.all_sites()), key=lambda s: s.order)
    assert [(code(s.node), type(s.line).__name__) for s in sites] == [
        ("opt.step()", "If"), ("opt.zero_grad()", "SimpleStatementLine"),
        ("opt.zero_grad()", "SimpleStatementSuite"), ("opt.step()", "With"),
        ("loss.backward()", "SimpleStatementLine"), ("y.backward()", "SimpleStatementLine")]
