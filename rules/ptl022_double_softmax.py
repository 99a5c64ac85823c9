"""PTL022 double-softmax."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.arguments import keyword, positional
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule

_FUNCTIONS = {
    "torch.softmax": "softmax", "torch.nn.functional.softmax": "softmax",
    "torch.special.softmax": "softmax",
    "torch.log_softmax": "log_softmax", "torch.nn.functional.log_softmax": "log_softmax",
    "torch.special.log_softmax": "log_softmax",
}
_MODULES = {
    "torch.nn.Softmax": "softmax", "torch.nn.modules.activation.Softmax": "softmax",
    "torch.nn.LogSoftmax": "log_softmax", "torch.nn.modules.activation.LogSoftmax": "log_softmax",
}
_CE_FUNCTION = frozenset({"torch.nn.functional.cross_entropy"})
_CE_MODULE = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss"})
_CONSEQUENCE = {
    "softmax": "it applies `log_softmax` itself, so the loss sees softmax twice: "
               "gradients shrink and training stalls",
    "log_softmax": "it applies `log_softmax` itself, so this one is redundant "
                   "(pass the logits, or use `nll_loss`)",
}


def _target_names(target: cst.BaseExpression):
    """The names an assignment target binds (`a, (b, *c) = ...`)."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def _tensor_method_args(call: cst.Call) -> bool:
    """`Tensor.softmax(dim, dtype=None)`: nothing, an integer or `dim=`/`dtype=` keywords."""
    for i, arg in enumerate(call.args):
        if arg.star:
            return False
        if arg.keyword is None:
            value = arg.value
            if isinstance(value, cst.UnaryOperation):
                value = value.expression
            if i > 0 or not isinstance(value, cst.Integer):
                return False
        elif arg.keyword.value not in ("dim", "dtype"):
            return False
    return True


@dataclass
class _Produced:
    kind: str  # "softmax" | "log_softmax"
    source: cst.BaseExpression | None  # the logits, when a plain name


@dataclass
class _Frame:
    produced: dict[str, _Produced] = field(default_factory=dict)


