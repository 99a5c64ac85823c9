"""PTL301 torch-load-without-weights-only."""
from __future__ import annotations

import libcst as cst
from packaging.version import Version

from ptlint.analysis.walk import descendants
from ptlint.fixers.arguments import argument, keyword, with_keyword
from ptlint.model import Safety
from ptlint.rule import Rule
from ptlint.rules._serialization import copies_through_memory
from ptlint.rules._symbols import catches
from ptlint.rules._tests import TracksTests, in_test_folder

_SAFE_DEFAULT = Version("2.6")  # torch.load defaults to weights_only=True from here on
_TYPE_ERROR = frozenset({"TypeError"})


class TorchLoadWithoutWeightsOnly(TracksTests, Rule):
    """
    ## What it does
    Flags `torch.load(...)` calls that unpickle arbitrary objects on the
    target torch version (`torch-version` in the config, `--torch-version`,
    default the installed torch):

    - on every version: an explicit `weights_only=False`, and a
      `pickle_module=` without `weights_only=True` (a custom pickle module
      turns the safe loader off);
    - below torch 2.6, where `weights_only` defaults to `False`: a call that
      does not pass `weights_only=` at all.

    Calls that pass `**kwargs` (which may carry `weights_only`) and calls
    inside an `except TypeError:` handler (the usual fallback for torch
    versions older than 1.13, which do not know the argument) are not
    flagged, nor is test code (a file under a `test/` or `tests/` folder;
    in a file that uses pytest or unittest, also a `test_*.py` file, a
    `test*` function, a `Test*` class): a test loads files it wrote itself
    or the repository's own fixtures. A `test_*.py` script elsewhere, without
    a test framework, is an evaluation script that loads the checkpoint it
    is given: reported. Nor is a load from a name bound to an empty
    `io.BytesIO()` that the same function `torch.save`s into: a deep copy
    through memory reads only what the process wrote (opacus'
    `clone_module`). `weights_only=` did not exist before torch 1.13, so the rule
    does not run for older targets.

    ## Why is this bad?
    A checkpoint is a pickle: with `weights_only=False`, loading a file from
    an untrusted source (a downloaded model, a shared drive) can run any code
    it contains. `weights_only=True` restricts loading to tensors, primitive
    types and allow-listed classes, which is all a `state_dict` needs.

    ## Example
    ```python
    import torch
    state = torch.load("model.pt", weights_only=False)
    ```

    Use instead:
    ```python
    import torch
    state = torch.load("model.pt", weights_only=True)
    ```

    ## Fix safety
    Only the missing-argument case below torch 2.6 has a fix: it adds
    `weights_only=True`, which is what torch 2.6 and newer do anyway. It is
    unsafe: a checkpoint that pickles whole modules, optimizers of custom
    classes or other arbitrary objects (even `torch.__version__` kept as
    metadata, a `TorchVersion` rather than a `str`) no longer loads (allow-list its classes
    with `torch.serialization.add_safe_globals`, or pass
    `weights_only=False` for files you trust). An explicit
    `weights_only=False` and a `pickle_module=` are deliberate choices and
    are reported without a fix, and so is a `torch.load` inside a call that
    is itself given `weights_only=` (`model.load_state_dict(torch.load(p),
    weights_only=False)`: the keyword is on the wrong call, and the fix
    would write the opposite choice).

    ## References
    - [torch.load and weights_only](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [PyTorch 2.6 release notes: weights_only defaults to True](https://github.com/pytorch/pytorch/releases/tag/v2.6.0)
    """

    code = "PTL301"
    message = "`torch.load()` may unpickle arbitrary code"
    fix_title = "Add `weights_only=True`"
    fix_safety = Safety.UNSAFE
    tags = ("security",)
    security_severity = 8.0  # high: loading an untrusted file runs its code
    requires_text = ("load",)
    torch_versions = ">=1.13"
    test_names_need_a_framework = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.fallbacks = 0
        self.misplaced: set[int] = set()  # `torch.load` calls inside a call given `weights_only=`
        version = context.torch_version
        self.safe_default = version is None or version >= _SAFE_DEFAULT

    @property
    def _tests(self) -> bool:
        """In test code, as the docs say (not an evaluation script named `test_*.py`)."""
        return self.in_test and (self.uses_a_framework or in_test_folder(self.context.path))

    def visit_Module(self, node: cst.Module) -> None:
        self.tree = node

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if catches(node, _TYPE_ERROR):
            self.fallbacks += 1

    def leave_ExceptHandler(self, original_node: cst.ExceptHandler) -> None:
        if catches(original_node, _TYPE_ERROR):
            self.fallbacks -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if self.fallbacks or type(node.func) in (cst.Call, cst.Subscript):
            return
        if not self.is_name(node.func, "torch.load", "torch.serialization.load") and keyword(
                node, "weights_only") is not None:
            # `m.load_state_dict(torch.load(p), weights_only=False)`: the author's choice,
            # on the wrong call; no fix writes the opposite one into `torch.load`
            self.misplaced.update(id(n) for a in node.args for n in descendants(a.value)
                                  if type(n) is cst.Call)
            return
        if not self.is_name(node.func, "torch.load", "torch.serialization.load") or self._tests \
                or copies_through_memory(self, node, self.tree):
            return  # (a deep copy through `io.BytesIO()` reads what the code just wrote)
        weights_only = keyword(node, "weights_only")
        if weights_only is not None:
            if isinstance(weights_only.value, cst.Name) and weights_only.value.value == "False":
                self.report(node, message="`torch.load(..., weights_only=False)` unpickles "
                                          "arbitrary code: use it only for files you trust")
            return
        if any(a.star == "**" for a in node.args):
            return  # `**kwargs` may pass weights_only
        if argument(node, "pickle_module", 2) is not None:
            self.report(node, message="`torch.load()` with `pickle_module=` does not use the "
                                      "weights-only unpickler: it may run arbitrary code")
            return
        if self.safe_default:
            return
        self.report(node, message="`torch.load()` without `weights_only=True` unpickles arbitrary "
                                  "code before torch 2.6",
                    replacement=None if id(node) in self.misplaced else with_keyword(
                        node, "weights_only", "True"))
