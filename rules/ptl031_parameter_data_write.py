"""PTL031 parameter-data-write."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import keyword
from ptlint.fixers.expressions import call_method
from ptlint.model import Safety
from ptlint.analysis.names import dotted, is_named
from ptlint.rule import Rule

_NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
            "torch.autograd.grad_mode.no_grad")
_PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad"})
_PARAM_ATTRS = frozenset({"weight", "bias"})
# `torch.nn.utils` (and `.parametrizations`) functions that recompute a weight from new
# parameters before every forward
_REPARAMETRIZE = frozenset({"weight_norm", "spectral_norm"})


def _is_data(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "data"


def _method_receiver(call: cst.Call) -> cst.BaseExpression | None:
    """`x` in `x.add_(...)` for an in-place method (name ending in one `_`)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    if not name.endswith("_") or name.endswith("__") or name in _NOT_WRITES:
        return None
    return func.value


_CONVERSIONS = frozenset({"to", "type", "float", "half", "double", "bfloat16", "int", "long",
                          "short", "char", "byte", "bool", "cuda", "cpu", "contiguous"})


def _converts(value: cst.BaseExpression) -> bool:
    """`x.to(dtype)`, `x.half()`, `x.cuda()`: a new dtype, device or layout."""
    return (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _CONVERSIONS)


# `nn.init`'s deprecated names without the trailing underscore, which fill in place too
_OLD_INITIALISERS = frozenset({"uniform", "normal", "constant", "xavier_uniform", "xavier_normal",
                               "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"})


def _initialises(qualified: str) -> bool:
    """An `nn.init` function that fills its tensor in place (`normal_`, the old
    `normal`), not one that only reads it (`_calculate_fan_in_and_fan_out`)."""
    if not qualified.startswith("torch.nn.init."):
        return False
    name = qualified.rsplit(".", 1)[1]
    return name.endswith("_") or name in _OLD_INITIALISERS


