"""How a tensor expression was made, for PTL101 (not a rule).

- `Chain`: a factory call and the methods applied to its result before a
  device move (`torch.zeros(n).long().unsqueeze(0)`), each classified as a
  dtype cast, a view, a deterministic fill or a random fill, and arithmetic
  with a number or a name (`(torch.ones(n) * -1).to(device)`).
- Device targets: which `.to(...)`/`.cuda(...)` arguments name a device, and
  which name the CPU.
- `on_device(chain, ...)`: the chain rewritten to create on the device, and
  how safe that is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import libcst as cst

from ptlint.fixers.arguments import argument, keyword, positional, with_keyword
from ptlint.fixers.expressions import float_literal, is_sequence_display, is_size
from ptlint.model import Safety

from ptlint.analysis.names import dotted, is_named

# torch.<name>(...) creating a new tensor on the default device (the CPU).
FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
    "randperm", "arange", "range", "linspace", "logspace", "eye", "tril_indices", "triu_indices",
    "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window",
})
# torch.<name>(t, ...) creating a tensor on t's device.
LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                  "randn_like", "randint_like"})
# t.<name>(...) creating a tensor on t's device (and with t's dtype).
NEW = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
# Legacy constructors: always on the CPU (unless the default tensor type is changed).
LEGACY_DTYPES = {  # and the dtype each creates (None: the default dtype)
    "Tensor": None, "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8",
    "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}
LEGACY = frozenset(LEGACY_DTYPES)
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

FULL_FROM = ("zeros", "ones", "empty")  # `.fill_(v)` on these is `torch.full(size, v)`

# Methods between the factory and the move, by kind.
CASTS = {"float": "float", "double": "double", "half": "half", "bfloat16": "bfloat16",
         "long": "long", "int": "int", "short": "short", "char": "int8", "byte": "uint8",
         "bool": "bool", "cfloat": "cfloat", "cdouble": "cdouble"}
DTYPES = frozenset({
    "float16", "half", "float32", "float", "float64", "double", "bfloat16", "int8", "uint8",
    "int16", "short", "int32", "int", "int64", "long", "bool", "complex64", "cfloat",
    "complex128", "cdouble",
})
FLOAT_DTYPES = frozenset({"float16", "half", "float32", "float", "float64", "double", "bfloat16"})
# Views and reshapes over the whole tensor, and `repeat` (a copy of the whole); no
# slicing: a slice of a device tensor would keep the whole allocation alive (but
# indexing with only `None`, `:` and `...`, `t[None, :, :]`, is a view of the whole);
# no `expand`: its result cannot be written.
VIEWS = frozenset({"unsqueeze", "squeeze", "view", "reshape", "flatten", "unflatten", "t",
                   "transpose", "permute", "contiguous", "repeat"})
# `Variable(t)` (no `requires_grad=`): the tensor itself since torch 0.4
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
FILLS = frozenset({"fill_", "zero_", "triu", "tril", "triu_", "tril_", "fill_diagonal_"})
FILL_FUNCTIONS = frozenset({"torch.triu", "torch.tril"})  # `torch.triu(torch.ones(n, n), 1)`
# element-wise math over the whole tensor (`torch.exp(t)`, `t.sin()`): computed in the
# device's arithmetic after a fix, which may round differently (the fix is unsafe)
ELEMENTWISE = frozenset({"exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos",
                         "tanh", "sigmoid", "abs", "neg"})
RANDOM_FILLS = frozenset({"uniform_", "normal_", "random_", "bernoulli_", "exponential_",
                          "geometric_", "log_normal_", "cauchy_"})

_DEVICE_STRING = re.compile(r"(cuda|cpu|mps|xpu|meta|hpu|xla|npu|privateuseone)(:\d+)?")
_DEVICE_NAME = re.compile(r"_?(device|dev|DEVICE|DEV)|\w+_device|\w+_DEVICE")
_DEVICE_GETTER = re.compile(r"_?get_(\w+_)?device")


def computed(name: str, factory: cst.Call) -> bool:
    """Whether the factory's values are computed in floating point arithmetic that
    may round differently on an accelerator: the `COMPUTED` ones, and `arange`
    (and the deprecated `range`) unless its values are certainly whole numbers
    (`start` and `step` absent or integer literals: then they are
    `start + i * step`, exact everywhere)."""
    if name in COMPUTED:
        return True
    if name not in ("arange", "range"):
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
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def device_string(node: cst.BaseExpression) -> bool:
    text = string_value(node)
    return text is not None and bool(_DEVICE_STRING.fullmatch(text))


def named_like_device(node: cst.BaseExpression) -> bool:
    """`device`, `DEVICE`, `dev`, `self.device`, `args.train_device`, a call of a
    method named `device` without arguments (`self.device()`, `model._device()`), and
    of a function or method named for returning one (`get_device()`,
    `utils.get_default_device()`, `self._get_device()`), and an item of that name
    (`config["device"]`, `cfg.settings['train_device']`)."""
    if isinstance(node, cst.Call) and not node.args:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("device", "_device"):
            return dotted(func) is not None
        name = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else "")
        return bool(_DEVICE_GETTER.fullmatch(name)) and dotted(func) is not None
    if isinstance(node, cst.Attribute):
        return bool(_DEVICE_NAME.fullmatch(node.attr.value))
    if isinstance(node, cst.Name):
        return bool(_DEVICE_NAME.fullmatch(node.value))
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 \
            and isinstance(node.slice[0].slice, cst.Index):
        key = string_value(node.slice[0].slice.value)
        return key is not None and bool(_DEVICE_NAME.fullmatch(key)) and (
            dotted(node.value) is not None)
    return False


def is_cpu_string(node: cst.BaseExpression) -> bool:
    """`"cpu"` or `"cpu:0"`."""
    text = string_value(node)
    return text is not None and (text == "cpu" or text.startswith("cpu:"))


@dataclass
class Op:
    """One method call between the factory and the move, or arithmetic."""

    call: cst.Call | cst.BinaryOperation | cst.Subscript
    kind: str  # "cast", "view", "fill", "random", "grad", "arith", "elementwise"
    dtype: cst.BaseExpression | None = None  # for casts
    spelled: bool = False  # the dtype is written here as `torch.<dtype>` (for `.long()`)
    function: bool = False  # `torch.triu(x, 1)`: the tensor is the first argument
    left: bool = True  # for arithmetic: the tensor is the left operand
    literal: bool = True  # for arithmetic: the other operand is a number (else a name)

    @property
    def method(self) -> str:
        func = self.call.func
        assert isinstance(func, (cst.Attribute, cst.Name))
        return func.attr.value if isinstance(func, cst.Attribute) else func.value


@dataclass
class Chain:
    """`factory(...).op1(...).op2(...)`: ops innermost first."""

    factory: cst.Call
    ops: list[Op]

    @property
    def with_names(self) -> bool:
        """Arithmetic with a name (`torch.ones(n) * i`) on the way to the move."""
        return any(op.kind == "arith" and not op.literal for op in self.ops)


Resolve = Callable[[cst.CSTNode], "str | None"]


def is_dtype(node: cst.BaseExpression, resolve: Resolve) -> bool:
    """`torch.float16`, `torch.long`, through any alias of `torch`."""
    qualified = resolve(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    return qualified is not None and qualified.startswith("torch.") and \
        qualified[len("torch."):] in DTYPES


def _type_of(node: cst.BaseExpression) -> bool:
    """`t.type()`: the name of a tensor's type, device included."""
    return type(node) is cst.Call and not node.args and type(node.func) is cst.Attribute \
        and node.func.attr.value == "type"


