"""PTL121 half-model-under-autocast."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.arguments import keyword, positional
from ptlint.analysis.names import dotted, is_named
from ptlint.rule import Rule

_AUTOCASTS = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
    "torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
    "torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast",
})
_HALF_DTYPES = frozenset({"torch.float16", "torch.half", "torch.bfloat16"})
_CAST_METHODS = {"half": "half", "bfloat16": "bfloat16"}
# a following call that undoes or copies the cast: `model.half().float()`
_UNDO = frozenset({"float", "double", "to", "type"})


@dataclass
class _Cast:
    call: cst.Call
    receiver: str
    result: str | None  # the name the cast module is assigned to, if any
    order: int
    what: str


@dataclass
class _Region:
    start: int
    end: int = 1 << 62
    callees: set[str] = field(default_factory=set)


@dataclass
class _Frame:
    casts: list[_Cast] = field(default_factory=list)
    regions: list[_Region] = field(default_factory=list)
    open: list[_Region] = field(default_factory=list)


class HalfModelUnderAutocast(Rule):
    """
    ## What it does
    Flags `model.half()` / `model.bfloat16()` / `model.to(torch.float16)` in a
    function whose autocast region (`with torch.autocast(...)`) then calls that
    model, when the cast comes before the region or inside it.

    ## Why is this bad?
    Autocast is designed for float32 weights: it casts each op's inputs to the
    precision that op needs and keeps float32 master weights. A model cast to
    float16 by hand loses that: optimizer updates are applied to float16
    weights (small updates round to zero), `GradScaler.unscale_` raises
    `ValueError: Attempting to unscale FP16 gradients`, and ops autocast runs
    in float32 pay for extra casts. PyTorch's AMP docs say not to call
    `.half()` or `.bfloat16()` on models or inputs when using autocast.

    To stay precise the rule only looks at calls on a plain name or attribute
    whose result is then called inside the region (the model). Casts of
    inputs, of copies (`deepcopy(model).half()`), and round trips
    (`model.half().float()`) are not flagged.

    ## Example
    ```python
    import torch

    def train_step(model, x, y, loss_fn):
        model.half()
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        loss.backward()
    ```

    Use instead:
    ```python
    import torch

    def train_step(model, x, y, loss_fn):
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        loss.backward()
    ```

    ## References
    - [AMP: autocast and GradScaler](https://pytorch.org/docs/stable/amp.html#torch.autocast)
    """

    code = "PTL121"
    message = "`{receiver}.{what}` on a model that runs under autocast: keep float32 weights and let autocast cast"
    requires_text = ("autocast",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.frames: list[_Frame] = [_Frame()]
        self.order = 0
        self.pushed: dict[int, int] = {}
        self.undone: set[int] = set()  # ids of casts followed by `.float()` and the like
        self.assigned: dict[int, str] = {}  # id of an assigned value -> its target name

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        regions = []
        for decorator in node.decorators:
            if self._enabled_autocast(decorator.decorator):
                regions.append(_Region(self.order))
        frame = _Frame()
        frame.regions.extend(regions)
        frame.open.extend(regions)
        self.frames.append(frame)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._finish(self.frames.pop())

    def leave_Module(self, node: cst.Module) -> None:
        self._finish(self.frames.pop())

    def _enabled_autocast(self, call: cst.BaseExpression) -> bool:
        if not isinstance(call, cst.Call) or isinstance(call.func, (cst.Call, cst.Subscript)):
            return False
        if self.qualified_name(call.func) not in _AUTOCASTS:
            return False
        enabled = keyword(call, "enabled")
        return enabled is None or not is_named(enabled.value, "False")

    def visit_With(self, node: cst.With) -> None:
        count = 0
        for item in node.items:
            if self._enabled_autocast(item.item):
                region = _Region(self.order)
                frame = self.frames[-1]
                frame.regions.append(region)
                frame.open.append(region)
                count += 1
        self.pushed[id(node)] = count

    def leave_With(self, node: cst.With) -> None:
        frame = self.frames[-1]
        for _ in range(self.pushed.pop(id(node), 0)):
            frame.open.pop().end = self.order

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            name = dotted(node.targets[0].target)
            if name is not None:
                self.assigned[id(node.value)] = name

    def visit_Call(self, node: cst.Call) -> None:
        self.order += 1
        frame = self.frames[-1]
        func = node.func
        if frame.open:
            callee = dotted(func)
            if callee is not None:
                for region in frame.open:
                    region.callees.add(callee)
        if not isinstance(func, cst.Attribute):
            return
        if func.attr.value in _UNDO and isinstance(func.value, cst.Call):
            self.undone.add(id(func.value))
        what = self._cast(node)
        receiver = dotted(func.value)
        if what is None or receiver is None or self.qualified_name(func.value) is not None:
            return
        frame.casts.append(_Cast(node, receiver, self.assigned.get(id(node)), self.order, what))

    def _cast(self, node: cst.Call) -> str | None:
        method = node.func.attr.value  # type: ignore[attr-defined]
        if method in _CAST_METHODS and not node.args:
            return f"{method}()"
        if method == "to" and len(node.args) == 1:
            arg = positional(node, 0) or keyword(node, "dtype")
            if arg is not None and self.qualified_name(arg.value) in _HALF_DTYPES:
                return f"to({dotted(arg.value)})"
        return None

    def _finish(self, frame: _Frame) -> None:
        for cast in frame.casts:
            if id(cast.call) in self.undone:
                continue
            names = {cast.receiver, cast.result} - {None}
            if any(cast.order < region.end and names & region.callees for region in frame.regions):
                self.report(cast.call, message=self.message.format(receiver=cast.receiver,
                                                                   what=cast.what))
