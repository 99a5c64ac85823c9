"""PTL230 legacy-tensor-constructor."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import with_keyword
from ptlint.fixers.expressions import as_floats, is_sequence_display, is_size
from ptlint.model import Safety
from ptlint.rule import Rule
from ptlint.rules._creation import LEGACY_DTYPES

_LEGACY: dict[str, tuple[str | None, str | None]] = {}  # legacy type -> (dtype, device)
for _name, _dtype in LEGACY_DTYPES.items():
    _LEGACY[f"torch.{_name}"] = (_dtype and f"torch.{_dtype}", None)
    if _name != "Tensor":
        _LEGACY[f"torch.cuda.{_name}"] = (_dtype and f"torch.{_dtype}", '"cuda"')

_IMPORTS = ("import torch",)
# `torch.sparse.FloatTensor(indices, values, size)` and the others: a COO tensor
_SPARSE = frozenset(f"torch.{device}sparse.{name}" for device in ("", "cuda.")
                    for name in LEGACY_DTYPES if name != "Tensor")


def _keywords_for(dtype: str | None, device: str | None) -> dict[str, str]:
    """The keywords a factory needs to make what a legacy type made."""
    return {k: v for k, v in (("dtype", dtype), ("device", device)) if v}


def _rebuilt(call: cst.Call, func: str, args: list[cst.Arg], keywords: dict[str, str]) -> cst.Call:
    """`call` calling `func` with `args` (same comma style) plus `keywords`."""
    new = call.with_changes(func=cst.parse_expression(func), args=args)
    for name, value in keywords.items():
        new = with_keyword(new, name, value)
    return new


class LegacyTensorConstructor(Rule):
    """
    ## What it does
    Flags calls to the legacy tensor types used as constructors:
    `torch.Tensor(...)`, `torch.FloatTensor(...)`, `torch.LongTensor(...)`
    and the other `torch.*Tensor` / `torch.cuda.*Tensor` types, including
    through a local alias such as
    `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, and the
    legacy sparse types (`torch.sparse.FloatTensor(indices, values, size)`,
    deprecated: use `torch.sparse_coo_tensor`; reported without a fix).
    Type checks (`isinstance(x, torch.Tensor)`), annotations and subclasses
    are not calls and stay silent.

    ## Why is this bad?
    One constructor does three unrelated things depending on the type of its
    argument: `torch.Tensor(2, 3)` allocates *uninitialised* memory of that
    shape, `torch.Tensor([2, 3])` copies the data `[2.0, 3.0]`, and
    `torch.FloatTensor(t)` with a tensor `t` returns an alias of `t` (and
    fails for other dtypes). A variable argument makes it impossible to tell
    which one runs, and code that meant a copy of `[n]` silently gets `n`
    garbage values. `torch.tensor(data)` (always a copy), `torch.empty(size)`
    (explicitly uninitialised) and `torch.zeros(size)` say what they do, and
    take `dtype=` and `device=` like every other factory.

    ## Example
    ```python
    import torch
    weights = torch.Tensor([1, 2, 3])
    ids = torch.LongTensor([[0, 1]])
    buffer = torch.FloatTensor(4, 16)
    ```

    Use instead:
    ```python
    import torch
    weights = torch.tensor([1.0, 2.0, 3.0])
    ids = torch.tensor([[0, 1]], dtype=torch.int64)
    buffer = torch.empty(4, 16, dtype=torch.float32)
    ```

    ## Fix safety
    The fix is safe: it only rewrites calls whose meaning is certain and
    keeps the dtype and device exactly. Data given as a list or tuple display
    (or a comprehension, or `[0] * n`) becomes `torch.tensor(data, dtype=...)`;
    for `torch.Tensor` the dtype is the default dtype, so integer literals are
    written as floats (`[1, 2]` -> `[1.0, 2.0]`) or, when the elements are
    not literals, `dtype=torch.get_default_dtype()` is passed. Sizes (two or
    more arguments, an integer literal, `x.size()`, an int such as `len(x)`,
    `x.size(0)` or `x.numel()`, `size=...`) become
    `torch.empty(...)`, which is just as uninitialised: fill it, or use
    `torch.zeros`. `x.shape` is reported without a fix: a tensor's shape is
    a size, but an array's is a tuple, which the constructor copies as data.
    `torch.cuda.*Tensor` adds `device="cuda"` (the current device, as
    before). A single argument of unknown type (a variable, an array, a
    storage), other keyword arguments, `*args` and calls through a local
    alias are reported without a fix.

    The fix is unsafe, and needs `--unsafe-fixes`, in a file that calls
    `torch.set_default_device(...)` or `torch.set_default_tensor_type(...)`
    (a CUDA type moves the default device) or uses `with torch.device(...):`: the
    legacy constructors ignore the default device and create on the CPU
    (only `torch.Tensor` follows a default tensor type), while `torch.tensor`
    and `torch.empty` follow it, so the fixed code may create its tensors on
    that device. (`torch.cuda.*Tensor`, fixed with an explicit `device="cuda"`,
    stays safe.)

    ## References
    - [`torch.tensor`](https://pytorch.org/docs/stable/generated/torch.tensor.html)
    - [Tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [`torch.Tensor` constructor notes](https://pytorch.org/docs/stable/tensors.html#torch.Tensor)
    """

    code = "PTL230"
    message = "Legacy tensor constructor: its meaning depends on the type of its argument"
    fix_title = "Use `torch.tensor(...)` or `torch.empty(...)`"
    fix_safety = Safety.SAFE
    requires_text = ("Tensor(",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.aliases: dict[str, str] = {}  # local name -> legacy type, from `X = A if c else B`
        # Fixes are reported when the whole file has been seen: whether it changes the
        # default device decides whether a fix that passes no device is safe.
        self.fixes: list[tuple[cst.Call, cst.Call, tuple[str, ...], bool, str]] = []
        self.default_device = False

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if isinstance(node.item, cst.Call) and self.is_name(node.item.func, "torch.device"):
            self.default_device = True

    def leave_Module(self, original_node: cst.Module) -> None:
        for node, new, imports, device, message in self.fixes:
            safety = Safety.UNSAFE if self.default_device and not device else Safety.SAFE
            self.report(node, replacement=new, imports=imports, message=message, safety=safety)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        value = node.value
        if isinstance(value, cst.IfExp):
            body, orelse = self.qualified_name(value.body), self.qualified_name(value.orelse)
            if body in _LEGACY and orelse in _LEGACY:
                self.aliases[name] = body
                return
        self.aliases.pop(name, None)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return
        qualified = self.qualified_name(func)
        if qualified in ("torch.set_default_device", "torch.set_default_tensor_type"):
            self.default_device = True
        elif qualified in _LEGACY:
            self._check(node, qualified)
        elif qualified in _SPARSE:
            self.report(node, message=f"Legacy sparse constructor `{qualified}(...)` is "
                                      "deprecated: use `torch.sparse_coo_tensor(indices, "
                                      "values, size)`")
        elif isinstance(func, cst.Name) and qualified is None and func.value in self.aliases:
            self.report(node, message=f"Legacy tensor constructor `{func.value}(...)` "
                                      f"(`{self.aliases[func.value]}`): its meaning depends on "
                                      "the type of its argument")

    def _torch(self, func: cst.BaseExpression) -> tuple[str, tuple[str, ...]]:
        """How this file spells `torch` (`torch`, or `t` after `import torch as t`),
        and the import the fix needs."""
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if root is not func and isinstance(root, cst.Name) and self.qualified_name(root) == "torch":
            return root.value, ()
        return "torch", _IMPORTS

    def _check(self, node: cst.Call, qualified: str) -> None:
        dtype, device = _LEGACY[qualified]
        short = qualified.removeprefix("torch.")
        torch, imports = self._torch(node.func)
        if dtype is not None:
            dtype = dtype.replace("torch.", f"{torch}.")
        args = list(node.args)
        if len(args) == 1 and args[0].keyword is not None and args[0].keyword.value == "size":
            new = _rebuilt(node, f"{torch}.empty", args, _keywords_for(dtype, device))
            self.fixes.append((node, new, imports, device is not None, (
                f"`torch.{short}(size=...)` allocates uninitialised memory through a legacy "
                "constructor: use `torch.empty` (or `torch.zeros`)")))
            return
        if any(a.keyword is not None or a.star for a in args):
            data = args[0].keyword is None and not args[0].star \
                and is_sequence_display(args[0].value)
            self.report(node, message=(
                f"Legacy tensor constructor `torch.{short}(data, ...)` copies `data` as values, "
                "not a size: use `torch.tensor(data, ...)`" if data else
                f"Legacy tensor constructor `torch.{short}(...)`: a size, data or an alias, "
                "depending on its arguments' types: use `torch.tensor` or `torch.empty`"))
            return
        extra = _keywords_for(dtype, device)
        if not args:
            new = _rebuilt(node, f"{torch}.empty", [cst.Arg(cst.Integer("0"))], extra)
            self.fixes.append((node, new, imports, device is not None, (
                f"Legacy tensor constructor `torch.{short}()`: use `torch.empty(0)`")))
            return
        first = args[0].value
        if len(args) == 1 and is_sequence_display(first):
            data = args[0]
            if dtype is None:
                floats = as_floats(first)
                if floats is not None:
                    data = data.with_changes(value=floats)
                else:
                    extra = {"dtype": f"{torch}.get_default_dtype()"}
            new = _rebuilt(node, f"{torch}.tensor", [data], extra)
            self.fixes.append((node, new, imports, device is not None, (
                f"Legacy tensor constructor `torch.{short}(data)`: use `torch.tensor(data)`")))
            return
        if len(args) >= 2 or is_size(first):
            new = _rebuilt(node, f"{torch}.empty", args, extra)
            self.fixes.append((node, new, imports, device is not None, (
                f"`torch.{short}(*sizes)` allocates uninitialised memory through a legacy "
                "constructor: use `torch.empty` (or `torch.zeros`)")))
            return
        self.report(node, message=(
            f"Legacy tensor constructor `torch.{short}(x)`: a size, data or an alias of `x`, "
            "depending on its type"))