def classify(call: cst.Call, resolve: Resolve) -> Op | None:
    """The kind of `call` as a step between a factory and a device move, or None."""
    func = call.func
    if any(a.star for a in call.args):
        return None
    if type(func) in (cst.Name, cst.Attribute) and call.args and call.args[0].keyword is None:
        qualified = resolve(func)
        if qualified in FILL_FUNCTIONS:
            return Op(call, "fill", function=True)
        if qualified in VARIABLE and all(a.keyword is not None and (
                a.keyword.value == "volatile" or a.keyword.value == "requires_grad"
                and is_named(a.value, "False")) for a in call.args[1:]):
            return Op(call, "view", function=True)  # `Variable(t)` is `t` since torch 0.4
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if method in ELEMENTWISE and (not call.args or len(call.args) == 1 and call.args[0].keyword
                                  is None and resolve(func) == f"torch.{method}"):
        return Op(call, "elementwise", function=bool(call.args))  # `t.exp()`, `torch.exp(t)`
    if method in CASTS and not call.args:
        return Op(call, "cast", cst.parse_expression(f"torch.{CASTS[method]}"), spelled=True)
    if len(call.args) == 1 and call.args[0].keyword is None and (
            method == "type_as" or method == "type" and _type_of(call.args[0].value)):
        # `.type_as(t)` (`.type(t.type())`) also moves to `t`'s device: before a
        # move, it is `.to(t.dtype)`
        other = call.args[0].value if method == "type_as" else call.args[0].value.func.value
        dtype = cst.Attribute(other, cst.Name("dtype"))
        return Op(call.with_changes(func=func.with_changes(attr=cst.Name("to")),
                                    args=[call.args[0].with_changes(value=dtype)]), "cast", dtype)
    if method in ("to", "type") and len(call.args) == 1:
        arg = call.args[0]
        if (arg.keyword is None or arg.keyword.value == "dtype") and (is_dtype(
                arg.value, resolve) or type(arg.value) is cst.Attribute and arg.value.attr.value
                == "dtype"):  # `.to(torch.long)`, `.to(x.dtype)`
            return Op(call, "cast", arg.value)
        legacy = resolve(arg.value) if isinstance(arg.value, (cst.Name, cst.Attribute)) else None
        dtype = LEGACY_DTYPES.get((legacy or "").removeprefix("torch."))
        if method == "type" and arg.keyword is None and dtype is not None:
            # `.type(torch.FloatTensor)` also moves to the CPU: kept as `.to(torch.float32)`
            spelled = cst.parse_expression(f"torch.{dtype}")
            return Op(call.with_changes(func=func.with_changes(attr=cst.Name("to")),
                                        args=[arg.with_changes(value=spelled)]),
                      "cast", spelled, spelled=True)
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


