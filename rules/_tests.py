"""A mixin for rules that treat test code differently (not a rule module)."""
from __future__ import annotations

import re

import libcst as cst

_TEST_FILE = re.compile(r"(^|/)(tests?/.*|test_[^/]*|[^/]*_test|conftest)\.py$")


def is_test_file(path: str) -> bool:
    """`test_*.py`, `*_test.py`, `conftest.py`, or any file under `test/` or `tests/`."""
    return bool(_TEST_FILE.search(path.replace("\\", "/")))


def _is_test(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.FunctionDef):
        return node.name.value.startswith("test")
    return isinstance(node, cst.ClassDef) and node.name.value.startswith("Test")


class TracksTests:
    """`self.in_test`: the node being visited is in a test file, or inside a
    `test*` function or a `Test*` class."""

    _test_depth = 0

    @property
    def in_test(self) -> bool:
        return self._test_depth > 0 or is_test_file(self.context.path)  # type: ignore[attr-defined]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._test_depth += _is_test(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._test_depth -= _is_test(original_node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._test_depth += _is_test(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._test_depth -= _is_test(original_node)
