"""PTL133 tensor-created-then-moved."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import keyword, with_keyword
from ptlint.model import Safety
from ptlint.rule import Rule

# factories that take `device=` and give the same values on any device
_DETERMINISTIC = frozenset(f"torch.{n}" for n in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor",
    "as_tensor", "zeros_like", "ones_like", "empty_like", "full_like", "tril_indices",
    "triu_indices",
))
# factories that take `device=` but draw from that device's generator
_RANDOM = frozenset(f"torch.{n}" for n in (
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
))


def _device_argument(node: cst.BaseExpression) -> bool:
    """`"cuda"`, `"cuda:1"`, `device`, `self.device`, `x.device`, `torch.device(...)`."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        # `.to("cpu")` after a factory is a no-op, not a copy
        return isinstance(value, str) and value.split(":")[0] in ("cuda", "mps", "xpu")
    if isinstance(node, cst.Name):
        return "device" in node.value.lower()
    if isinstance(node, cst.Attribute):
        return "device" in node.attr.value.lower()
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value == "device"
    return False


class TensorCreatedThenMoved(Rule):
    """
    ## What it does
    Flags a tensor factory call immediately moved to a device:
    `torch.zeros(n).cuda()`, `torch.randn(b, d).to(device)`,
    `torch.tensor(data).to("cuda")`, `torch.arange(n).to(x.device)`.

    Only moves to a device are flagged: `.to(torch.float16)`, `.to(other)`
    (a tensor: dtype and device), factories that already pass `device=`, and
    random factories given a `generator=` (drawing from a CPU generator, then
    moving, is how seeded code gets the same numbers on every device) are
    left alone.

    ## Why is this bad?
    The tensor is first allocated and filled on the CPU, then copied to the
    device: an extra allocation, a host-to-device transfer and, for
    `.to(device)` without `non_blocking`, a synchronisation, for something the
    device can create directly. PyTorch's Performance Tuning Guide recommends
    passing `device=` to the factory instead. Inside a `forward()` or a
    training loop this is paid on every call.

    ## Example
    ```python
    import torch
    h0 = torch.zeros(2, 64, 128).to(device)
    noise = torch.randn(64, 100).cuda()
    ```

    Use instead:
    ```python
    import torch
    h0 = torch.zeros(2, 64, 128, device=device)
    noise = torch.randn(64, 100, device="cuda")
    ```

    ## Fix safety
    The fix passes the device to the factory. It is safe for deterministic
    factories (`zeros`, `ones`, `full`, `arange`, `eye`, `tensor`, ...): the
    values are the same. It is unsafe for random factories (`rand`, `randn`,
    `randint`, `randperm`, ...): on the device they draw from the device's
    generator, so a seeded run produces different numbers. Calls with
    `requires_grad=True` (after the move the result is no longer a leaf),
    `.to()` with further arguments (`non_blocking=True`, a dtype) and
    `.cuda(index)` with a non-literal index are reported without a fix.

    ## References
    - [Performance Tuning Guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    - [CUDA semantics: best practices](https://pytorch.org/docs/stable/notes/cuda.html#best-practices)
    """

    code = "PTL133"
    message = "Tensor created on the CPU and then copied to the device: pass `device=` to the factory"
    fix_title = "Pass `device=` to the factory"
    fix_safety = Safety.SAFE
    tags = ("performance",)
    requires_text = (".cuda(", ".to(")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            return
        factory = func.value
        if not isinstance(factory, cst.Call) or not isinstance(factory.func, (cst.Name, cst.Attribute)):
            return
        qualified = self.qualified_name(factory.func)
        if qualified not in _DETERMINISTIC and qualified not in _RANDOM:
            return
        if keyword(factory, "device") is not None or any(a.star for a in factory.args):
            return
        if keyword(factory, "generator") is not None:
            return  # a CPU generator must draw on the CPU: deliberate, for reproducibility
        device = self._device(node)
        if device is False:
            return  # not a move to a device
        name = qualified.removeprefix("torch.")
        method = func.attr.value
        message = (f"`torch.{name}(...).{method}(...)` creates the tensor on the CPU and then "
                   "copies it: pass `device=` to the factory")
        flag = keyword(factory, "requires_grad")
        if device is None or (flag is not None and not (
                isinstance(flag.value, cst.Name) and flag.value.value == "False")):
            self.report(node, message=message)
            return
        new = with_keyword(factory, "device", device)
        if node.lpar:
            new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        self.report(node, message=message, replacement=new,
                    safety=Safety.UNSAFE if qualified in _RANDOM else Safety.SAFE)

    def _device(self, call: cst.Call) -> cst.BaseExpression | None | bool:
        """The device the call moves to; None when it moves but no fix is certain;
        False when it is not a move to a device."""
        method = call.func.attr.value  # type: ignore[union-attr]
        args = list(call.args)
        if any(a.star for a in args):
            return False
        if method == "cuda":
            if not args:
                return cst.SimpleString('"cuda"')
            first = args[0]
            if len(args) == 1 and first.keyword is None and isinstance(first.value, cst.Integer):
                return cst.SimpleString(f'"cuda:{first.value.value}"')
            return None
        plain = [a for a in args if a.keyword is None]
        keywords = {a.keyword.value: a for a in args if a.keyword is not None}
        if plain and _device_argument(plain[0].value):
            return plain[0].value if len(args) == 1 else None
        if "device" in keywords and not plain:
            return keywords["device"].value if len(args) == 1 else None
        return False