# Arithmetic with a number or a name keeps a tensor where it is (`**` rounds
# differently on an accelerator: not followed).
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo)
_EXACT = (cst.Add, cst.Subtract, cst.Multiply)  # correctly rounded everywhere


_SPECIAL_FLOATS = frozenset({"inf", "-inf", "+inf", "infinity", "-infinity", "nan"})


def _number(node: cst.BaseExpression) -> bool:
    """`2`, `-0.5`, `float("-inf")`."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and \
            node.func.value == "float" and len(node.args) == 1:
        text = node.args[0].value
        return isinstance(text, cst.SimpleString) and isinstance(text.evaluated_value, str) and \
            text.evaluated_value.strip().lower() in _SPECIAL_FLOATS
    return isinstance(node, (cst.Integer, cst.Float))


def _scalar(node: cst.BaseExpression) -> bool:
    """A name or attribute, a call of Python's `math` (`-math.log(10000)`), or
    arithmetic of these and numbers (`1.0 / n`): a value that is not a tensor, or
    one that may be (the fix is then not offered)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    if type(node) is cst.BinaryOperation:
        return isinstance(node.operator, _ARITHMETIC) and all(
            _number(side) or _scalar(side) for side in (node.left, node.right))
    if isinstance(node, cst.Call):
        return (dotted(node.func) or "").startswith("math.")
    return isinstance(node, (cst.Name, cst.Attribute))


def _arithmetic(expr: cst.BinaryOperation) -> Op | None:
    """`t * 2`, `-1 * t`, `t / scale`: the op, with `t` on the side it is on."""
    if not isinstance(expr.operator, _ARITHMETIC):
        return None
    for left, other in ((True, expr.right), (False, expr.left)):
        tensor = expr.left if left else expr.right
        if isinstance(tensor, (cst.Call, cst.BinaryOperation, cst.Subscript)) and (
                _number(other) or _scalar(other)):
            return Op(expr, "arith", left=left, literal=_number(other))
    return None


def _whole(expr: cst.Subscript) -> bool:
    """`t[None]`, `t[None, :, :]`, `t[..., None]`: new axes over the whole tensor."""
    for element in expr.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            if index.lower or index.upper or index.step:
                return False
        elif not (isinstance(index.value, cst.Ellipsis) or is_named(index.value, "None")):
            return False
    return True


def unwind(expr: cst.BaseExpression, resolve: Resolve) -> Chain | None:
    """The factory call under a chain of ops, or None when `expr` is anything else."""
    ops: list[Op] = []
    while type(expr) in (cst.Call, cst.BinaryOperation, cst.Subscript):
        if type(expr) is cst.Subscript:
            if not _whole(expr):
                return None
            ops.append(Op(expr, "view"))
            expr = expr.value
            continue
        if type(expr) is cst.BinaryOperation:
            op = _arithmetic(expr)
            if op is None:
                return None
            ops.append(op)
            expr = expr.left if op.left else expr.right
            continue
        op = classify(expr, resolve)
        if op is None:
            return Chain(expr, list(reversed(ops)))
        ops.append(op)
        if op.function:
            expr = expr.args[0].value
            continue
        assert isinstance(expr.func, cst.Attribute)
        expr = expr.func.value
    return None


