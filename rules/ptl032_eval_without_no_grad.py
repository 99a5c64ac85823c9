"""PTL032 eval-without-no-grad."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ptlint.analysis.names import dotted
from ptlint.rule import Rule

_NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
            "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode")
_SET_GRAD = ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
             "torch.autograd.grad_mode.set_grad_enabled")
_WANTS_GRAD = ("torch.enable_grad", "torch.autograd.grad", "torch.autograd.backward",
               "torch.autograd.functional.jacobian", "torch.autograd.functional.hessian",
               "torch.func.grad", "torch.func.vjp", "torch.func.jacrev")


def _named_like_no_grad(node: cst.BaseExpression) -> bool:
    """A project's own wrapper: `@smart_inference_mode()`, `with torch_no_grad():`."""
    if isinstance(node, cst.Call):
        node = node.func
    name = node.attr.value if isinstance(node, cst.Attribute) else (
        node.value if isinstance(node, cst.Name) else "")
    return "no_grad" in name or "inference_mode" in name


@dataclass
class _Scope:
    name: str | None  # the function's name; None at module level
    no_grad: bool  # decorated with @torch.no_grad() / @torch.inference_mode()
    # ("eval" | "train" | "call" | "grad", model, the call when it is a candidate)
    events: list[tuple[str, str | None, cst.Call | None]] = field(default_factory=list)

    def wants_grad(self) -> None:
        """backward, autograd.grad, enable_grad, requires_grad_ ... from here on."""
        self.events.append(("grad", None, None))


class EvalWithoutNoGrad(Rule):
    """
    ## What it does
    Flags a model called inside a loop after `model.eval()`, in the same
    function, outside `torch.no_grad()` / `torch.inference_mode()`: an
    evaluation loop that builds autograd graphs it never uses.

    To stay precise it is silent when, between the `.eval()` and the call,
    `model.train()` is called; when the function is decorated with
    `@torch.no_grad()`/`@torch.inference_mode()` (or a wrapper whose name
    contains `no_grad`/`inference_mode`, such as `@smart_inference_mode()`),
    or is called (anywhere in the file) inside such a block; when gradients are computed after the
    `.eval()` (and before the next `.train()`): `.backward()`,
    `torch.autograd.grad`, `torch.enable_grad()`, `requires_grad_()`,
    `.requires_grad = ...`, as saliency maps and adversarial examples do;
    and when the file turns gradients off globally with
    `torch.set_grad_enabled(False)`. Calls inside
    `with torch.set_grad_enabled(<condition>):` count as guarded.

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
    requires_text = (".eval()",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scopes: list[_Scope] = [_Scope(None, False)]
        self.no_grad_depth = 0
        self.with_stack: list[bool] = []
        self.loop_depth = 0
        self.loops_saved: list[tuple[int, int]] = []
        self.called_without_grad: set[str] = set()  # functions called inside no_grad blocks
        self.global_off = False
        self.with_items: set[int] = set()
        self.candidates: list[tuple[_Scope, cst.Call]] = []

    # -- scopes ------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        decorated = any(self.qualified_name(d.decorator) in _NO_GRAD
                        or _named_like_no_grad(d.decorator) for d in node.decorators)
        self.scopes.append(_Scope(node.name.value, decorated))
        self.loops_saved.append((self.loop_depth, self.no_grad_depth))
        self.loop_depth = self.no_grad_depth = 0

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._close(self.scopes.pop())
        self.loop_depth, self.no_grad_depth = self.loops_saved.pop()

    def leave_Module(self, node: cst.Module) -> None:
        self._close(self.scopes.pop())
        if self.global_off:
            return
        for scope, call in self.candidates:
            if scope.name is None or scope.name not in self.called_without_grad:
                self.report(call, message=(
                    f"`{dotted(call.func)}` is called in evaluation mode without "
                    "`torch.no_grad()`: every batch builds an autograd graph"))

    def _close(self, scope: _Scope) -> None:
        """Split the function at each `.eval()`/`.train()`: calls of a model in
        its eval segment are findings unless the segment wants gradients."""
        if scope.no_grad:
            return
        segments: dict[str, list[cst.Call]] = {}  # model -> calls since its .eval()
        wanting: set[str] = set()  # models whose eval segment computes gradients
        done: list[tuple[str, list[cst.Call]]] = []
        for kind, model, call in scope.events:
            if kind == "grad":
                wanting |= set(segments)
            elif kind in ("eval", "train"):
                if model in segments:
                    done.append((model, segments.pop(model)))
                if kind == "eval":
                    segments[model] = []
                    wanting.discard(model)
            elif model in segments and call is not None and not segments[model]:
                segments[model].append(call)  # one finding per model and eval
        done.extend(segments.items())
        for model, calls in done:
            if model not in wanting:
                self.candidates.extend((scope, c) for c in calls)

    # -- blocks ----------------------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        off = False
        for item in node.items:
            self.with_items.add(id(item.item))
            qualified = self.qualified_name(item.item)
            if qualified in _NO_GRAD or _named_like_no_grad(item.item):
                off = True
            elif qualified in _SET_GRAD and isinstance(item.item, cst.Call) and item.item.args:
                # `set_grad_enabled(False)`, or `(phase == "train")`: off at least sometimes
                value = item.item.args[0].value
                off = off or not (isinstance(value, cst.Name) and value.value == "True")
            elif qualified == "torch.enable_grad":
                self.scopes[-1].wants_grad()
        self.with_stack.append(off)
        self.no_grad_depth += off

    def leave_With(self, node: cst.With) -> None:
        self.no_grad_depth -= self.with_stack.pop()

    def visit_For(self, node: cst.For) -> None:
        self.loop_depth += 1

    def leave_For(self, node: cst.For) -> None:
        self.loop_depth -= 1

    # a comprehension runs its body once per element, like a loop
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.loop_depth += 1

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self.loop_depth -= 1

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loop_depth += 1

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loop_depth -= 1

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self.loop_depth += 1

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self.loop_depth -= 1

    def visit_While(self, node: cst.While) -> None:
        self.loop_depth += 1

    def leave_While(self, node: cst.While) -> None:
        self.loop_depth -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Attribute) and target.target.attr.value == "requires_grad":
                self.scopes[-1].wants_grad()

    # -- calls -----------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        scope = self.scopes[-1]
        func = node.func
        qualified = self.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if qualified in _SET_GRAD and node.args:
            value = node.args[0].value
            if isinstance(value, cst.Name) and value.value == "False" and id(node) not in self.with_items:
                self.global_off = True
            return
        if qualified in _WANTS_GRAD:
            scope.wants_grad()
            return
        if self.no_grad_depth or scope.no_grad:
            name = func.value if isinstance(func, cst.Name) else (
                func.attr.value if isinstance(func, cst.Attribute) else None)
            if name is not None:
                self.called_without_grad.add(name)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("backward", "requires_grad_", "retain_grad"):
                scope.wants_grad()
                return
            model = dotted(func.value)
            if model is not None and method in ("eval", "train") and \
                    not (method == "train" and node.args and _is_false(node.args[0].value)):
                scope.events.append(("eval" if method == "eval" else "train", model, None))
                return
            if model is not None and method == "train":  # model.train(False)
                scope.events.append(("eval", model, None))
                return
        model = dotted(func)
        if model is not None and qualified is None:
            call = node if self.loop_depth and not self.no_grad_depth else None
            scope.events.append(("call", model, call))


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"
