"""PTL202 deprecated-api."""
from __future__ import annotations

from ptlint.model import Safety
from ptlint.rules._deprecations import DEPRECATIONS
from ptlint.rules._symbols import SymbolRule


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
    names the replacement and what differs about it.

    The APIs are kept as data in `rules/_deprecations.py`, shared with
    PTL201, with the torch version that deprecated each one: an API
    deprecated after the target torch version is not reported, and an API
    removed in or before the target version is reported by PTL201 instead.

    Compatibility code for other torch versions is not reported: uses in the
    body of a `try` whose handler catches `ImportError`/`AttributeError` (or
    any exception), in such handlers, and in `if` branches that test the
    version or `hasattr`; nor a table of functions by their own names
    (`{"normal": nn.init.normal, ...}`, kept to patch and restore them).

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
    `sdp_kernel` with literal flags (→ `sdpa_kernel([...])`). `from functorch
    import vmap` becomes `from torch.func import vmap`. These are safe;
    other calls (variables that may hold a string `p`, float steps, `*args`)
    are reported without a fix.

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

    code = "PTL202"
    message = "Use of a deprecated torch API"
    fix_title = "Use the replacement"
    fix_safety = Safety.SAFE
    requires_text = ("torch",)
    symbols = DEPRECATIONS
    statuses = ("deprecated",)
