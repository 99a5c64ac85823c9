"""PTL202 deprecated-api."""
from __future__ import annotations

import libcst as cst
from packaging.version import Version

from ptlint.fixers.arguments import positional_to_keyword
from ptlint.model import Safety
from ptlint.rules._deprecations import DEPRECATIONS
from ptlint.rules._symbols import SymbolRule

# Tensor methods whose leading positional scalars are a deprecated overload (torch 1.5):
# `add_(Number alpha, Tensor other)` for `add_(other, *, alpha)`,
# `addcmul_(Number value, Tensor t1, Tensor t2)` for `addcmul_(t1, t2, *, value)`,
# `addmm_(beta, alpha, mat1, mat2)` and `addmm_(beta, mat1, mat2)` for
# `addmm_(mat1, mat2, *, beta, alpha)`. The in-place `add_`/`sub_` only (`x.add(a, b)`
# is too common outside torch to judge); both forms of the others, which only tensors
# have. Name -> (the tensors' names, {positional arguments: the scalars' keywords}).
_SCALAR_FIRST: dict[str, tuple[str, dict[int, tuple[str, ...]]]] = {
    "add_": ("other", {2: ("alpha",)}), "sub_": ("other", {2: ("alpha",)}),
    **{name: ("tensor1, tensor2", {3: ("value",)})
       for name in ("addcmul_", "addcdiv_", "addcmul", "addcdiv")},
    **{f"{name}{inplace}": (tensors, {3: ("beta",), 4: ("beta", "alpha")})
       for name, tensors in (("addmm", "mat1, mat2"), ("addmv", "mat, vec"),
                             ("addr", "vec1, vec2"), ("addbmm", "batch1, batch2"),
                             ("baddbmm", "batch1, batch2"))
       for inplace in ("", "_")},
}
_OVERLOADS_SINCE = Version("1.5")


