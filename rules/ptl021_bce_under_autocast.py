"""PTL021 bce-under-autocast."""
from __future__ import annotations

from collections import defaultdict

import libcst as cst

from ptlint.fixers.arguments import keyword, positional
from ptlint.model import Safety
from ptlint.analysis.names import dotted, is_named
from ptlint.rule import Rule

_AUTOCASTS = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
    "torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
})
_CUDA_ONLY = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
_CUSTOM_FWD = frozenset({"torch.amp.custom_fwd", "torch.cuda.amp.custom_fwd",
                         "torch.amp.autocast_mode.custom_fwd",
                         "torch.cuda.amp.autocast_mode.custom_fwd"})
_BCE_FUNCTION = frozenset({"torch.nn.functional.binary_cross_entropy"})
_BCE_MODULE = frozenset({"torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss",
                         "torch.nn.modules.BCELoss"})
_SIGMOIDS = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})


class BceUnderAutocast(Rule):
    """
    ## What it does
    Flags `F.binary_cross_entropy(...)` and `nn.BCELoss` criteria called inside
    a CUDA autocast region (`with torch.autocast("cuda"):`,
    `with torch.amp.autocast(device_type=...)`, `@torch.autocast(...)`).

    ## Why is this bad?
    Under CUDA autocast, `binary_cross_entropy` on CUDA tensors raises
    `RuntimeError: torch.nn.functional.binary_cross_entropy and
    torch.nn.BCELoss are unsafe to autocast` (checked in torch 2.13): the
    probabilities come out of a float16 sigmoid, where the log of values near
    0 and 1 is inaccurate. The training step crashes the first time it runs
    on a GPU, even though the same code works on CPU, where autocast does not
    ban it. `binary_cross_entropy_with_logits` / `nn.BCEWithLogitsLoss` fuse
    the sigmoid with the loss in a numerically stable way and are safe to
    autocast.

    Regions with a literal non-CUDA device type (`torch.autocast("cpu")`) or
    `enabled=False` are not checked. A criterion is recognised when its name
    (`criterion`, `self.loss_fn`) is only ever assigned `nn.BCELoss(...)` in
    the file.

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    def step(model, x, y):
        with torch.autocast("cuda"):
            return F.binary_cross_entropy(torch.sigmoid(model(x)), y)
    ```

    Use instead:
    ```python
    import torch
    import torch.nn.functional as F

    def step(model, x, y):
        with torch.autocast("cuda"):
            return F.binary_cross_entropy_with_logits(model(x), y)
    ```

    ## Fix safety
    Unsafe, and only offered when the input is an explicit `torch.sigmoid(z)`
    (or `z.sigmoid()`) of the call itself: the fix passes `z` to
    `binary_cross_entropy_with_logits` with the same other arguments. The
    loss is mathematically the same but computed more accurately, and
    `binary_cross_entropy` clamps each log term at -100 where the logits form
    does not, so saturated outputs give different (larger, correct) losses.
    Other cases need the model to return logits and are reported without a fix.

    ## References
    - [AMP: prefer binary_cross_entropy_with_logits over binary_cross_entropy](https://pytorch.org/docs/stable/amp.html#prefer-binary-cross-entropy-with-logits-over-binary-cross-entropy)
    """

    code = "PTL021"
    message = ("`{name}` inside a CUDA autocast region raises `RuntimeError` (unsafe to "
               "autocast): use the `with_logits` form on logits")
    fix_title = "Use `binary_cross_entropy_with_logits` on the logits"
    fix_safety = Safety.UNSAFE
    requires_text = ("autocast",)

    def __init__(self, context) -> None:
        super().__init__(context)
        # one list per function: True/False for each enclosing CUDA autocast region
        self.regions: list[list[bool]] = [[]]
        self.pushed: dict[int, int] = {}  # id(With or FunctionDef) -> regions pushed
        self.criteria: dict[str, int] = defaultdict(int)  # name -> BCELoss assignments
        self.others: set[str] = set()  # names also assigned something else
        self.calls: list[tuple[cst.Call, str]] = []  # criterion calls under autocast

    # -- regions ---------------------------------------------------------------------
    def _region(self, call: cst.BaseExpression) -> bool | None:
        """True/False for an enabled/disabled CUDA autocast, None when not one."""
        if not isinstance(call, cst.Call) or isinstance(call.func, (cst.Call, cst.Subscript)):
            return None
        qualified = self.qualified_name(call.func)
        if qualified not in _AUTOCASTS:
            return None
        if qualified not in _CUDA_ONLY:
            device = keyword(call, "device_type") or positional(call, 0)
            if device is None:
                return None
            if isinstance(device.value, cst.SimpleString) and device.value.evaluated_value != "cuda":
                return None
        enabled = keyword(call, "enabled")
        if enabled is None and qualified in _CUDA_ONLY:
            enabled = positional(call, 0)
        return not (enabled is not None and is_named(enabled.value, "False"))

    def visit_With(self, node: cst.With) -> None:
        count = 0
        for item in node.items:
            state = self._region(item.item)
            if state is not None:
                self.regions[-1].append(state)
                count += 1
        self.pushed[id(node)] = count

    def leave_With(self, node: cst.With) -> None:
        for _ in range(self.pushed.pop(id(node), 0)):
            self.regions[-1].pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        regions: list[bool] = []  # a function body runs when called: outer regions do not count
        for decorator in node.decorators:
            state = self._region(decorator.decorator)
            if state is not None:
                regions.append(state)
            call = decorator.decorator
            if (isinstance(call, cst.Call) and self.qualified_name(call.func) in _CUSTOM_FWD
                    and keyword(call, "cast_inputs") is not None):
                regions.append(False)  # custom_fwd(cast_inputs=...) runs the body without autocast
        self.regions.append(regions)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.regions.pop()

    # -- criteria ------------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        is_bce = (isinstance(value, cst.Call) and not isinstance(value.func, (cst.Call, cst.Subscript))
                  and self.qualified_name(value.func) in _BCE_MODULE)
        for target in node.targets:
            name = dotted(target.target)
            if name is None:
                continue
            if is_bce:
                self.criteria[name] += 1
            else:
                self.others.add(name)

    # -- calls ---------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        regions = self.regions[-1]
        if not regions or not regions[-1]:
            return
        func = node.func
        if isinstance(func, cst.Call):  # nn.BCELoss()(p, y)
            if not isinstance(func.func, (cst.Call, cst.Subscript)) and \
                    self.qualified_name(func.func) in _BCE_MODULE:
                self.report(node, message=self.message.format(name="nn.BCELoss"))
            return
        if isinstance(func, cst.Subscript):
            return
        if self.qualified_name(func) in _BCE_FUNCTION:
            self._report_function(node)
            return
        name = dotted(func)
        if name is not None and self.qualified_name(func) is None:
            self.calls.append((node, name))

    def _report_function(self, node: cst.Call) -> None:
        message = self.message.format(name="binary_cross_entropy")
        first = positional(node, 0)
        if first is None or any(a.star for a in node.args):
            self.report(node, message=message)
            return
        logits = self._sigmoid_input(first.value)
        if logits is None:
            self.report(node, message=message)
            return
        func = node.func
        new_func = func.with_changes(attr=cst.Name("binary_cross_entropy_with_logits")) \
            if isinstance(func, cst.Attribute) else None
        if new_func is None:  # `from torch.nn.functional import binary_cross_entropy`
            self.report(node, message=message)
            return
        new = node.with_deep_changes(first, value=logits).with_changes(func=new_func)
        self.report(node, message=message, replacement=new)

    def _sigmoid_input(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """`z` for `torch.sigmoid(z)` / `F.sigmoid(z)` / `z.sigmoid()`."""
        if not isinstance(value, cst.Call) or any(a.star or a.keyword for a in value.args):
            return None
        func = value.func
        if isinstance(func, (cst.Name, cst.Attribute)) and self.qualified_name(func) in _SIGMOIDS:
            return value.args[0].value if len(value.args) == 1 else None
        if (isinstance(func, cst.Attribute) and func.attr.value == "sigmoid" and not value.args
                and self.qualified_name(func) is None):
            return func.value
        return None

    def leave_Module(self, node: cst.Module) -> None:
        for call, name in self.calls:
            if self.criteria.get(name) and name not in self.others:
                self.report(call, message=self.message.format(name=f"{name} (nn.BCELoss)"))
