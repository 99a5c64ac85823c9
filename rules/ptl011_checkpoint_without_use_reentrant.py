"""PTL011 checkpoint-without-use-reentrant."""
from __future__ import annotations

import libcst as cst
from packaging.version import Version

from ptlint.fixers.arguments import keyword, with_keyword
from ptlint.model import Safety
from ptlint.rule import Rule

_CHECKPOINT = "torch.utils.checkpoint.checkpoint"
_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
# the torch version from which each warns when `use_reentrant=` is not passed
_WARNS_SINCE = {_CHECKPOINT: Version("2.1"), _SEQUENTIAL: Version("2.2")}
_QUIET = "`checkpoint` without `use_reentrant=`: the reentrant variant is used"  # before that


class CheckpointWithoutUseReentrant(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` and
    `checkpoint_sequential(...)` calls that do not pass `use_reentrant=`.
    Calls that pass `**kwargs` (which may carry it) are not flagged.

    ## Why is this bad?
    Without it, torch picks the old reentrant implementation and, since 2.1
    (2.2 for `checkpoint_sequential`), warns on every call that the argument
    should be passed; later versions add that omitting it will become an error
    (the message says so only for a target version that warns). The reentrant
    variant has real pitfalls: when no input of the checkpointed function
    requires grad (for example the first block, fed raw data), its output does
    not either, so the block's parameters silently get no gradient; it also
    rejects keyword arguments and does not support `torch.autograd.grad`.
    PyTorch recommends `use_reentrant=False`.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint
    y = checkpoint(block, x)
    ```

    Use instead:
    ```python
    from torch.utils.checkpoint import checkpoint
    y = checkpoint(block, x, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix adds `use_reentrant=False`, which switches to the other
    implementation. Gradients are the same in the usual case, but they now
    also reach parameters of blocks whose inputs do not require grad (before,
    those got none), random operations are replayed differently unless
    `preserve_rng_state` is kept, and code that relied on the reentrant
    variant's behaviour with in-place updates or detached inputs may change.
    Pass `use_reentrant=True` instead to keep the current behaviour exactly.
    `checkpoint_sequential` is flagged only when the target torch version is
    2.0 or newer.

    ## References
    - [torch.utils.checkpoint](https://pytorch.org/docs/stable/checkpoint.html)
    """

    code = "PTL011"
    message = "`checkpoint` without `use_reentrant=`: the reentrant variant is used and a warning is raised"
    fix_title = "Add `use_reentrant=False`"
    fix_safety = Safety.UNSAFE
    requires_text = ("checkpoint",)
    torch_versions = ">=1.11"

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) in (cst.Call, cst.Subscript):
            return
        if not self.is_name(node.func, _CHECKPOINT, _SEQUENTIAL):
            return
        name = self.qualified_name(node.func)
        if keyword(node, "use_reentrant") is not None or any(a.star == "**" for a in node.args):
            return
        if name == _SEQUENTIAL:
            version = self.context.torch_version
            if version is not None and version < Version("2.0"):
                return
            # checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs)
            if len([a for a in node.args if a.keyword is None]) >= 4 or any(a.star for a in node.args):
                return
        version = self.context.torch_version
        quiet = version is not None and version < _WARNS_SINCE[name]
        self.report(node, replacement=with_keyword(node, "use_reentrant", "False"),
                    message=_QUIET if quiet else None)
