"""PTL101 tensor-moved-after-creation."""
from __future__ import annotations

import re

import libcst as cst

from ptlint.fixers.arguments import argument, has_star_args, keyword, with_keyword
from ptlint.model import Safety
from ptlint.rule import Rule

_FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
    "randperm", "arange", "linspace", "logspace", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like",
})
# Drawn from a random generator: on another device they draw other numbers.
_RANDOM = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like",
                     "randint_like"})
# Created in the target dtype directly, these give exactly what a later conversion gives.
_EXACT_IN_ANY_DTYPE = frozenset({"zeros", "ones", "empty", "eye", "zeros_like", "ones_like",
                                 "empty_like"})
_DEVICE_STRING = re.compile(r"(cuda|cpu|mps|xpu|meta|hpu|xla|npu|privateuseone)(:\d+)?")
_DEVICE_NAME = re.compile(r"(device|dev|\w+_device)")
# `.to()`/`.cuda()` keywords that a factory has no use for once it creates on the device.
_DROPPED = ("non_blocking", "copy")


def _string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


class TensorMovedAfterCreation(Rule):
    """
    ## What it does
    Flags a tensor factory (`torch.zeros`, `torch.tensor`, `torch.rand`,
    `torch.arange`, the `*_like` forms, ...) immediately followed by
    `.cuda(...)`, `.to(<device>)` or `.to(device=...)`.

    A device is a string such as `"cuda"`, `"cuda:1"`, `"cpu"` or `"mps"`
    (also an f-string starting with one), `torch.device(...)`, `x.device`, or
    a name or attribute named like a device (`device`, `dev`, `self.device`,
    `*_device`). `.to(torch.float16)`, `.half()` and `.to(other_tensor)` are
    not device moves. Factories that already pass `device=` (or `**kwargs`,
    or `out=`), random factories drawing from an explicit `generator=` (a
    seeded CPU generator gives the same numbers on every device, which is
    why such code creates on the CPU on purpose), modules (`nn.Linear(...).cuda()`), `torch.from_numpy(...)`
    and data from a loader are not flagged.

    ## Why is this bad?
    The tensor is first allocated and filled in host memory, then copied to
    the device and the host copy is thrown away: an extra allocation, an extra
    host-to-device transfer and, for `.cuda()`, a synchronising copy. Passing
    `device=` creates it where it is used, in one step.

    ## Example
    ```python
    import torch
    mask = torch.ones(8, 8).cuda()
    noise = torch.randn(16, 100).to(device)
    ```

    Use instead:
    ```python
    import torch
    mask = torch.ones(8, 8, device="cuda")
    noise = torch.randn(16, 100, device=device)
    ```

    ## Fix safety
    The fix passes `device=` to the factory (and `dtype=` when the move
    carries one, as in `.to(device, torch.float16)`), turns `.cuda(1)` into
    `device="cuda:1"` and drops `non_blocking=`/`copy=`, which mean nothing
    for a tensor created in place.

    The rule's declared `fix_safety` is safe, the most permissive level it
    emits; each finding carries its own level (`self.report(..., safety=...)`),
    which the engine keeps per finding, so `--fix` applies only the safe ones
    and `--unsafe-fixes` adds the rest (config `extend-safe-fixes` /
    `extend-unsafe-fixes` still override both):

    - Safe: deterministic factories moved to a device, and `zeros`, `ones`,
      `empty`, `eye` and their `*_like` forms when a dtype is merged too: the
      values are identical.
    - Unsafe: random factories (`rand`, `randn`, `randint`, `randperm`,
      `*_like`). They then draw from the device's generator instead of the
      CPU's, so a seeded run produces other numbers (on the CPU itself they
      are the same).
    - Unsafe: a factory called with `requires_grad=True`. The result becomes
      a leaf on the device (usually what was meant: before, the device copy
      was a non-leaf whose `.grad` stayed `None`), but gradients now land on
      a different tensor.
    - Unsafe: `tensor`, `as_tensor`, `full`, `arange`, `linspace`, `logspace`
      when a dtype is merged: values computed directly in the target dtype
      can differ in the last bit from values computed in the default dtype
      and then converted.

    No fix is offered for `.cuda(<expression>)` (the expression may be
    `None`, which `.cuda()` reads as the current device but a factory reads
    as the CPU), for `pin_memory=` or `memory_format=`.

    ## References
    - [Performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    """

    code = "PTL101"
    message = "Tensor created on the CPU and then moved; pass `device=` to the factory instead"
    fix_title = "Pass `device=` to the factory"
    fix_safety = Safety.SAFE
    tags = ("performance",)
    requires_text = (".cuda(", ".to(")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            return
        factory = func.value
        if not isinstance(factory, cst.Call) or isinstance(factory.func, (cst.Call, cst.Subscript)):
            return
        qualified = self.qualified_name(factory.func)
        if qualified is None or not qualified.startswith("torch."):
            return
        name = qualified[len("torch."):]
        if name not in _FACTORIES:
            return
        if keyword(factory, "device") or keyword(factory, "out") or any(
            a.star == "**" for a in factory.args
        ):
            return
        if name in _RANDOM and keyword(factory, "generator"):
            return  # a seeded CPU generator: drawn on the CPU on purpose, for reproducibility
        move = self._move(node, func.attr.value == "cuda")
        if move is None:
            return
        device, dtype, fixable = move
        if not fixable or keyword(factory, "pin_memory") or keyword(factory, "memory_format"):
            self.report(node)
            return
        new = with_keyword(factory, "device", device)
        safety = Safety.SAFE
        if dtype is not None:
            new = with_keyword(new, "dtype", dtype)
            if name not in _EXACT_IN_ANY_DTYPE:
                safety = Safety.UNSAFE
        if name in _RANDOM:
            safety = Safety.UNSAFE
        grad = keyword(factory, "requires_grad")
        if grad is not None and not (isinstance(grad.value, cst.Name) and grad.value.value == "False"):
            safety = Safety.UNSAFE
        new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        self.report(node, replacement=new, safety=safety)

    def _move(self, node: cst.Call, cuda: bool):
        """(device expression, dtype expression or None, fixable) for a device
        move, or None when the call does not move the tensor to a device."""
        args = node.args
        if has_star_args(node):
            return None
        known = {"device", "dtype", *_DROPPED} if not cuda else {"device", *_DROPPED}
        if any(a.keyword is not None and a.keyword.value not in known for a in args):
            return None  # memory_format=, unknown keywords: leave it alone
        plain = [a for a in args if a.keyword is None]
        if cuda:
            if len(plain) > 2:  # `.cuda(device, non_blocking)`
                return None
            target = plain[0] if plain else keyword(node, "device")
            if target is None:
                return cst.SimpleString('"cuda"'), None, True
            value = target.value
            if isinstance(value, cst.Integer):
                return cst.SimpleString(f'"cuda:{value.evaluated_value}"'), None, True
            text = _string_value(value)
            if text is not None and _DEVICE_STRING.fullmatch(text):
                return value, None, True
            return value, None, False
        device = argument(node, "device", 0)
        if device is None or not self._is_device(device.value):
            return None
        dtype = argument(node, "dtype", 1)
        if len(plain) > 2:
            return None
        return device.value, dtype.value if dtype is not None else None, True

    def _is_device(self, node: cst.BaseExpression) -> bool:
        text = _string_value(node)
        if text is not None:
            return bool(_DEVICE_STRING.fullmatch(text))
        if isinstance(node, cst.FormattedString):
            head = node.parts[0] if node.parts else None
            return isinstance(head, cst.FormattedStringText) and bool(
                re.match(r"(cuda|cpu|mps|xpu|npu|hpu)(:|$)", head.value))
        if isinstance(node, cst.Call):
            return self.is_name(node.func, "torch.device")
        if isinstance(node, cst.Attribute):
            return bool(_DEVICE_NAME.fullmatch(node.attr.value))
        if isinstance(node, cst.Name):
            return bool(_DEVICE_NAME.fullmatch(node.value))
        return False
