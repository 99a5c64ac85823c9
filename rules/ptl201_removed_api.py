"""PTL201 removed-api."""
from __future__ import annotations

from ptlint.model import Safety
from ptlint.rules._deprecations import DEPRECATIONS
from ptlint.rules._symbols import SymbolRule


class RemovedApi(SymbolRule):
    """
    ## What it does
    Flags calls, references and imports of torch APIs that no longer exist in
    the target torch version: `torch.solve`, `torch.lstsq`, `torch.symeig`,
    `torch.eig`, `torch.matrix_rank` (removed in 1.13), the `torch._six`
    module (removed in 2.0) and `torch.utils.serialization.load_lua`, the
    Lua Torch reader (removed in 1.0). The message names the replacement and what
    differs about it.

    The APIs are kept as data in `rules/_deprecations.py`, shared with
    PTL202: an API counts as removed only when the target torch version
    (`torch-version` in the config, `--torch-version`, default the installed
    torch) is at least the version that removed it; below that version PTL202
    reports it as deprecated instead.

    Compatibility code for other torch versions is not reported: uses in the
    body of a `try` whose handler catches `ImportError`/`AttributeError` (or
    any exception), in such handlers, and in `if` branches that test the
    version or `hasattr`; nor an assignment to the API itself (a patch).

    ## Why is this bad?
    The linear-algebra functions now raise `RuntimeError` when called, and
    importing from `torch._six` raises `ImportError`: the code cannot run on
    the target version. Their replacements are not drop-in (arguments are
    reversed or results are laid out differently), so they must be ported by
    hand.

    ## Example
    ```python
    import torch
    x, _ = torch.solve(b, A)
    ```

    Use instead:
    ```python
    import torch
    x = torch.linalg.solve(A, b)
    ```

    ## Fix safety
    The linear-algebra functions have no fix: each replacement changes the
    argument order or the results. `torch._six.inf`/`nan` are renamed to
    `math.inf`/`math.nan` (safe: the same float values), in imports too.

    A module-level import of a removed name that nothing else in the file
    uses (`from torch._six import string_classes` left behind) is removed,
    safe; not in an `__init__.py`, which may re-export it, and a name also
    written in a string or comment counts as used.

    ## References
    - [torch.linalg migration notes](https://pytorch.org/docs/stable/linalg.html)
    - [PyTorch 1.13 release notes: removed linear-algebra functions](https://github.com/pytorch/pytorch/releases/tag/v1.13.0)
    """

    code = "PTL201"
    message = "Use of a torch API that was removed"
    fix_title = "Use the replacement"
    fix_safety = Safety.SAFE
    requires_text = ("solve", "symeig", "eig", "matrix_rank", "lstsq", "_six", "serialization")
    symbols = DEPRECATIONS
    statuses = ("removed",)
