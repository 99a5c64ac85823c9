"""How a tensor expression was made, for PTL101 (not a rule).

- `Chain`: a factory call and the methods applied to its result before a
  device move (`torch.zeros(n).long().unsqueeze(0)`), each classified as a
  dtype cast, a view, a deterministic fill or a random fill.
- Device targets: which `.to(...)`/`.cuda(...)` arguments name a device, and
  which name the CPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import libcst as cst

from ptlint.fixers.arguments import argument, keyword

from ptlint.analysis.names import dotted

# torch.<name>(...) creating a new tensor on the default device (the CPU).
FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
    "randperm", "arange", "linspace", "logspace", "eye", "tril_indices", "triu_indices",
    "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window",
})
# torch.<name>(t, ...) creating a tensor on t's device.
LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                  "randn_like", "randint_like"})
# t.<name>(...) creating a tensor on t's device (and with t's dtype).
NEW = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
# Legacy constructors: always on the CPU (unless the default tensor type is changed).
LEGACY = frozenset({"Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor",
                    "ByteTensor", "CharTensor", "ShortTensor", "IntTensor", "LongTensor",
                    "BoolTensor"})
# Drawn from a random generator: on another device they draw other numbers.
RANDOM = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like",
                    "randint_like"})
# Computed in the device's arithmetic: on an accelerator the last bit can differ.
COMPUTED = frozenset({"linspace", "logspace", "hann_window", "hamming_window",
                      "blackman_window", "bartlett_window", "kaiser_window"})
# Created in the target dtype directly, these give exactly what a later conversion gives
# (0, 1 and uninitialised memory are the same in every dtype).
EXACT_IN_ANY_DTYPE = frozenset({"zeros", "ones", "empty", "eye", "zeros_like", "ones_like",
                                "empty_like", "new_zeros", "new_ones", "new_empty"})

# Methods between the factory and the move, by kind.
CASTS = {"float": "float", "double": "double", "half": "half", "bfloat16": "bfloat16",
         "long": "long", "int": "int", "short": "short", "char": "int8", "byte": "uint8",
         "bool": "bool", "cfloat": "cfloat", "cdouble": "cdouble"}
DTYPES = frozenset({
    "float16", "half", "float32", "float", "float64", "double", "bfloat16", "int8", "uint8",
    "int16", "short", "int32", "int", "int64", "long", "bool", "complex64", "cfloat",
    "complex128", "cdouble",
})
# Views and reshapes over the whole tensor (no slicing: a slice of a device tensor
# would keep the whole allocation alive; no `expand`: its result cannot be written).
VIEWS = frozenset({"unsqueeze", "squeeze", "view", "reshape", "flatten", "unflatten", "t",
                   "transpose", "permute", "contiguous"})
FILLS = frozenset({"fill_", "zero_", "triu", "tril", "triu_", "tril_", "fill_diagonal_"})
RANDOM_FILLS = frozenset({"uniform_", "normal_", "random_", "bernoulli_", "exponential_",
                          "geometric_", "log_normal_", "cauchy_"})

_DEVICE_STRING = re.compile(r"(cuda|cpu|mps|xpu|meta|hpu|xla|npu|privateuseone)(:\d+)?")
_DEVICE_NAME = re.compile(r"device|dev|DEVICE|DEV|\w+_device|\w+_DEVICE")


def computed(name: str, factory: cst.Call) -> bool:
    """Whether the factory's values are computed in floating point arithmetic that
    may round differently on an accelerator: the `COMPUTED` ones, and `arange`
    unless its values are certainly whole numbers (`start` and `step` absent or
    integer literals: then they are `start + i * step`, exact everywhere)."""
    if name in COMPUTED:
        return True
    if name != "arange":
        return False
    plain = [a.value for a in factory.args if a.keyword is None]
    start = argument(factory, "start", 0) if len(plain) >= 2 else keyword(factory, "start")
    step = argument(factory, "step", 2) if len(plain) >= 3 else keyword(factory, "step")
    return any(arg is not None and not _integer(arg.value) for arg in (start, step))


def _integer(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


def string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def device_string(node: cst.BaseExpression) -> bool:
    text = string_value(node)
    return text is not None and bool(_DEVICE_STRING.fullmatch(text))


def named_like_device(node: cst.BaseExpression) -> bool:
    """`device`, `DEVICE`, `dev`, `self.device`, `args.train_device`, and a
    call of a method named `device` without arguments (`self.device()`)."""
    if isinstance(node, cst.Call) and not node.args:
        func = node.func
        return (isinstance(func, cst.Attribute) and func.attr.value == "device"
                and dotted(func) is not None)
    if isinstance(node, cst.Attribute):
        return bool(_DEVICE_NAME.fullmatch(node.attr.value))
    if isinstance(node, cst.Name):
        return bool(_DEVICE_NAME.fullmatch(node.value))
    return False


def is_cpu_string(node: cst.BaseExpression) -> bool:
    """`"cpu"` or `"cpu:0"`."""
    text = string_value(node)
    return text is not None and (text == "cpu" or text.startswith("cpu:"))


@dataclass
class Op:
    """One method call between the factory and the move."""

    call: cst.Call
    kind: str  # "cast", "view", "fill", "random", "grad"
    dtype: cst.BaseExpression | None = None  # for casts

    @property
    def method(self) -> str:
        assert isinstance(self.call.func, cst.Attribute)
        return self.call.func.attr.value


@dataclass
class Chain:
    """`factory(...).op1(...).op2(...)`: ops innermost first."""

    factory: cst.Call
    ops: list[Op]


Resolve = Callable[[cst.CSTNode], "str | None"]


def is_dtype(node: cst.BaseExpression, resolve: Resolve) -> bool:
    """`torch.float16`, `torch.long`, through any alias of `torch`."""
    qualified = resolve(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    return qualified is not None and qualified.startswith("torch.") and \
        qualified[len("torch."):] in DTYPES


def classify(call: cst.Call, resolve: Resolve) -> Op | None:
    """The kind of `call` as a step between a factory and a device move, or None."""
    func = call.func
    if not isinstance(func, cst.Attribute) or any(a.star for a in call.args):
        return None
    method = func.attr.value
    if method in CASTS and not call.args:
        return Op(call, "cast", cst.parse_expression(f"torch.{CASTS[method]}"))
    if method in ("to", "type") and len(call.args) == 1:
        arg = call.args[0]
        if (arg.keyword is None or arg.keyword.value == "dtype") and is_dtype(arg.value, resolve):
            return Op(call, "cast", arg.value)
        return None
    if method in VIEWS:
        # `x.view(torch.int16)` reinterprets the bits: not a shape view
        if any(is_dtype(a.value, resolve) or a.keyword is not None and a.keyword.value == "dtype"
               for a in call.args):
            return None
        return Op(call, "view")
    if method in FILLS:
        return Op(call, "fill")
    if method in RANDOM_FILLS:
        return Op(call, "random")
    if method == "requires_grad_":
        return Op(call, "grad")
    return None


def unwind(expr: cst.BaseExpression, resolve: Resolve) -> Chain | None:
    """The factory call under a chain of ops, or None when `expr` is anything else."""
    ops: list[Op] = []
    while isinstance(expr, cst.Call):
        op = classify(expr, resolve)
        if op is None:
            return Chain(expr, list(reversed(ops)))
        ops.append(op)
        assert isinstance(expr.func, cst.Attribute)
        expr = expr.func.value
    return None