class DeprecatedApi(SymbolRule):
    """
    ## What it does
    Flags calls, references and imports of deprecated torch APIs that have a
    replacement: `torch.qr`, `cholesky`, `chain_matmul`, `ger`, `svd`,
    `norm`, `triangular_solve`, `lu`, `lu_solve` (all replaced by
    `torch.linalg`), `torch.range`, `set_default_tensor_type`,
    `nn.UpsamplingNearest2d`/`UpsamplingBilinear2d`, `F.upsample*`,
    `nn.utils.weight_norm`, `nn.utils.stateless.functional_call`,
    `nn.utils.clip_grad_norm` and the `nn.init` functions without their
    trailing underscore (`xavier_uniform`, `constant`, ...),
    `backends.cuda.sdp_kernel`, `testing.assert_allclose`,
    `utils._pytree._register_pytree_node` and `functorch.*`. The message
    names the replacement and what differs about it. Also the overloads of
    tensor methods that take the scalar first, deprecated since torch 1.5:
    `x.add_(alpha, other)`, `x.sub_(alpha, other)`,
    `x.addcmul_(value, t1, t2)`, `x.addcdiv_(value, t1, t2)` (and
    `x.addcmul`/`x.addcdiv`), `x.addmm_(beta, alpha, mat1, mat2)` and
    `x.addmm_(beta, mat1, mat2)` (also `addmv`, `addr`, `addbmm`, `baddbmm`,
    in place or not: the pairwise distance idiom
    `dist.addmm_(1, -2, x, y.t())`): the old optimizer and EMA idiom
    `exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)`. Only calls with
    exactly that many positional arguments and no keywords count (the only
    calls that match the old overload); `torch.addcmul(input, t1, t2)` is the
    function, not the overload, and `x.add(a, b)` is not judged (too many
    classes other than tensors have an `add`).

    The APIs are kept as data in `rules/_deprecations.py`, shared with
    PTL201, with the torch version that deprecated each one: an API
    deprecated after the target torch version is not reported, and an API
    removed in or before the target version is reported by PTL201 instead.

    Compatibility code for other torch versions is not reported: uses in the
    body of a `try` whose handler catches `ImportError`/`AttributeError` (or
    any exception), in such handlers, and in `if` branches that test the
    version or `hasattr`; nor a table of functions by their own names
    (`{"normal": nn.init.normal, ...}`, kept to patch and restore them), nor
    an assignment to the API itself (`torch.backends.cuda.sdp_kernel =
    null_context`, a patch).

    ## Why is this bad?
    Deprecated APIs warn at run time, are less tested than their
    replacements and will be removed; several have known pitfalls that the
    replacement fixes (`torch.range` includes its end point, `torch.svd`
    returns `V` where everything else returns `V^H`).

    ## Example
    ```python
    import torch
    q, r = torch.qr(a, some=False)
    ```

    Use instead:
    ```python
    import torch
    q, r = torch.linalg.qr(a, mode="complete")
    ```

    ## Fix safety
    A call is rewritten only where the replacement computes exactly the same
    result (each rewrite was checked to be bit-identical on torch 2.13):
    renames of drop-in aliases (`ger` → `outer`, `nn.init.normal` →
    `nn.init.normal_`, `F.upsample` →
    `F.interpolate`, `functorch.vmap` → `torch.func.vmap`, ...), and calls
    whose arguments can be mapped: `qr` (`some=` → `mode=`), `cholesky`,
    `chain_matmul` with two matrices or more, `lu_solve` with plain-name
    arguments (they are reordered), `norm` with a literal or absent `p` other
    than `"nuc"` (→ `linalg.vector_norm`), `range` with integer literals (→
    `arange` with the end point moved past the last element and
    `dtype=torch.get_default_dtype()`), the upsampling modules and functions
    (→ `Upsample`/`interpolate` with the `mode=` they imply) and
    `sdp_kernel` with literal flags (→ `sdpa_kernel([...])`), and the
    scalar-first overloads (→ `add_(other, alpha=a)`,
    `addcmul_(t1, t2, value=v)`: the same kernel). `from functorch
    import vmap` becomes `from torch.func import vmap`. These are safe;
    other calls (variables that may hold a string `p`, float steps, `*args`)
    are reported without a fix.

    A module-level import of a deprecated name that nothing else in the file
    uses (once its calls are fixed: `from torch.nn.utils import
    clip_grad_norm` after `clip_grad_norm(...)` became
    `torch.nn.utils.clip_grad_norm_(...)`) is removed, safe; not in an
    `__init__.py`, which may re-export it, and a name also written in a
    string or comment counts as used.

    `_register_pytree_node` → `register_pytree_node` is unsafe: the new
    function raises where the old one overwrote an existing registration.
    The rule's declared level is safe, the most permissive it emits; each
    finding carries its own level.

    APIs whose replacement returns something else (`svd`, `triangular_solve`,
    `lu`, `assert_allclose`, `weight_norm`, `set_default_tensor_type`,
    `make_functional`) have no fix.

    ## References
    - [torch.linalg](https://pytorch.org/docs/stable/linalg.html)
    - [torch.func migration from functorch](https://pytorch.org/docs/stable/func.migrating.html)
    """

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in _SCALAR_FIRST:
            return
        tensors, forms = _SCALAR_FIRST[func.attr.value]
        keywords = forms.get(len(node.args))
        version = self.context.torch_version
        if (keywords is None or any(a.keyword or a.star for a in node.args)
                or version is not None and version < _OVERLOADS_SINCE
                or (self.qualified_name(func) or "").startswith("torch.") or self._deliberate()):
            return  # `torch.addcmul(input, t1, t2)` is the function, not the overload
        name = func.attr.value
        fixed: cst.Call | None = node
        for keyword in keywords:  # the scalars, first to last, each now the first argument
            fixed = positional_to_keyword(fixed, 0, keyword) if fixed is not None else None
        scalars = ", ".join(keywords)
        self.report(node, message=(
            f"`{name}({scalars}, {tensors})` is a deprecated overload; use "
            f"`{name}({tensors}, {', '.join(k + '=...' for k in keywords)})`"),
            **({} if fixed is None else {"replacement": fixed, "safety": Safety.SAFE}))

    code = "PTL202"
    message = "Use of a deprecated torch API"
    fix_title = "Use the replacement"
    fix_safety = Safety.SAFE
    requires_text = ("torch",)
    symbols = DEPRECATIONS
    statuses = ("deprecated",)
