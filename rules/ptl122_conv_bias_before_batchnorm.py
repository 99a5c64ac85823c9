"""PTL122 conv-bias-before-batchnorm."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.arguments import keyword, with_keyword
from ptlint.model import Safety
from ptlint.analysis.names import is_named
from ptlint.rule import Rule
from ptlint.rules._tests import is_test_file

_CONVS = frozenset(
    f"torch.nn.{kind}{n}d" for kind in ("Conv", "ConvTranspose", "LazyConv", "LazyConvTranspose")
    for n in (1, 2, 3)
) | frozenset(f"torch.nn.modules.conv.{kind}{n}d" for kind in ("Conv", "ConvTranspose")
              for n in (1, 2, 3))
_BATCHNORMS = frozenset(
    f"torch.nn.{kind}{n}d" for kind in ("BatchNorm", "LazyBatchNorm") for n in (1, 2, 3)
) | frozenset({"torch.nn.SyncBatchNorm"}) | frozenset(
    f"torch.nn.modules.batchnorm.BatchNorm{n}d" for n in (1, 2, 3))
_CONTAINERS_NOT_SEQUENTIAL = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict",
                                        "torch.nn.ParameterList"})
_BIAS_POSITION = 7  # Conv*d(in, out, kernel, stride, padding, dilation|output_padding, groups, bias)


@dataclass
class _Class:
    convs: dict[str, list[cst.Call]] = field(default_factory=lambda: defaultdict(list))
    norms: set[str] = field(default_factory=set)
    others: set[str] = field(default_factory=set)
    calls: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # attr -> call ids
    assigned: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    mentions: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # `self.attr` nodes
    normalised: dict[int, str] = field(default_factory=dict)  # conv call id -> the norm applied


def _self_attr(node: cst.BaseExpression, owner: str | None) -> str | None:
    """`attr` for `<self>.attr`."""
    if (owner is not None and isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name) and node.value.value == owner):
        return node.attr.value
    return None


class ConvBiasBeforeBatchnorm(Rule):
    """
    ## What it does
    Flags a convolution with a bias (`bias=True`, the default) whose output goes
    straight into batch normalisation: adjacent `nn.Conv2d(...)`,
    `nn.BatchNorm2d(...)` in `nn.Sequential(...)` or a list of layers, or a
    `self.conv` that `forward` only ever feeds to `self.bn`
    (`self.bn(self.conv(x))`, or `x = self.conv(x)` then `x = self.bn(x)`).
    A `Sequential(...)` given to a class or function of the project
    (`MaskConv(nn.Sequential(...))`) is left alone: it may run the layers one
    by one with its own steps between them (masking padded positions keeps
    the bias from cancelling).

    ## Why is this bad?
    Batch normalisation subtracts the per-channel mean, and a convolution's
    bias is a per-channel constant: it is cancelled exactly, whatever its
    value. The bias parameters are trained, stored, synchronised and added on
    every forward pass for nothing (BatchNorm's own `bias` already provides
    the shift). torchvision's ResNets use `bias=False` for this reason.

    Off by default: the waste per layer is small and the pattern is common in
    tutorial code; enable it with `--extend-select PTL122`.

    ## Example
    ```python
    import torch.nn as nn

    block = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU())
    ```

    Use instead:
    ```python
    import torch.nn as nn

    block = nn.Sequential(nn.Conv2d(3, 16, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU())
    ```

    ## Fix safety
    A suggestion, shown and never applied by `--fix` (not even with
    `--unsafe-fixes`): `bias=False`. The network computes the same function
    in training mode, but the module has fewer parameters, so
    `load_state_dict` of a checkpoint saved before fails on the unexpected
    `...bias` keys (unless `strict=False`), and those loads are usually in
    other files (a training or test script) that the fix cannot see; an
    optimizer state saved earlier no longer matches, and a trained model's
    eval-mode output changes until the running mean is re-estimated (for
    good where one batch norm follows several convolutions: its one running
    mean cannot take up their different biases); and
    code that reaches for the bias afterwards (an init loop's
    `nn.init.constant_(m.bias, 0)` over every convolution) fails on `None`.
    For a model that will be trained from scratch, apply it by hand
    (checking such code), or with
    `extend-unsafe-fixes = ["PTL122"]` and `--fix --unsafe-fixes`. Calls that
    pass the bias positionally or may pass it through `**kwargs` are not
    flagged, nor are test files (`test_*.py`, `*_test.py`, files under
    `tests/`; a `test_*.py` or `*_test.py` that neither uses pytest or
    unittest nor defines a test is a script), which build layers to test them.
    """

    code = "PTL122"
    message = "Convolution bias right before BatchNorm is cancelled by its mean subtraction: wasted parameters"
    fix_title = "Pass `bias=False`"
    fix_safety = Safety.DISPLAY_ONLY  # checkpoints saved with the bias would not load
    tags = ("performance",)
    default_enabled = False  # correct but frequent in tutorial code, and small per finding
    requires_text = ("BatchNorm",)

    def __init__(self, context) -> None:
        super().__init__(context)
        # test code builds layers to test them (a BatchNorm frozen in eval mode, say)
        self.test_file = is_test_file(context.path, context.source)
        self.classes: list[_Class] = []
        # enclosing classes/functions: a function carries the name of `self` in a method
        self.contexts: list[tuple[str, object]] = []
        self.reported: set[int] = set()
        self.not_layers: set[int] = set()  # ids of lists/tuples that are not layer sequences
        self.handed: set[int] = set()  # ids of `Sequential(...)` given to a class of the project

    # -- what is what ----------------------------------------------------------------
    def _kind(self, node: cst.BaseExpression) -> str | None:
        if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)):
            return None
        func = node.func
        if isinstance(func, cst.Attribute) and "Conv" not in func.attr.value \
                and "Norm" not in func.attr.value:
            return None  # cheap test before resolving the name
        qualified = self.qualified_name(node.func)
        if qualified in _CONVS:
            return "conv"
        if qualified in _BATCHNORMS:
            return "norm"
        return None

    def _biased(self, conv: cst.Call) -> bool | None:
        """True when the conv surely has a bias, None when it may not or we cannot tell."""
        bias = keyword(conv, "bias")
        plain = [a for a in conv.args if a.keyword is None and not a.star]
        if bias is None and len(plain) > _BIAS_POSITION:
            return None  # positional bias: leave it alone
        if bias is None:
            return None if any(a.star for a in conv.args) else True
        return True if is_named(bias.value, "True") else None

    def _flag(self, conv: cst.Call) -> None:
        if id(conv) in self.reported or not self._biased(conv) or self.test_file:
            return
        self.reported.add(id(conv))
        self.report(conv, replacement=with_keyword(conv, "bias", "False"))

    # -- adjacent layers ---------------------------------------------------------------
    def _adjacent(self, elements: list[cst.BaseExpression]) -> None:
        for first, second in zip(elements, elements[1:]):
            if self._kind(first) == "conv" and self._kind(second) == "norm":
                self._flag(first)  # type: ignore[arg-type]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) or isinstance(func, cst.Attribute) and func.attr.value in (
                "Sequential", "ModuleList", "ModuleDict", "ParameterList"):
            qualified = self.qualified_name(func)
            if qualified in ("torch.nn.Sequential", "torch.nn.modules.container.Sequential"):
                if id(node) not in self.handed:
                    self._adjacent([a.value for a in node.args if a.keyword is None and not a.star])
            elif qualified in _CONTAINERS_NOT_SEQUENTIAL:  # a ModuleList is not applied in order
                self.not_layers.update(id(a.value) for a in node.args)
            elif not (qualified or "").startswith("torch."):
                # `MaskConv(nn.Sequential(...))`: the project's class may run the layers
                # one by one, with its own steps between them
                self.handed.update(id(a.value) for a in node.args)
        owner = self._owner()
        attr = _self_attr(func, owner)
        if attr is not None and self.classes:
            cls = self.classes[-1]
            cls.calls[attr].append(id(node))
            first = node.args[0].value if node.args and not node.args[0].star else None
            inner = _self_attr(first.func, owner) if isinstance(first, cst.Call) else None
            if inner is not None and len(node.args) == 1:
                cls.normalised[id(first)] = attr  # self.bn(self.conv(x))

    def _list(self, node: cst.List | cst.Tuple) -> None:
        if id(node) in self.not_layers:
            return
        self._adjacent([e.value for e in node.elements if not isinstance(e, cst.StarredElement)])

    def visit_List(self, node: cst.List) -> None:
        self._list(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._list(node)

    # -- classes and their forward ------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(_Class())
        self.contexts.append(("class", None))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = None
        if self.contexts:
            kind, parent = self.contexts[-1]
            params = [*node.params.posonly_params, *node.params.params]
            if kind == "class" and params:
                owner = params[0].name.value
            elif kind == "function":
                owner = parent
        self.contexts.append(("function", owner))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.contexts.pop()

    def _owner(self) -> str | None:
        if self.contexts and self.contexts[-1][0] == "function":
            return self.contexts[-1][1]  # type: ignore[return-value]
        return None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = _self_attr(node, self._owner())
        if attr is not None and self.classes:
            self.classes[-1].mentions[attr] += 1

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, (cst.Tuple, cst.List)) and any(
                isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self.not_layers.add(id(node.value))  # `conv, bn = nn.Conv2d(...), nn.BatchNorm2d(...)`
        owner = self._owner()
        if not self.classes or owner is None:
            return
        cls = self.classes[-1]
        kind = self._kind(node.value)
        for target in node.targets:
            attr = _self_attr(target.target, owner)
            if attr is None:
                continue
            cls.assigned[attr] += 1
            if kind == "conv":
                cls.convs[attr].append(node.value)  # type: ignore[arg-type]
            elif kind == "norm":
                cls.norms.add(attr)
            else:
                cls.others.add(attr)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        """`x = self.conv(x)` directly followed by `x = self.bn(x) ...` / `return self.bn(x)`."""
        owner = self._owner()
        if owner is None or not self.classes:
            return
        cls = self.classes[-1]
        for first, second in zip(node.body, node.body[1:]):
            conv_call, var = _assigned_self_call(first, owner)
            if conv_call is None:
                continue
            norm = _norm_of(second, var, owner)
            if norm is not None:
                cls.normalised[id(conv_call)] = norm

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.contexts.pop()
        cls = self.classes.pop()
        for attr, constructors in cls.convs.items():
            if attr in cls.others or attr in cls.norms or len(constructors) != 1:
                continue
            calls = cls.calls.get(attr, [])
            if cls.mentions[attr] != len(calls) + cls.assigned[attr]:
                continue  # used otherwise too (`self.conv.bias`, passed along)
            norms = {cls.normalised.get(c) for c in calls}
            if calls and None not in norms and norms <= cls.norms and not norms & cls.others:
                self._flag(constructors[0])


def _assigned_self_call(stmt: cst.BaseStatement, owner: str) -> tuple[cst.Call | None, str | None]:
    """(`self.conv(...)`, "x") for the statement `x = self.conv(...)`."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None, None
    small = stmt.body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Call)):
        return None, None
    if _self_attr(small.value.func, owner) is None:
        return None, None
    return small.value, small.targets[0].target.value


def _norm_of(stmt: cst.BaseStatement, var: str, owner: str) -> str | None:
    """The `self.<norm>` attribute applied to `var` when `stmt` uses `var` only there and
    overwrites or returns the result: `x = self.bn(x) + y`, `return self.bn(x)`."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
        if not any(isinstance(t, cst.Name) and t.value == var for t in targets):
            return None
        value = small.value
    elif isinstance(small, cst.Return) and small.value is not None:
        value = small.value
    else:
        return None
    names: list[cst.Name] = []
    calls: list[cst.Call] = []
    stack: list[cst.CSTNode] = [value]
    while stack:  # a hand-rolled walk: matchers are slow on every statement pair
        node = stack.pop()
        if isinstance(node, cst.Name):
            if node.value == var:
                names.append(node)
            continue
        if isinstance(node, cst.Call):
            calls.append(node)
        if isinstance(node, cst.Attribute):
            stack.append(node.value)  # `.attr` names are not uses of `var`
            continue
        stack.extend(node.children)
    if len(names) != 1:
        return None
    for call in calls:
        if (len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star
                and call.args[0].value is names[0]):
            attr = _self_attr(call.func, owner)
            if attr is not None:
                return attr
    return None