class DoubleSoftmax(Rule):
    """
    ## What it does
    Flags softmax or log-softmax output passed as the input of
    `F.cross_entropy` / `nn.CrossEntropyLoss`: inline
    (`criterion(F.softmax(x, dim=1), y)`) or through a variable assigned in the
    same function (`probs = x.softmax(1)` ... `F.cross_entropy(probs, y)`).

    ## Why is this bad?
    `cross_entropy` expects unnormalised logits and applies `log_softmax`
    itself. Given softmax probabilities (all in [0, 1]), it computes the
    log-softmax of probabilities: the loss can never get close to zero, its
    gradients are squashed and training is slow or stalls, silently.
    Given `log_softmax` output it is merely redundant (log-softmax is
    idempotent): pass the logits, or use `nll_loss`.

    Only the first argument (the input) counts: probabilities as the *target*
    (soft labels, distillation) are correct.

    ## Example
    ```python
    import torch.nn.functional as F

    def loss_fn(logits, labels):
        probs = F.softmax(logits, dim=1)
        return F.cross_entropy(probs, labels)
    ```

    Use instead:
    ```python
    import torch.nn.functional as F

    def loss_fn(logits, labels):
        return F.cross_entropy(logits, labels)
    ```

    ## Fix safety
    Unsafe: the fix passes the logits instead (the argument of the softmax
    call, inline, or the plain name it was computed from when that name is not
    reassigned before the loss). For softmax this changes the loss values and
    the training dynamics (to the intended ones); for log-softmax it is the
    same loss only when the softmax ran over the class dimension.
    """

    code = "PTL022"
    message = "`{producer}` output fed to `{criterion}`: {consequence}"
    fix_title = "Pass the logits to the loss"
    fix_safety = Safety.UNSAFE
    requires_text = ("softmax", "Softmax")

    def __init__(self, context) -> None:
        super().__init__(context)
        self.frames: list[_Frame] = [_Frame()]
        self.layers: dict[str, set[str]] = defaultdict(set)  # name -> kinds of nn.Softmax assigned
        self.criteria: dict[str, int] = defaultdict(int)  # name -> CrossEntropyLoss assignments
        self.others: set[str] = set()  # names also assigned something else
        self.pending: list[tuple[cst.Call, str, cst.Arg, str, cst.BaseExpression | None]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.frames.append(_Frame())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.frames.pop()

    # -- what produces a softmax ----------------------------------------------------
    def _producer(self, value: cst.BaseExpression) -> tuple[str, cst.BaseExpression | None] | None:
        """(kind, logits) when `value` is a softmax or log-softmax call."""
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        first = positional(value, 0)
        if isinstance(func, cst.Call):  # nn.Softmax(dim=1)(x)
            if not isinstance(func.func, (cst.Call, cst.Subscript)):
                kind = _MODULES.get(self.qualified_name(func.func) or "")
                if kind:
                    return kind, first.value if first else None
            return None
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return None
        qualified = self.qualified_name(func)
        if qualified in _FUNCTIONS:
            if first is None:
                first = keyword(value, "input")
            return _FUNCTIONS[qualified], first.value if first else None
        if qualified is not None:
            return None
        name = dotted(func)
        if name in self.layers:  # self.softmax = nn.Softmax(dim=1) ... self.softmax(x)
            kinds = self.layers[name]
            if len(kinds) == 1 and name not in self.others:
                return next(iter(kinds)), first.value if first else None
            return None
        if (isinstance(func, cst.Attribute) and func.attr.value in ("softmax", "log_softmax")
                and _tensor_method_args(value)):
            receiver = func.value
            if not (isinstance(receiver, cst.Name) and receiver.value in ("self", "F", "functional")):
                return func.attr.value, receiver  # x.softmax(dim=1)
        return None

    # -- bindings --------------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        layer = criterion = None
        if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
            qualified = self.qualified_name(value.func)
            layer = _MODULES.get(qualified or "")
            criterion = qualified in _CE_MODULE
        produced = self._producer(value)
        frame = self.frames[-1]
        for target in node.targets:
            name = dotted(target.target)
            if name is None:
                for inner in _target_names(target.target):
                    self._forget(inner)
                continue
            self._forget(name)
            if layer:
                self.layers[name].add(layer)
            elif criterion:
                self.criteria[name] += 1
            else:
                self.others.add(name)
            if produced is not None and "." not in name:
                logits = produced[1]
                plain = logits if isinstance(logits, cst.Name) and logits.value != name else None
                frame.produced[name] = _Produced(produced[0], plain)

    def _forget(self, name: str) -> None:
        frame = self.frames[-1]
        frame.produced.pop(name, None)
        for key, value in list(frame.produced.items()):  # its logits changed
            if isinstance(value.source, cst.Name) and value.source.value == name:
                frame.produced[key] = _Produced(value.kind, None)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        name = dotted(node.target)
        if name:
            self._forget(name)

    def visit_For(self, node: cst.For) -> None:
        for inner in _target_names(node.target):
            self._forget(inner)

    # -- criteria ------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        arg = positional(node, 0) or keyword(node, "input")
        if arg is None:
            return
        value = arg.value
        if not isinstance(value, cst.Call) and not (
                isinstance(value, cst.Name) and value.value in self.frames[-1].produced):
            return  # cheap: the input is neither a call nor a softmax result
        func = node.func
        criterion = None
        if isinstance(func, cst.Call):
            if not isinstance(func.func, (cst.Call, cst.Subscript)) and \
                    self.qualified_name(func.func) in _CE_MODULE:
                criterion = "nn.CrossEntropyLoss"
        elif isinstance(func, (cst.Name, cst.Attribute)):
            qualified = self.qualified_name(func)
            if qualified in _CE_FUNCTION:
                criterion = "cross_entropy"
            elif qualified is None and dotted(func) is not None:
                criterion = "?" + dotted(func)
        if criterion is None:
            return
        produced = self._producer(value)
        if produced is not None:
            kind, logits = produced
        elif isinstance(value, cst.Name) and value.value in self.frames[-1].produced:
            found = self.frames[-1].produced[value.value]
            kind, logits = found.kind, found.source
        else:
            return
        if criterion.startswith("?"):  # a name: decided once every assignment is known
            self.pending.append((node, criterion[1:], arg, kind, logits))
        else:
            self._report(node, criterion, arg, kind, logits)

    def _report(self, node, criterion, arg, kind, logits) -> None:
        message = self.message.format(producer=kind, criterion=criterion,
                                      consequence=_CONSEQUENCE[kind])
        if logits is None:
            self.report(node, message=message)
        else:
            self.report(node, message=message,
                        replacement=node.with_deep_changes(arg, value=logits))

    def leave_Module(self, node: cst.Module) -> None:
        for call, name, arg, kind, logits in self.pending:
            if self.criteria.get(name) and name not in self.others:
                self._report(call, f"{name} (nn.CrossEntropyLoss)", arg, kind, logits)
