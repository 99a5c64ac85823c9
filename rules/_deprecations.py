"""The removed and deprecated torch APIs, as data: PTL201 (removed-api) and
PTL202 (deprecated-api) both read `DEPRECATIONS`.

Each `Symbol` says when the API was deprecated and removed, what replaces it,
and how a call is fixed: `"rename"` when the replacement is a drop-in (any
call and any reference may be renamed), a call fixer below when only some
calls can be rewritten without changing what they compute, or None. Every
call fixer was checked to give bit-identical results on torch 2.13 CPU; a
call it cannot rewrite exactly (non-literal `p=`, float steps, `*args`, ...)
is reported without a fix. `keeps_behaviour=False` makes the fix unsafe.

A symbol with `removed` set is reported by PTL201 when the target torch
version is at least that version, and by PTL202 (as deprecated) below it; a
symbol whose `since` is newer than the target is not reported at all.
"""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import argument, keyword
from ptlint.rules._symbols import Spell, Symbol, table

# -- helpers for the call fixers ---------------------------------------------------


def _arg(value: cst.BaseExpression, name: str | None = None) -> cst.Arg:
    if name is None:
        return cst.Arg(value=value)
    return cst.Arg(value=value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def _string(text: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{text}"')


def _bool(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _only(call: cst.Call, keywords: set[str], max_positional: int) -> bool:
    """No `*`/`**`, at most `max_positional` positional arguments, only these keywords."""
    positional = 0
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is None:
            positional += 1
        elif arg.keyword.value not in keywords:
            return False
    return positional <= max_positional


def _build(call: cst.Call, func: cst.BaseExpression | None, args: list[cst.Arg]) -> cst.Call | None:
    if func is None:
        return None
    return call.with_changes(func=func, args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])


def _int_literal(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus)
            and isinstance(node.expression, cst.Integer)):
        return -int(node.expression.evaluated_value)
    return None


def _number_literal(node: cst.BaseExpression) -> bool:
    """An int/float literal, `-` one, `float("inf")`, or `math.inf`-like."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "float":
        return (len(node.args) == 1 and isinstance(node.args[0].value, cst.SimpleString)
                and node.args[0].value.evaluated_value.strip().lower() in ("inf", "-inf", "+inf"))
    if isinstance(node, cst.Attribute) and node.attr.value == "inf" and isinstance(node.value, cst.Name):
        return node.value.value in ("math", "np", "numpy", "torch")
    return False


# -- call fixers ----------------------------------------------------------------------


def _fix_qr(call: cst.Call, spell: Spell) -> cst.Call | None:
    # torch.qr(input, some=True, *, out=None) -> torch.linalg.qr(A, mode="reduced", *, out=None)
    if not _only(call, {"input", "some", "out"}, 2):
        return None
    source, some, out = argument(call, "input", 0), argument(call, "some", 1), keyword(call, "out")
    if source is None:
        return None
    args = [_arg(source.value)]
    if some is not None:
        literal = _bool(some.value)
        if literal is False:
            args.append(_arg(_string("complete"), "mode"))
        elif literal is None:
            args.append(_arg(cst.IfExp(test=some.value, body=_string("reduced"),
                                       orelse=_string("complete")), "mode"))
    if out is not None:
        args.append(out)
    return _build(call, spell("torch.linalg.qr"), args)


def _fix_cholesky(call: cst.Call, spell: Spell) -> cst.Call | None:
    # torch.cholesky(input, upper=False, *, out=None) -> torch.linalg.cholesky(A, *, upper=False, out=None)
    if not _only(call, {"input", "upper", "out"}, 2):
        return None
    source, upper, out = argument(call, "input", 0), argument(call, "upper", 1), keyword(call, "out")
    if source is None:
        return None
    args = [_arg(source.value)]
    if upper is not None and _bool(upper.value) is not False:
        args.append(_arg(upper.value, "upper"))
    if out is not None:
        args.append(out)
    return _build(call, spell("torch.linalg.cholesky"), args)


def _fix_chain_matmul(call: cst.Call, spell: Spell) -> cst.Call | None:
    # multi_dot needs two matrices or more; chain_matmul(a) returns a itself.
    if not _only(call, {"out"}, 1_000):
        return None
    matrices = [a for a in call.args if a.keyword is None]
    if len(matrices) < 2:
        return None
    args = [_arg(cst.List([cst.Element(a.value) for a in matrices]))]
    out = keyword(call, "out")
    if out is not None:
        args.append(out)
    return _build(call, spell("torch.linalg.multi_dot"), args)


def _simple(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def _fix_lu_solve(call: cst.Call, spell: Spell) -> cst.Call | None:
    # torch.lu_solve(b, LU_data, LU_pivots) -> torch.linalg.lu_solve(LU, pivots, B):
    # the order changes, so only names and attributes (evaluation order cannot matter).
    if not _only(call, {"out"}, 3):
        return None
    plain = [a for a in call.args if a.keyword is None]
    if len(plain) != 3 or not all(_simple(a.value) for a in plain):
        return None
    b, lu, pivots = plain
    args = [_arg(lu.value), _arg(pivots.value), _arg(b.value)]
    out = keyword(call, "out")
    if out is not None:
        args.append(out)
    return _build(call, spell("torch.linalg.lu_solve"), args)


def _fix_norm(call: cst.Call, spell: Spell) -> cst.Call | None:
    # torch.norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None): for every
    # p except "nuc" (and "fro" over more than two dims, an error) it computes
    # torch.linalg.vector_norm(input, p or 2, dim, keepdim, dtype=dtype, out=out).
    if not _only(call, {"input", "p", "dim", "keepdim", "out", "dtype"}, 4):
        return None
    source, p = argument(call, "input", 0), argument(call, "p", 1)
    dim, keepdim = argument(call, "dim", 2), argument(call, "keepdim", 3)
    if source is None:
        return None
    args = [_arg(source.value)]
    if p is not None:
        value = p.value
        fro = isinstance(value, cst.SimpleString) and value.evaluated_value == "fro"
        if fro:
            if dim is not None and isinstance(dim.value, (cst.Tuple, cst.List)) and len(dim.value.elements) > 2:
                return None
        elif isinstance(value, cst.Name) and value.value == "None":
            pass
        elif _number_literal(value):
            args.append(_arg(value))
        else:
            return None  # "nuc", or a variable that may hold a string
    for name, given in (("dim", dim), ("keepdim", keepdim),
                        ("dtype", keyword(call, "dtype")), ("out", keyword(call, "out"))):
        if given is not None:
            args.append(_arg(given.value, name))
    return _build(call, spell("torch.linalg.vector_norm"), args)


def _fix_range(call: cst.Call, spell: Spell) -> cst.Call | None:
    # torch.range(start, end, step=1) includes `end` and returns the default dtype;
    # torch.arange excludes it and returns int64 for integer arguments. Rewritten
    # only for integer literals, where the element count can be computed here.
    if not _only(call, {"start", "end", "step", "dtype", "device", "requires_grad", "layout", "out"}, 3):
        return None
    start, end, step = argument(call, "start", 0), argument(call, "end", 1), argument(call, "step", 2)
    if start is None or end is None:
        return None
    first, last = _int_literal(start.value), _int_literal(end.value)
    stride = 1 if step is None else _int_literal(step.value)
    if first is None or last is None or not stride:
        return None
    count = (last - first) // stride + 1
    if count < 1:
        return None  # torch.range raises for these; keep the error
    stop = first + count * stride
    stop_node = cst.Integer(str(stop)) if stop >= 0 else cst.UnaryOperation(
        cst.Minus(), cst.Integer(str(-stop)))
    args = [_arg(start.value), _arg(stop_node)]
    if step is not None:
        args.append(_arg(step.value))
    rest = [a for a in call.args if a.keyword is not None and a.keyword.value not in ("start", "end", "step")]
    args += rest
    if keyword(call, "dtype") is None:
        default = spell("torch.get_default_dtype")
        if default is None:
            return None
        args.append(_arg(cst.Call(default), "dtype"))
    return _build(call, spell("torch.arange"), args)


def _upsampling(mode: str, align_corners: bool) -> "callable":
    def fix(call: cst.Call, spell: Spell) -> cst.Call | None:
        if not _only(call, {"size", "scale_factor"}, 2):
            return None
        args = list(call.args) + [_arg(_string(mode), "mode")]
        if align_corners:
            args.append(_arg(cst.Name("True"), "align_corners"))
        return _build(call, spell("torch.nn.Upsample"), args)
    return fix


def _interpolate(mode: str, align_corners: bool) -> "callable":
    def fix(call: cst.Call, spell: Spell) -> cst.Call | None:
        if not _only(call, {"input", "size", "scale_factor"}, 3):
            return None
        args = list(call.args) + [_arg(_string(mode), "mode")]
        if align_corners:
            args.append(_arg(cst.Name("True"), "align_corners"))
        return _build(call, spell("torch.nn.functional.interpolate"), args)
    return fix


_SDP_FLAGS = (("enable_flash", "FLASH_ATTENTION"), ("enable_mem_efficient", "EFFICIENT_ATTENTION"),
              ("enable_math", "MATH"), ("enable_cudnn", "CUDNN_ATTENTION"))


def _fix_sdp_kernel(call: cst.Call, spell: Spell) -> cst.Call | None:
    # sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
    # enable_cudnn=True) enters sdpa_kernel([the enabled backends]): literal flags only.
    order = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")
    if not _only(call, set(order), len(order)):
        return None
    flags = {}
    for index, name in enumerate(order):
        given = argument(call, name, index)
        flags[name] = True if given is None else _bool(given.value)
        if flags[name] is None:
            return None
    backend = spell("torch.nn.attention.SDPBackend")
    func = spell("torch.nn.attention.sdpa_kernel")
    if backend is None:
        return None
    backends = cst.List([cst.Element(cst.Attribute(backend, cst.Name(member)))
                         for name, member in _SDP_FLAGS if flags[name]])
    return _build(call, func, [_arg(backends)])


def _fix_functional_call(call: cst.Call, spell: Spell) -> cst.Call | None:
    if any(a.star == "**" for a in call.args):
        return None  # `**kwargs` may spell the old keyword
    args = [a.with_changes(keyword=cst.Name("parameter_and_buffer_dicts"))
            if a.keyword is not None and a.keyword.value == "parameters_and_buffers" else a
            for a in call.args]
    func = spell("torch.func.functional_call")
    return None if func is None else call.with_changes(func=func, args=args)


def _fix_register_pytree_node(call: cst.Call, spell: Spell) -> cst.Call | None:
    if keyword(call, "to_str_fn") or keyword(call, "maybe_from_str_fn") or any(a.star for a in call.args):
        return None
    if len([a for a in call.args if a.keyword is None]) > 3:
        return None
    func = spell("torch.utils._pytree.register_pytree_node")
    return None if func is None else call.with_changes(func=func)


# -- the table ----------------------------------------------------------------------

_LINALG_REMOVED = dict(since="1.9", removed="1.13")
# `torch.nn.init.<name>` without the trailing underscore: aliases that warn
_INIT = ("uniform", "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform",
         "kaiming_normal", "orthogonal", "sparse", "eye", "dirac")
_FUNCTORCH = ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
              "functionalize")

DEPRECATIONS: dict[str, Symbol] = table([
    # Removed from torch (calls raise RuntimeError since 1.13).
    Symbol("torch.solve", "removed", "torch.linalg.solve(A, B)", **_LINALG_REMOVED,
           note="arguments reversed; returns only the solution"),
    Symbol("torch.lstsq", "removed", "torch.linalg.lstsq(A, B).solution", **_LINALG_REMOVED,
           note="arguments reversed; residuals are a separate field"),
    Symbol("torch.symeig", "removed", "torch.linalg.eigh", **_LINALG_REMOVED,
           note="`eigvalsh` for eigenvalues only; the lower triangle is used by default"),
    Symbol("torch.eig", "removed", "torch.linalg.eig", **_LINALG_REMOVED,
           note="returns complex tensors; `eigvals` for eigenvalues only"),
    Symbol("torch.matrix_rank", "removed", "torch.linalg.matrix_rank", **_LINALG_REMOVED,
           note="`symmetric` is now `hermitian`, and the default tolerance differs"),
    Symbol("torch._six", "removed", "the standard library (`math.inf`, `collections.abc`, `str`)",
           removed="2.0"),
    Symbol("torch._six.inf", "removed", "math.inf", removed="2.0", fix="rename"),
    Symbol("torch._six.nan", "removed", "math.nan", removed="2.0", fix="rename"),
    Symbol("torch._six.string_classes", "removed", "(str, bytes)", removed="2.0"),
    Symbol("torch._six.int_classes", "removed", "int", removed="1.9"),
    Symbol("torch._six.container_abcs", "removed", "collections.abc", removed="1.9"),
    Symbol("torch.utils.serialization", "removed",
           "the `torchfile` package (`torchfile.load`) for Lua Torch files", removed="1.0"),
    Symbol("torch.utils.serialization.load_lua", "removed",
           "the `torchfile` package (`torchfile.load`)", removed="1.0"),
    # Deprecated linear algebra (torch.linalg is the replacement).
    Symbol("torch.qr", "deprecated", "torch.linalg.qr", since="1.9", fix=_fix_qr,
           note='`some=False` is `mode="complete"`'),
    Symbol("torch.cholesky", "deprecated", "torch.linalg.cholesky", since="1.9", fix=_fix_cholesky),
    Symbol("torch.chain_matmul", "deprecated", "torch.linalg.multi_dot", since="1.9",
           fix=_fix_chain_matmul, note="takes a list"),
    Symbol("torch.ger", "deprecated", "torch.outer", since="1.9", fix="rename"),
    Symbol("torch.svd", "deprecated", "torch.linalg.svd", since="1.9",
           note="returns `Vh` instead of `V`, and `full_matrices=` is the opposite of `some=`"),
    Symbol("torch.norm", "deprecated", "torch.linalg.vector_norm", since="1.9", fix=_fix_norm,
           note="`torch.linalg.matrix_norm` for matrix norms"),
    Symbol("torch.triangular_solve", "deprecated", "torch.linalg.solve_triangular", since="1.11",
           note="arguments reversed, `upper=` is required, returns only the solution"),
    Symbol("torch.lu", "deprecated", "torch.linalg.lu_factor", since="1.13",
           note="`lu_factor_ex` for `get_infos=True`"),
    Symbol("torch.lu_solve", "deprecated", "torch.linalg.lu_solve(LU, pivots, B)", since="1.13",
           fix=_fix_lu_solve, note="the right-hand side moves last"),
    # Tensor creation.
    Symbol("torch.range", "deprecated", "torch.arange", fix=_fix_range,
           note="`arange` excludes the end point and returns int64 for integer arguments"),
    Symbol("torch.set_default_tensor_type", "deprecated",
           "torch.set_default_dtype / torch.set_default_device", since="2.1"),
    # torch.nn
    Symbol("torch.nn.UpsamplingNearest2d", "deprecated", 'torch.nn.Upsample(..., mode="nearest")',
           fix=_upsampling("nearest", False)),
    Symbol("torch.nn.UpsamplingBilinear2d", "deprecated",
           'torch.nn.Upsample(..., mode="bilinear", align_corners=True)',
           fix=_upsampling("bilinear", True)),
    Symbol("torch.nn.functional.upsample", "deprecated", "torch.nn.functional.interpolate",
           fix="rename"),
    Symbol("torch.nn.functional.upsample_nearest", "deprecated",
           'torch.nn.functional.interpolate(..., mode="nearest")', fix=_interpolate("nearest", False)),
    Symbol("torch.nn.functional.upsample_bilinear", "deprecated",
           'torch.nn.functional.interpolate(..., mode="bilinear", align_corners=True)',
           fix=_interpolate("bilinear", True)),
    *(Symbol(f"torch.nn.init.{name}", "deprecated", f"torch.nn.init.{name}_", fix="rename")
      for name in _INIT),
    Symbol("torch.nn.utils.clip_grad_norm", "deprecated", "torch.nn.utils.clip_grad_norm_",
           fix="rename"),
    Symbol("torch.nn.utils.clip_grad.clip_grad_norm", "deprecated",
           "torch.nn.utils.clip_grad.clip_grad_norm_", fix="rename"),
    Symbol("torch.nn.utils.weight_norm", "deprecated",
           "torch.nn.utils.parametrizations.weight_norm", since="2.1",
           note="the parameters become `parametrizations.weight.original0/1`, so state_dict keys change"),
    Symbol("torch.nn.utils.stateless.functional_call", "deprecated", "torch.func.functional_call",
           since="2.0", fix=_fix_functional_call),
    Symbol("torch.backends.cuda.sdp_kernel", "deprecated", "torch.nn.attention.sdpa_kernel",
           since="2.3", fix=_fix_sdp_kernel, note="takes the list of backends to enable"),
    # CUDA memory statistics: "cached" became "reserved" in torch 1.4 (the old names call
    # the new ones).
    *(Symbol(f"{module}.{old}", "deprecated", f"{module}.{new}", since="1.4", fix="rename")
      for module in ("torch.cuda", "torch.cuda.memory")
      for old, new in (("memory_cached", "memory_reserved"),
                       ("max_memory_cached", "max_memory_reserved"))),
    # Testing and internals.
    Symbol("torch.testing.assert_allclose", "deprecated", "torch.testing.assert_close", since="1.12",
           note="it checks dtypes and uses other default tolerances; `check_dtype=False` matches more closely"),
    Symbol("torch.utils._pytree._register_pytree_node", "deprecated",
           "torch.utils._pytree.register_pytree_node", since="2.2", fix=_fix_register_pytree_node,
           keeps_behaviour=False, note="it raises instead of overwriting an existing registration"),
    # functorch was merged into torch.func.
    *(Symbol(f"functorch.{name}", "deprecated", f"torch.func.{name}", since="2.0", fix="rename")
      for name in _FUNCTORCH),
    Symbol("functorch.make_functional", "deprecated", "torch.func.functional_call", since="2.0",
           note="pass the parameters as a dict instead"),
    Symbol("functorch.make_functional_with_buffers", "deprecated", "torch.func.functional_call",
           since="2.0", note="pass the parameters and buffers as dicts instead"),
    Symbol("functorch.combine_state_for_ensemble", "deprecated", "torch.func.stack_module_state",
           since="2.0"),
])