class ParameterDataWrite(Rule):
    """
    ## What it does
    Flags writes to a parameter through `.data`: in-place methods
    (`p.data.copy_(x)`, `p.data.add_(...)`, `m.weight.data.normal_(0, 0.02)`,
    also on a slice: `w.data[:, :k].normal_(1, 0.02)`),
    item assignment (`p.data[0] = 1`), `nn.init.*_(p.data)` (not the
    helpers that only read it, such as `_calculate_fan_in_and_fan_out`), augmented
    assignment (`p.data -= lr * p.grad`) and rebinding (`p.data = x`);
    `p.data = nn.init.normal_(p.data)` is one finding, fixed as
    `nn.init.normal_(p)`.

    A parameter is an attribute named `weight` or `bias` (not of a
    `FrozenBatchNorm2d(...)` made in the same function, whose `weight` and
    `bias` are buffers, nor the `weight` of a module wrapped in
    `weight_norm(...)` or `spectral_norm(...)` there or in a `self.`
    attribute, which is recomputed from other parameters before every
    forward, nor in a file that imports another framework, such as
    Paddle or TensorFlow, and never names torch), and, in a file
    whose code names torch (the `model.parameters()` of another framework,
    such as micrograd's or Paddle's, hold no torch parameters), the loop
    variable of `for p in model.parameters()` (not when `model` is an
    instance of a class of the file without a base, micrograd's `MLP`;
    also `named_parameters()`,
    `zip(...)` of them and optimizer `param_groups`), a name or `self.`
    attribute assigned `nn.Parameter(...)` (not `nn.Parameter(x,
    requires_grad=False)`: a buffer in all but name), or a tensor created with
    `requires_grad=True` or made a leaf by `x.requires_grad = True` /
    `x.requires_grad_()` (an adversarial perturbation) in the same function. Reads through `.data` and writes
    to `.grad` are not flagged.

    This rule is off by default. Most `.data` writes in real code are
    initialisation, weight averaging or clipping done after the optimizer
    step, when no pending graph has saved the parameter, so they compute the
    right thing today; the rule moves such code to the form that stays
    correct when that changes.

    ## Why is this bad?
    `.data` gives a view of the tensor that autograd does not track at all:
    in-place changes through it do not bump the tensor's version counter.
    If the parameter was saved for a backward pass that has not run yet
    (modified between the forward pass and `loss.backward()`), autograd
    silently computes gradients from the modified values instead of raising
    "one of the variables needed for gradient computation has been modified
    by an inplace operation". `.detach()` shares the memory just the same but
    keeps the version counter, and `with torch.no_grad():` (which `nn.init`
    and the optimizers use) states the intent.

    ## Example
    ```python
    import torch.nn as nn
    model = nn.Linear(4, 2)
    model.weight.data.normal_(0.0, 0.02)
    for p in model.parameters():
        p.data.clamp_(-0.01, 0.01)
    ```

    Use instead:
    ```python
    import torch
    import torch.nn as nn
    model = nn.Linear(4, 2)
    nn.init.normal_(model.weight, 0.0, 0.02)
    with torch.no_grad():
        for p in model.parameters():
            p.clamp_(-0.01, 0.01)
    ```

    ## Fix safety
    Unsafe. The fix replaces `p.data` with `p.detach()` in in-place calls and
    item assignments (`p.data.copy_(x)` -> `p.detach().copy_(x)`), and with
    `p` inside `torch.no_grad()` blocks and as the argument of `nn.init`
    functions (which run under `no_grad`). The values written are the same,
    but autograd now sees the write: where a pending backward pass needs the
    old values it raises an error instead of silently using the new ones.
    Rebinding (`p.data = x`, which may change the shape, dtype or device)
    and augmented assignment outside `no_grad` are reported without a fix.

    ## References
    - [PyTorch 0.4 migration guide: what about `.data`?](https://pytorch.org/blog/pytorch-0_4_0-migration-guide/#what-about-data)
    - [`torch.Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    - [Autograd mechanics: in-place correctness checks](https://pytorch.org/docs/stable/notes/autograd.html#in-place-correctness-checks)
    """

    code = "PTL031"
    message = "Write to a parameter through `.data` hides it from autograd's checks"
    fix_title = "Write through `.detach()` (or directly under `no_grad`)"
    fix_safety = Safety.UNSAFE
    default_enabled = False
    requires_text = (".data",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.params: list[set[str]] = [set()]  # names known to hold parameters, per function
        # per function (the first: the class's `self.` names), the attributes of a name that
        # are no parameters: a FrozenBatchNorm's `weight` and `bias` (buffers), the `weight`
        # of a module under `weight_norm(...)` (computed from `weight_g` and `weight_v`)
        self.frozen: list[dict[str, frozenset[str]]] = [{}]
        self.no_grad: list[bool] = [False]
        self.with_pushed: list[bool] = []
        self.reported: set[int] = set()
        # classes of the file without a base (micrograd's `MLP`), and names bound to an
        # instance of one: their `parameters()` are no torch parameters
        self.plain_classes: set[str] = set()
        self.plain_instances: set[str] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if all(is_named(base.value, "object") for base in node.bases):
            self.plain_classes.add(node.name.value)

    # -- scopes and no_grad blocks -----------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        decorated = any(self.qualified_name(d.decorator) in _NO_GRAD for d in node.decorators)
        self.no_grad.append(decorated)
        self.params.append(set(self.params[-1]))
        self.frozen.append({})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.no_grad.pop()
        self.params.pop()
        self.frozen.pop()

    def visit_With(self, node: cst.With) -> None:
        entering = any(self.qualified_name(item.item) in _NO_GRAD for item in node.items)
        self.with_pushed.append(entering)
        if entering:
            self.no_grad.append(True)

    def leave_With(self, node: cst.With) -> None:
        if self.with_pushed.pop():
            self.no_grad.pop()

    # -- what holds a parameter ---------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        names = self._parameter_loop_targets(node.target, node.iter)
        self.params[-1].update(names)

    def _parameter_loop_targets(self, target: cst.BaseExpression, it: cst.BaseExpression) -> set[str]:
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute):
            method = it.func.attr.value
            if dotted(it.func.value) in self.plain_instances:
                return set()
            if method == "parameters" and isinstance(target, cst.Name):
                return {target.value}
            if method == "named_parameters" and isinstance(target, cst.Tuple) \
                    and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name):
                return {target.elements[1].value.value}
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate") \
                and isinstance(target, cst.Tuple):
            sources = [a.value for a in it.args]
            elements = [e.value for e in target.elements]
            if it.func.value == "enumerate" and len(elements) == 2 and sources:
                return self._parameter_loop_targets(elements[1], sources[0])
            if len(sources) == len(elements):
                out: set[str] = set()
                for el, src in zip(elements, sources):
                    out |= self._parameter_loop_targets(el, src)
                return out
        if isinstance(it, cst.Subscript) and isinstance(target, cst.Name):
            index = it.slice[0].slice if it.slice else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString) \
                    and index.value.evaluated_value == "params":
                return {target.value}
        return set()

    def _assign(self, node: cst.Assign) -> None:
        value = node.value
        holds = False
        if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
            flag = keyword(value, "requires_grad")
            literal = flag.value.value if flag is not None and isinstance(flag.value, cst.Name) \
                else None
            if self.qualified_name(value.func) in _PARAMETER:
                holds = literal != "False"  # `nn.Parameter(flag, requires_grad=False)`: a buffer
            else:
                holds = literal == "True"
        frozen = self._not_parameters(value)
        for target in node.targets:
            name = dotted(target.target)
            if name is None:
                continue
            if frozen:
                self.frozen[0 if name.startswith("self.") else -1][name] = frozen
            else:
                self.frozen[-1].pop(name, None)
            if holds:
                self.params[-1].add(name)
                if name.startswith("self.") and len(self.params) > 1:
                    self.params[0].add(name)  # a class's parameters, seen from its methods
            else:
                self.params[-1].discard(name)

    def _not_parameters(self, value: cst.BaseExpression) -> frozenset[str]:
        """The attributes of what `value` makes that are no parameters: `weight` and
        `bias` of `FrozenBatchNorm2d(...)`, the `weight` (or `name=`) of
        `weight_norm(conv)` or `spectral_norm(conv)`."""
        if not isinstance(value, cst.Call):
            return frozenset()
        if (dotted(value.func) or "").rsplit(".", 1)[-1].startswith("FrozenBatchNorm"):
            return _PARAM_ATTRS
        if (self.qualified_name(value.func) or "").rsplit(".", 1)[-1] not in _REPARAMETRIZE:
            return frozenset()
        name = keyword(value, "name")
        if name is None:
            return frozenset({"weight"})
        return frozenset({name.value.evaluated_value}) if isinstance(
            name.value, cst.SimpleString) else _PARAM_ATTRS

    def _is_parameter(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value in _PARAM_ATTRS:
            owner = dotted(node.value)
            return not self.context.foreign and all(
                node.attr.value not in names.get(owner, ()) for names in (self.frozen[0],
                                                                          self.frozen[-1]))
        name = dotted(node)
        return (name is not None and (name in self.params[-1] or name in self.params[0])
                and self.context.names_torch)  # micrograd's values hold no torch parameters

    # -- writes ---------------------------------------------------------------
    def _data_of_parameter(self, node: cst.BaseExpression) -> cst.Attribute | None:
        if _is_data(node) and self._is_parameter(node.value):
            return node
        return None

    def _replacement(self, data: cst.Attribute) -> cst.BaseExpression:
        if self.no_grad[-1]:
            return data.value
        return call_method(data.value, "detach")

    def visit_Call(self, node: cst.Call) -> None:
        receiver = _method_receiver(node)
        if isinstance(receiver, cst.Subscript):  # `w.data[:, :k].normal_()`: a view of it
            receiver = receiver.value
        if receiver is not None:
            # the first in-place call on `p.data` in a chain: `p.data.mul_(d).add_(x)`
            data = self._data_of_parameter(receiver)
            if data is not None:
                if id(data) not in self.reported:
                    self.reported.add(id(data))
                    self.report(node, edits=[(data, self._replacement(data))])
                return
        qualified = self.qualified_name(node.func) or ""
        if _initialises(qualified) and node.args and id(node) not in self.reported:
            data = self._data_of_parameter(node.args[0].value)
            if data is not None:
                self.report(node, edits=[(data, data.value)])

    def _made_leaf(self, name: str | None) -> None:
        """`x.requires_grad = True`, `x.requires_grad_()`: `x` is a leaf like a parameter."""
        if name is not None:
            self.params[-1].add(name)

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                and call.func.attr.value == "requires_grad_" and not call.args:
            self._made_leaf(dotted(call.func.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        [*_, last] = node.targets
        if isinstance(last.target, cst.Attribute) and last.target.attr.value == "requires_grad" \
                and isinstance(node.value, cst.Name) and node.value.value == "True":
            self._made_leaf(dotted(last.target.value))
            return
        self._assign(node)
        plain = isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name) \
            and node.value.func.value in self.plain_classes
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                (self.plain_instances.add if plain else self.plain_instances.discard)(
                    target.target.value)
        if _converts(node.value):
            return  # `p.data = p.data.to(torch.float32)`: no in-place alternative
        if self._initialised_in_place(node):
            return
        for target in node.targets:
            self._target(target.target, augmented=False)

    def _initialised_in_place(self, node: cst.Assign) -> bool:
        """`p.data = init.normal_(p.data, ...)`: the initialiser fills `p.data` in place
        and the assignment puts it back; one finding, fixed as `init.normal_(p, ...)`."""
        call, target = node.value, node.targets[0].target
        if len(node.targets) != 1 or type(call) is not cst.Call or not call.args:
            return False
        data = self._data_of_parameter(target)
        qualified = self.qualified_name(call.func) or ""
        if data is None or not (_initialises(qualified) and call.args[0].keyword is None
                                and call.args[0].value.deep_equals(target)):
            return False
        self.reported.add(id(call))
        first, *rest = call.args
        fixed = call.with_changes(args=[first.with_changes(value=data.value), *rest])
        self.report(node, edits=[(node, cst.Expr(fixed))])
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target, augmented=True)

    def _target(self, target: cst.BaseExpression, *, augmented: bool) -> None:
        if isinstance(target, cst.Subscript):
            data = self._data_of_parameter(target.value)
            if data is not None:
                self.report(target, edits=[(data, self._replacement(data))])
            return
        data = self._data_of_parameter(target)
        if data is None:
            return
        if augmented and self.no_grad[-1]:
            self.report(target, edits=[(data, data.value)])
        else:
            self.report(target)
