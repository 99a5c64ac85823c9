"""PTL032 eval-without-no-grad."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import bound_in, closure, last_name
from ptlint.analysis.names import dotted, is_named
from ptlint.analysis.semantic import BACKWARD, COMPREHENSION, LOOP, Function, Site
from ptlint.analysis.training import MAYBE, OFF, ON, grad_mode
from ptlint.fixers.arguments import argument
from ptlint.rule import Rule
from ptlint.rules._tests import is_test_file

_WANTS_GRAD = ("torch.enable_grad", "torch.autograd.grad", "torch.autograd.backward",
               "torch.autograd.functional.jacobian", "torch.autograd.functional.hessian",
               "torch.func.grad", "torch.func.vjp", "torch.func.jacrev")


class EvalWithoutNoGrad(Rule):
    """
    ## What it does
    Flags a model called inside a loop after `model.eval()` (or `model =
    Net().eval()`), in the same function, outside `torch.no_grad()` /
    `torch.inference_mode()`: an evaluation loop that builds autograd graphs
    it never uses.

    To stay precise it is silent when, between the `.eval()` and the call,
    `model.train()` is called; when the function is decorated with
    `@torch.no_grad()`/`@torch.inference_mode()` (or a wrapper whose name
    contains `no_grad`/`inference_mode`, such as `@smart_inference_mode()`),
    or is called (anywhere in the file) inside such a block; when gradients
    are computed after the `.eval()` (and before the next `.train()`):
    `.backward()`, `torch.autograd.grad`, `torch.enable_grad()`,
    `requires_grad_()`, `.requires_grad = ...`, or a call of a function of
    the file that does, as saliency maps, adversarial examples and
    Hessian-vector products do; when the function freezes the model itself
    (`model.requires_grad_(False)`, also chained: `m.eval().requires_grad_(False)`,
    before or after the `.eval()`); when the model is pytorch-fid's
    `InceptionV3`, frozen unless built with `requires_grad=True` (in a file
    that builds one from `pytorch_fid.inception` or a copied `inception`
    module, also imported relatively, the models its functions take as
    parameters count as that one);
    when the loop around the call builds the model it calls (`for kind in
    kinds: m = Net(kind); m.eval(); m(x)`: one call of each model, no
    evaluation loop); when the loop around the call backpropagates
    (a training loop that evaluates between steps, such as a GAN sampling
    from its generator once per epoch); when the file turns gradients
    off globally with `torch.set_grad_enabled(False)`; in test files
    (`test_*.py`, `*_test.py`, files under `tests/`); and in a file of
    another framework (it imports Jittor, Paddle, … and never names torch).
    Calls inside
    `with torch.set_grad_enabled(<condition>):` count as guarded, and so do
    calls inside a context manager defined in the file whose `yield` runs
    with gradients off (`@contextmanager def evaluating(model): ... with
    torch.no_grad(): yield`), and functions decorated with a decorator
    defined in the file that calls them under `torch.no_grad()`.

    ## Why is this bad?
    `model.eval()` only changes how layers such as dropout and batch norm
    behave; it does not turn off autograd. Without `torch.no_grad()` every
    forward pass records the graph and keeps every intermediate activation
    alive until the outputs are dropped, so evaluation uses far more memory
    than it needs (often enough to run out on batch sizes that fit for
    inference) and runs slower. `torch.inference_mode()` skips even more
    bookkeeping.

    ## Example
    ```python
    import torch

    def evaluate(model, loader):
        model.eval()
        correct = 0
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    Use instead:
    ```python
    import torch

    @torch.inference_mode()
    def evaluate(model, loader):
        model.eval()
        correct = 0
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## References
    - [Autograd mechanics: evaluation mode is not `no_grad`](https://pytorch.org/docs/stable/notes/autograd.html#evaluation-mode-nn-module-eval)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.inference_mode.html)
    """

    code = "PTL032"
    message = "Model called in evaluation mode without `torch.no_grad()`: every batch builds a graph"
    tags = ("performance",)
    requires_text = (".eval()", ".train(False)")

    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        # in walk order: (where, "eval" | "train" | "call" | "grad" | "with", model)
        self.events: list[tuple[Site, str, str | None]] = []
        self.with_items: set[int] = set()
        self.global_off = False
        self.fid_inception = False  # the file builds pytorch-fid's frozen InceptionV3
        self.bound: dict[int, str] = {}  # `m = Net().eval()`: id() of the chain's calls -> `m`
        self.relative_inception: set[str] = set()  # `from .inception import InceptionV3 as I`

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted(node.module) if node.module is not None else None
        if node.relative and module is not None and module.rpartition(".")[2] == "inception" \
                and not isinstance(node.names, cst.ImportStar):
            self.relative_inception.update(
                alias.asname.name.value if alias.asname else "InceptionV3"
                for alias in node.names if dotted(alias.name) == "InceptionV3")

    def visit_With(self, node: cst.With) -> None:
        self.with_items.update(id(item.item) for item in node.items)
        self.events.append((self.model.site(node), "with", None))  # `enable_grad()`?

    def visit_Assign(self, node: cst.Assign) -> None:
        target = dotted(node.targets[0].target) if len(node.targets) == 1 else None
        value = node.value
        while target is not None and isinstance(value, cst.Call) and \
                isinstance(value.func, cst.Attribute):
            self.bound[id(value)] = target  # `model = Generator().eval().cuda()`
            value = value.func.value
        if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
               for t in node.targets):
            self.events.append((self.model.site(node), "grad", None))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if last_name(func) == "set_grad_enabled" and grad_mode(node, self.qualified_name):
            self.global_off |= grad_mode(node, self.qualified_name) == OFF and (
                id(node) not in self.with_items)  # `torch.set_grad_enabled(False)` as a call
            return
        kind, model = "call", dotted(func)
        if type(func) is cst.Name and func.value in self.relative_inception:
            qualified = "inception.InceptionV3"  # `from .inception import InceptionV3`
        if qualified is not None and _frozen_inception(qualified, node):
            self.fid_inception = True
        if qualified in _WANTS_GRAD:
            kind = "grad"
        elif isinstance(func, cst.Attribute):
            method, receiver = func.attr.value, dotted(func.value)
            if method in ("backward", "requires_grad_", "retain_grad"):
                kind = "grad"
                if method == "requires_grad_" and node.args and is_named(node.args[0].value, "False"):
                    # `model.eval().requires_grad_(False)`: that model's parameters are frozen
                    root = func.value
                    while isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute):
                        root = root.func.value
                    frozen = self.bound.get(id(node)) or dotted(root)
                    if frozen is not None:
                        self.events.append((self.model.site(node), "frozen", frozen))
            elif method in ("eval", "train") and (receiver or self.bound.get(id(node))):
                receiver = receiver or self.bound[id(node)]
                off = method == "eval" or (node.args and is_named(node.args[0].value, "False"))
                kind, model = ("eval" if off else "train"), receiver  # `model.train(False)`
        if kind != "call" or (model is not None and qualified is None):
            self.events.append((self.model.site(node), kind, model))
        if kind == "call" and (type(func) is cst.Name or type(func) is cst.Attribute and last_name(
                func.value) in ("self", "cls")):  # `hvp(loss, w)`: does it compute gradients?
            self.events.append((self.model.site(node), "helper", last_name(func)))

    def leave_Module(self, node: cst.Module) -> None:
        if self.global_off or self.context.foreign:  # Jittor's `model.eval()` is not torch's
            return
        if is_test_file(self.context.path, self.context.source):
            return  # a test runs a model to check it: its graphs cost nothing that matters
        without_grad = {model.rpartition(".")[2] for site, kind, model in self.events
                        if kind == "call" and site.ctx.grad in (OFF, MAYBE)}
        by_function: dict[Function, list] = {}
        for event in self.events:
            by_function.setdefault(event[0].ctx.function, []).append(event)
        wanting = self._grad_helpers()
        for function, events in by_function.items():
            if function.name is None or function.name not in without_grad:
                for call in self._candidates(events, self._handed_frozen(function), wanting):
                    self.report(call, message=(
                        f"`{dotted(call.func)}` is called in evaluation mode without "
                        "`torch.no_grad()`: every batch builds an autograd graph"))

    def _handed_frozen(self, function: Function) -> set[str]:
        """The parameters of `function` that hold a frozen model: all of them in a
        file that builds pytorch-fid's InceptionV3 (its feature extractor,
        handed from function to function, is the only model there)."""
        node = function.node
        if not self.fid_inception or not isinstance(node, cst.FunctionDef):
            return set()
        return {p.name.value for p in (*node.params.posonly_params, *node.params.params,
                                       *node.params.kwonly_params)}

    def _grad_helpers(self) -> set[str]:
        """The functions of the file that compute gradients (`.backward()`,
        `torch.autograd.grad`, ...), themselves or through such helpers."""
        direct = {site.ctx.function.name for site, kind, _ in self.events if kind == "grad"}
        return closure(direct - {None}, [(f.every("helper_calls"), {f.name})
                                         for f in self.model.functions if f.name is not None])

    def _candidates(self, events: list, frozen: set[str], helpers: set[str]) -> list[cst.Call]:
        """Split the function at each `.eval()`/`.train()`: the first call of a
        model in a loop of its eval segment is a finding, unless the segment
        wants gradients (also through `helpers` that compute them) or the model
        is `frozen`."""
        segments: dict[str, list[cst.Call]] = {}  # model -> calls since its .eval()
        wanting: set[str] = set()  # models whose eval segment computes gradients
        frozen = frozen | {model for _, kind, model in events if kind == "frozen"}
        done: list[tuple[str, list[cst.Call]]] = []
        for site, kind, model in events:
            if kind == "grad" or (kind == "with" and site.ctx.grad == ON) or (
                    kind == "helper" and model in helpers):
                wanting |= set(segments)
            elif kind in ("eval", "train"):
                if model in segments:
                    done.append((model, segments.pop(model)))
                if kind == "eval":
                    segments[model] = []
                    wanting.discard(model)
            elif kind == "call" and model in segments and not segments[model] and _evaluates(
                    site, model):
                segments[model].append(site.node)  # one finding per model and eval
        done.extend(segments.items())
        return [call for model, calls in done if model not in wanting | frozen for call in calls]


def _frozen_inception(qualified: str, call: cst.Call) -> bool:
    """`InceptionV3(...)` of pytorch-fid (`pytorch_fid.inception`, or the module
    `inception` that FID scripts copy along): its parameters are frozen unless
    built with `requires_grad=True`."""
    if qualified != "inception.InceptionV3" and not qualified.endswith(".inception.InceptionV3"):
        return False
    if any(a.star for a in call.args):  # `**options` may set it
        return False
    # InceptionV3(output_blocks, resize_input, normalize_input, requires_grad, ...)
    flag = argument(call, "requires_grad", 3)
    return flag is None or is_named(flag.value, "False")


def _evaluates(site: Site, model: str) -> bool:
    """In a loop (or comprehension) that does not backpropagate, with gradients on,
    and does not build `model` itself (`for pos in kinds: m = Net(pos).eval(); m(x)`
    runs each model it builds once)."""
    around = site.ctx.innermost(LOOP, COMPREHENSION)
    return around is not None and site.ctx.grad not in (OFF, MAYBE) and not (
        around.kind == LOOP and (around.loop.does(BACKWARD)
                                 or model in bound_in(around.loop.events, from_calls=True)))