def literal_legacy(call: cst.Call) -> bool:
    """A legacy constructor given literal data or sizes, or data made by `range(...)`
    (a single argument of unknown type may be a tensor, which it would alias,
    wherever it lives)."""
    if len(call.args) == 1 and call.args[0].keyword is not None:
        return call.args[0].keyword.value == "size"  # `torch.ByteTensor(size=(n,))`
    args = [a for a in call.args if a.keyword is None and not a.star]
    if len(args) != len(call.args) or not args:
        return False
    first = args[0].value
    return len(args) >= 2 or is_sequence_display(first) or is_size(first) or (
        isinstance(first, cst.Call) and isinstance(first.func, cst.Name)
        and first.func.value == "range")


def _with_ops(base: cst.BaseExpression, ops) -> cst.BaseExpression:
    for op in ops:
        if isinstance(op.call, cst.Subscript):
            base = op.call.with_changes(value=base)
        elif op.kind == "arith":
            base = op.call.with_changes(**{"left" if op.left else "right": base})
        elif op.function:
            first, *rest = op.call.args
            base = op.call.with_changes(args=[first.with_changes(value=base), *rest])
        else:
            base = op.call.with_changes(func=op.call.func.with_changes(value=base))
    return base


def _full(factory: cst.Call, fill: cst.Call, device: cst.BaseExpression) -> cst.Call | None:
    """`torch.zeros(size).fill_(v)` as `torch.full(size, v, device=...)`, when the size
    and a literal `v` are certain and nothing else is passed."""
    plain = [a for a in factory.args if a.keyword is None]
    value = positional(fill, 0)
    if len(plain) != len(factory.args) or not plain or len(fill.args) != 1 or value is None:
        return None
    literal = float_literal(value.value)
    if literal is None:
        return None
    if len(plain) == 1:
        size = plain[0].value
        if isinstance(size, cst.Integer):
            size = cst.Tuple([cst.Element(size, comma=cst.Comma())])
        elif not (isinstance(size, (cst.Tuple, cst.List)) or is_size(size)):
            return None  # a name: an int or a sequence?
    else:
        size = cst.Tuple([cst.Element(a.value) for a in plain])
    assert isinstance(factory.func, cst.Attribute)
    func = factory.func.with_changes(attr=cst.Name("full"))
    args = [cst.Arg(size), cst.Arg(literal), cst.Arg(
        device, keyword=cst.Name("device"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                              whitespace_after=cst.SimpleWhitespace("")))]
    return cst.Call(func=func, args=[
        a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if i < len(args) - 1 else a for i, a in enumerate(args)])


def requires_grad(factory: cst.Call) -> bool:
    """The factory is called with `requires_grad=` anything but a literal `False`."""
    grad = keyword(factory, "requires_grad")
    return grad is not None and not (
        isinstance(grad.value, cst.Name) and grad.value.value == "False")


def on_device(chain: Chain, name: str, device: cst.BaseExpression,
           dtype: cst.BaseExpression | None) -> tuple[cst.BaseExpression, Safety, bool] | None:
    """The created-on-the-device version of `chain`, how safe it is, and whether it
    spells a dtype as `torch.<dtype>` (which needs `import torch`); or None."""
    factory, ops = chain.factory, chain.ops
    if chain.with_names:
        return None  # `torch.ones(n) * i`: on the device, a CPU tensor `i` would not mix
    kinds = {op.kind for op in ops}
    safety = Safety.SAFE
    if name in RANDOM or kinds & {"random", "grad", "elementwise"} or computed(name, factory) or any(
            op.kind == "arith" and not isinstance(op.call.operator, _EXACT) for op in ops):
        safety = Safety.UNSAFE
    grad = requires_grad(factory)
    if grad:
        safety = Safety.UNSAFE
        if dtype is not None:
            return None  # the dtype may be one that cannot require gradients
    casts = [(op.dtype, op.spelled) for op in ops if op.kind == "cast"]
    if dtype is not None:
        casts.append((dtype, False))
    if name in EXACT_IN_ANY_DTYPE and casts and kinds <= {"cast", "view"} and not grad:
        # zeros/ones/empty/eye: created in the final dtype directly, the same values
        final, spelled = casts[-1]
        new = with_keyword(with_keyword(factory, "dtype", final), "device", device)
        return _with_ops(new, [op for op in ops if op.kind == "view"]), safety, spelled
    if dtype is not None:
        if ops:
            return None  # a dtype both on the way and with the move: leave it to the reader
        if name not in EXACT_IN_ANY_DTYPE:
            safety = Safety.UNSAFE
        return with_keyword(with_keyword(factory, "dtype", dtype), "device", device), safety, False
    new = with_keyword(factory, "device", device)
    if (name in FULL_FROM and len(ops) == 1 and ops[0].kind == "fill" and ops[0].method == "fill_"
            and isinstance(factory.func, cst.Attribute)):
        full = _full(factory, ops[0].call, device)
        if full is not None:
            return full, safety, False
    return _with_ops(new, ops), safety, False
