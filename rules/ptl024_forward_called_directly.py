"""PTL024 forward-called-directly."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import libcst as cst

from ptlint.model import Safety
from ptlint.analysis.dataflow import assigned_pairs
from ptlint.analysis.names import dotted
from ptlint.rule import Rule

# torch.nn classes that are not modules
_NOT_MODULES = frozenset({"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer",
                          "ParameterList", "ParameterDict"})
_NOT_MODEL_BUILDERS = frozenset({"get_weight", "get_model_weights", "list_models"})
# methods that return the module itself
_RETURNS_SELF = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "half", "double",
                           "bfloat16", "requires_grad_", "to_empty", "xpu", "type", "share_memory"})


@dataclass
class _Scope:
    """Assignments to names in one function (or the module) and the `.forward` calls on them."""

    params: set[str] = field(default_factory=set)
    modules: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    others: set[str] = field(default_factory=set)
    calls: list[tuple[str, cst.Call]] = field(default_factory=list)


@dataclass
class _Class:
    name: str
    modules: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    others: set[str] = field(default_factory=set)
    calls: list[tuple[str, cst.Call]] = field(default_factory=list)


class ForwardCalledDirectly(Rule):
    """
    ## What it does
    Flags `model.forward(x)` and `self.encoder.forward(x)` on objects known to
    be `nn.Module`s: a name or `self.<attribute>` that the file only ever
    assigns a module (`nn.Linear(...)`, `nn.Sequential(...)`, a torchvision
    model, a class of the same file that subclasses `nn.Module`, possibly
    followed by `.to(device)`/`.eval()`).

    ## Why is this bad?
    Calling a module (`model(x)`) runs `Module.__call__`, which runs the
    registered forward pre-hooks and hooks (including those installed by
    libraries: pruning, quantization observers, `torch.utils.checkpoint`
    wrappers, activation capture, FSDP/DDP bookkeeping) around `forward`.
    Calling `.forward` directly silently skips all of them.

    `super().forward(x)`, `self.forward(x)` and `Base.forward(self, x)` are not
    flagged, nor are objects that are not known modules (an OpenCV net, a
    parameter, anything returned by an unknown function).

    ## Example
    ```python
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(4, 2), nn.ReLU())

    def predict(x):
        return model.forward(x)
    ```

    Use instead:
    ```python
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(4, 2), nn.ReLU())

    def predict(x):
        return model(x)
    ```

    ## Fix safety
    Unsafe: the fix calls the module instead, so hooks that were skipped now
    run, which can change outputs (pruning masks, quantization observers),
    memory use and speed.
    """

    code = "PTL024"
    message = "`{name}.forward(...)` called directly: module hooks are skipped"
    fix_title = "Call the module: `{name}(...)`"
    fix_safety = Safety.UNSAFE
    requires_text = (".forward(",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scopes: list[_Scope] = [_Scope()]
        # enclosing classes and functions; a function carries (class, name of `self`)
        # when it is a method or a closure inside one
        self.contexts: list[tuple[str, object]] = []
        self.module_classes: set[str] = set()  # classes of this file that are modules
        self.callable_classes: set[str] = set()  # ... that define their own __call__

    # -- what is a module ----------------------------------------------------------------
    def _is_module(self, value: cst.BaseExpression) -> bool:
        while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
               and value.func.attr.value in _RETURNS_SELF and isinstance(value.func.value, cst.Call)):
            value = value.func.value
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return False
        qualified = self.qualified_name(value.func)
        if qualified is None:
            name = value.func.value if isinstance(value.func, cst.Name) else None
            return name in self.module_classes and name not in self.callable_classes
        last = qualified.rsplit(".", 1)[1]
        if qualified.startswith("torch.nn.") and last[:1].isupper():
            return last not in _NOT_MODULES
        if qualified.startswith("torchvision.models."):
            return last not in _NOT_MODEL_BUILDERS and not last.endswith("_Weights")
        return False

    def _is_module_base(self, base: cst.BaseExpression) -> bool:
        qualified = self.qualified_name(base)
        if qualified is not None:
            return qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[1][:1].isupper()
        return isinstance(base, cst.Name) and base.value in self.module_classes

    # -- scopes ------------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(self._is_module_base(arg.value) for arg in node.bases):
            self.module_classes.add(node.name.value)
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "__call__" for s in body):
            self.callable_classes.add(node.name.value)
        self.contexts.append(("class", _Class(node.name.value)))
        self.scopes[-1].others.add(node.name.value)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        cls = self.contexts.pop()[1]
        for attr, call in cls.calls:  # type: ignore[attr-defined]
            if cls.modules.get(attr) and attr not in cls.others:  # type: ignore[attr-defined]
                self._report(call)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes[-1].others.add(node.name.value)
        scope = _Scope()
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        scope.params = {p.name.value for p in params}
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.params.add(star.name.value)
        self.scopes.append(scope)
        owner = None
        if self.contexts:
            kind, parent = self.contexts[-1]
            if kind == "class" and params:
                owner = (parent, params[0].name.value)
            elif kind == "function":
                owner = parent
        self.contexts.append(("function", owner))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self.scopes.pop()
        self.contexts.pop()
        self._resolve(scope, self.scopes[-1])

    def _owner(self) -> tuple[_Class, str] | None:
        if self.contexts and self.contexts[-1][0] == "function":
            return self.contexts[-1][1]  # type: ignore[return-value]
        return None

    def leave_Module(self, node: cst.Module) -> None:
        self._resolve(self.scopes[-1], None)

    def _resolve(self, scope: _Scope, parent: _Scope | None) -> None:
        for name, call in scope.calls:
            if name in scope.modules or name in scope.others or name in scope.params:
                if scope.modules.get(name) and name not in scope.others and name not in scope.params:
                    self._report(call)
            elif parent is not None:
                parent.calls.append((name, call))  # a closure or global: decided outside

    # -- assignments ---------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            pairs = assigned_pairs(target.target, node.value)
            for tgt, value in pairs:
                self._assign(tgt, value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assign(node.target, None)

    def visit_For(self, node: cst.For) -> None:
        self._assign(node.target, None)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._assign(node.asname.name, None)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        is_module = value is not None and self._is_module(value)
        if isinstance(target, cst.Name):
            scope = self.scopes[-1]
            if is_module:
                scope.modules[target.value] += 1
            else:
                scope.others.add(target.value)
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            owner = self._owner()
            if owner is not None and target.value.value == owner[1]:
                cls = owner[0]
                if is_module:
                    cls.modules[target.attr.value] += 1
                else:
                    cls.others.add(target.attr.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._assign(element.value, None)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, None)

    # -- calls -------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "forward"):
            return
        receiver = func.value
        if isinstance(receiver, cst.Name):
            self.scopes[-1].calls.append((receiver.value, node))
        elif isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name):
            owner = self._owner()
            if owner is not None and receiver.value.value == owner[1]:
                owner[0].calls.append((receiver.attr.value, node))

    def _report(self, call: cst.Call) -> None:
        receiver = call.func.value  # type: ignore[attr-defined]
        name = dotted(receiver) or "module"
        self.report(call, message=self.message.format(name=name),
                    replacement=call.with_changes(func=receiver),
                    fix_title=self.fix_title.format(name=name))
