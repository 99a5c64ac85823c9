"""PTL207 torch-library-in-tests."""
from __future__ import annotations

import libcst as cst

from ptlint.rule import Rule
from ptlint.rules._tests import TracksTests


class TorchLibraryInTests(TracksTests, Rule):
    """
    ## What it does
    Flags `torch.library.Library(...)` created in a test: inside a function
    named `test_*`, a class named `Test*`, or a test file (`conftest.py`, under a
    `test`/`tests` folder, or a `test_*.py` or `*_test.py` that uses pytest or
    unittest or defines a test). Outside tests, `Library`
    is the normal way to register custom operators and is not flagged.

    Off by default (TorchFix's TOR901, meant for PyTorch's own test suite).
    Enable it with `--extend-select PTL207`.

    ## Why is this bad?
    A `Library` registers its operators and kernels for the whole process
    and keeps them until it is garbage-collected. In a test suite, a
    registration leaks into later tests and makes them depend on test order;
    registering the same name twice raises. `torch.library._scoped_library`
    is a context manager that removes the registrations when the test ends.

    ## Example
    ```python
    import torch

    def test_custom_op():
        lib = torch.library.Library("mylib", "DEF")
        lib.define("add_one(Tensor x) -> Tensor")
    ```

    Use instead:
    ```python
    import torch

    def test_custom_op():
        with torch.library._scoped_library("mylib", "DEF") as lib:
            lib.define("add_one(Tensor x) -> Tensor")
    ```

    ## References
    - [pytorch/pytorch#118318: scoped libraries in tests](https://github.com/pytorch/pytorch/pull/118318)
    """

    code = "PTL207"
    message = ("`torch.library.Library` in a test keeps its registrations after the test; "
               "use `torch.library._scoped_library`")
    default_enabled = False
    tags = ("testing",)
    requires_text = ("Library",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.in_test or isinstance(node.func, (cst.Call, cst.Subscript)):
            return
        if self.is_name(node.func, "torch.library.Library"):
            self.report(node)
