"""PTL233 index-of-scalar-loss."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.bindings import SUMS
from ptlint.analysis.dataflow import bound_in, last_name, var
from ptlint.analysis.semantic import BACKWARD
from ptlint.analysis.training import LOSS
from ptlint.analysis.walk import descendants
from ptlint.fixers.expressions import call_method
from ptlint.model import Safety
from ptlint.rule import Rule


class IndexOfScalarLoss(Rule):
    """
    ## What it does
    Flags `x.data[0]` (and `loss[0]`, on a name that says it is a loss)
    where `x` holds the value of a loss function in that function:
    `loss = criterion(out, y)`, `loss = F.nll_loss(...)`,
    `loss = nn.MSELoss()(a, b)`, losses summed or scaled
    (`d_loss = d_loss_real + 0.5 * d_loss_fake`), or any value bound once in
    the function and backpropagated there without a gradient argument
    (`loss, prec = self._forward(x, y)`, then `loss.backward()`, which needs a
    one-element tensor: 0-dim, from any loss of today, and `.item()` reads
    either), or a term of such a value bound once (`penalty` of `d_loss =
    d_fake - d_real + 10 * penalty`: broadcasting never shrinks a tensor, so
    each term has one element too); also a loss function's call indexed in place
    (`F.nll_loss(out, y).data[0]`), and so a reduction over every element
    (`gamma.mean().data[0]`, `torch.sum(x).data[0]`: no `dim`, a 0-dim tensor,
    or a NumPy scalar, which `.data[0]` cannot index either). A name with any other binding in the
    function, a loss computed with `reduction="none"` or `reduce=False` there
    (one value per element), and an index taken where a test has just found
    the value to be a tuple or a list (`out[0] if isinstance(out, (tuple,
    list)) else out`: a loss function that returns several values) are not
    flagged.

    ## Why is this bad?
    Before PyTorch 0.4 a loss was a one-element vector and `loss.data[0]`
    read its value. Since 0.4 a loss is a 0-dim tensor, and since 0.5
    indexing it raises `IndexError: invalid index of a 0-dim tensor. Use
    tensor.item()`: the line cannot run on any torch that installs today.

    ## Example
    ```python
    loss = criterion(model(x), y)
    total += loss.data[0]
    ```

    Use instead:
    ```python
    loss = criterion(model(x), y)
    total += loss.item()
    ```

    ## Fix safety
    Unsafe: the fix writes `loss.item()`, which returns the value the line
    meant on every torch, but where the loss is not a scalar after all (a
    loss function of the project's own that returns a vector) `.item()`
    raises instead of reading the first element.

    ## References
    - [PyTorch 0.4 migration guide: getting a Python number](https://pytorch.org/blog/pytorch-0_4_0-migration-guide/)
    - [torch.Tensor.item](https://pytorch.org/docs/stable/generated/torch.Tensor.item.html)
    """

    code = "PTL233"
    message = "A loss is a 0-dim tensor: indexing it raises `IndexError` (since torch 0.5); use `.item()`"
    fix_title = "Use `.item()`"
    fix_safety = Safety.UNSAFE
    requires_text = ("data[0]", "oss[0]")  # `loss.data[0]`, `loss[0]`
    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.indexed: list[tuple[cst.Subscript, cst.BaseExpression, object]] = []

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if not (isinstance(index, cst.Integer) and index.value == "0"):
            return
        value = node.value
        if isinstance(value, cst.Attribute) and value.attr.value == "data":
            value = value.value  # `x.data[0]`: the legacy idiom, whatever `x` is called
        elif "loss" not in last_name(value).lower():
            return  # `x[0]`: only a name that says it is a loss (the rest are many)
        if isinstance(value, (cst.Name, cst.Attribute, cst.Call)):
            self.indexed.append((node, value, self.model.site(node).ctx.function))

    def leave_Module(self, original_node: cst.Module) -> None:
        # (what names hold is known once the whole file is walked)
        for node, value, function in self.indexed:
            reduced = isinstance(value, cst.Call) and node.value is not value and (
                self._reduction(value))  # `x.mean().data[0]`
            loss = reduced or (self.model.bindings.is_loss_call(value, function) if isinstance(
                value, cst.Call) else self.model.holds(var(value), function) == LOSS or (
                _backpropagated(var(value), function)))
            if loss and not _per_element(function.node) and not _sequence_checked(
                    self.model.path(node, function.node), value):
                self.report(node, replacement=call_method(value, "item"), message=(
                    "A reduction over every element is a 0-dim tensor: indexing it raises "
                    "`IndexError` (since torch 0.5); use `.item()`") if reduced else None)

    def _reduction(self, call: cst.Call) -> bool:
        """`x.mean()`, `x.sum()`, `torch.mean(x)`: every element reduced to one value."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in _REDUCTIONS:
            return False
        if not call.args:  # `x.mean()`; `torch.mean()` takes an input
            return self.qualified_name(func) is None
        return len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star \
            and self.qualified_name(func) == f"torch.{func.attr.value}"


# reductions that, given no `dim`, reduce every element to one value
_REDUCTIONS = frozenset({"mean", "sum", "prod", "norm", "max", "min", "std", "var", "median",
                         "logsumexp", "amax", "amin", "nansum", "nanmean"})


def _backpropagated(key: str | None, function) -> bool:
    """`key.backward()` without a gradient in the function, which binds `key` once:
    a backward that needs no gradient is taken of a one-element tensor
    (`loss, prec = self._forward(x, y)` ... `loss.backward()`); or `key` is a term
    of such a value (`d_loss = d_fake - d_real + penalty`: broadcasting never
    shrinks, so every term of a one-element result has one element)."""
    if key is None or _bindings(key, function) != 1:
        return False
    backpropagated = {var(site.node.func.value) for site in function.all_sites()
                      if site.kind == BACKWARD and type(site.node.func) is cst.Attribute
                      and site.node.func.attr.value == "backward"
                      and not any(a.keyword is None or a.keyword.value == "gradient"
                                  for a in site.node.args)}
    if key in backpropagated:
        return True
    for kind, node, _ in function.events:  # `d_loss = d_fake - d_real + key`, bound once
        if kind == "small" and type(node) is cst.Assign and len(node.targets) == 1:
            total = var(node.targets[0].target)
            if total in backpropagated and key in _terms(node.value) and \
                    _bindings(total, function) == 1:
                return True
    return False


def _bindings(key: str, function) -> int:
    return sum(key in bound_in([event]) for event in function.events)


def _terms(value: cst.BaseExpression) -> set[str]:
    """The variables added, subtracted, multiplied or divided in `value`: `a`, `b`
    and `self.c` of `a - 2 * b + self.c`."""
    if type(value) is cst.BinaryOperation and type(value.operator) in SUMS:
        return _terms(value.left) | _terms(value.right)
    if type(value) is cst.UnaryOperation:
        return _terms(value.expression)
    name = var(value) if type(value) in (cst.Name, cst.Attribute) else None
    return {name} if name else set()


def _sequence_checked(path: list[cst.CSTNode], value: cst.BaseExpression) -> bool:
    """Indexed where a test has just found `value` to be a tuple or a list:
    `out[0] if isinstance(out, (tuple, list)) else out`, or the body of such an
    `if`: a loss function that returns several values."""
    for parent, child in zip(path, path[1:]):
        if type(parent) in (cst.If, cst.IfExp) and child is parent.body and any(
                type(n) is cst.Name and n.value in ("tuple", "list") for n in descendants(
                    parent.test)) and any(n.deep_equals(value) for n in descendants(parent.test)):
            return True
    return False


def _per_element(node: cst.CSTNode) -> bool:
    """The function computes a loss per element somewhere: `reduction="none"`,
    `reduce=False`."""
    code = cst.Module([]).code_for_node(node)
    return "none" in code and "reduction" in code or "reduce=False" in code
