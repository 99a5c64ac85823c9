"""PTL025 context-manager-not-called."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.calls import called
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule

# Context managers whose call takes no required argument: adding `()` is the fix.
_CALL_WITHOUT_ARGUMENTS = frozenset({
    "torch.no_grad",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.enable_grad",
    "torch.autograd.enable_grad",
    "torch.autograd.grad_mode.enable_grad",
    "torch.inference_mode",
    "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.inference_mode",
    "torch.cuda.amp.autocast",
    "torch.cpu.amp.autocast",
})
# Context managers that need an argument: reported, not fixed.
_CALL_WITH_ARGUMENTS = frozenset({
    "torch.set_grad_enabled",
    "torch.autograd.set_grad_enabled",
    "torch.autograd.grad_mode.set_grad_enabled",
    "torch.autocast",
    "torch.amp.autocast",
    "torch.amp.autocast_mode.autocast",
})


class ContextManagerNotCalled(Rule):
    """
    ## What it does
    Flags `with torch.no_grad:` (and `torch.enable_grad`, `torch.inference_mode`,
    `torch.set_grad_enabled`, `torch.autocast`) where the class is used without
    being called.

    ## Why is this bad?
    These names are classes. The class itself is not a context manager, so the
    `with` statement raises on entry: `TypeError: 'type' object does not support
    the context manager protocol` on Python 3.11+ (`AttributeError: __enter__`
    before 3.11), checked with torch 2.13. The block never runs; the mistake
    surfaces only when the code path is first executed, often at the end of a
    long training epoch when evaluation starts.

    Decorating a function with the bare class (`@torch.no_grad`) works and is
    not flagged.

    ## Example
    ```python
    import torch

    def evaluate(model, x):
        with torch.no_grad:
            return model(x)
    ```

    Use instead:
    ```python
    import torch

    def evaluate(model, x):
        with torch.no_grad():
            return model(x)
    ```

    ## Fix safety
    Safe: the fix adds `()`. The original statement can only raise, so no
    working program depends on it. `torch.set_grad_enabled` and `torch.autocast`
    need an argument (the mode, the device type) and are reported without a fix.
    """

    code = "PTL025"
    message = "`with {name}:` uses the class without calling it: the `with` raises `TypeError`"
    fix_title = "Call it: `{name}()`"
    fix_safety = Safety.SAFE
    requires_text = ("no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "autocast")

    def visit_WithItem(self, node: cst.WithItem) -> None:
        item = node.item
        if not isinstance(item, (cst.Name, cst.Attribute)):
            return
        qualified = self.qualified_name(item)
        name = dotted(item)
        if qualified in _CALL_WITHOUT_ARGUMENTS:
            self.report(item, message=self.message.format(name=name),
                        replacement=called(item), fix_title=self.fix_title.format(name=name))
        elif qualified in _CALL_WITH_ARGUMENTS:
            self.report(item, message=self.message.format(name=name))
