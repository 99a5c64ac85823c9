"""A mixin for rules that treat test code differently (not a rule module)."""
from __future__ import annotations

import re

import libcst as cst

_TEST_FOLDER = r"(^|/)tests?/"
_TEST_FILE = re.compile(_TEST_FOLDER + r".*\.py$|(^|/)conftest\.py$")
_TEST_NAME = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
_TEST_DEFINED = re.compile(r"(?m)^[ \t]*(?:(?:async[ \t]+)?def[ \t]+test|class[ \t]+Test)")


def is_test_file(path: str, source: str) -> bool:
    """`conftest.py`, any file under `test/` or `tests/`, and `test_*.py` or
    `*_test.py` unless it is a script: it neither uses a test framework nor
    defines a `test*` function or `Test*` class (TCN's `mnist_test.py` trains a
    model)."""
    path = path.replace("\\", "/")
    if _TEST_FILE.search(path):
        return True
    return bool(_TEST_NAME.search(path)) and (
        uses_a_test_framework(source) or bool(_TEST_DEFINED.search(source)))


def in_test_folder(path: str) -> bool:
    """Any file under a `test/` or `tests/` folder."""
    return bool(re.search(_TEST_FOLDER, path.replace("\\", "/")))


def _is_test(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.FunctionDef):
        return node.name.value.startswith("test")
    return isinstance(node, cst.ClassDef) and node.name.value.startswith("Test")


def uses_a_test_framework(source: str) -> bool:
    """The file mentions pytest or unittest: its `test*` functions and `Test*`
    classes are tests (elsewhere `test_step(model, loader)` is an evaluation step)."""
    return "pytest" in source or "unittest" in source


class TracksTests:
    """`self.in_test`: the node being visited is in a test file, or inside a
    `test*` function or a `Test*` class. A rule that sets `test_names_need_a_framework`
    counts those names only in a file that uses pytest or unittest."""

    _test_depth = 0
    test_names_need_a_framework = False
    _test_file: bool | None = None  # worked out on the first question (asked per node)
    _framework = False

    def _file_facts(self) -> None:
        if self._test_file is None:
            context = self.context  # type: ignore[attr-defined]
            self._test_file = is_test_file(context.path, context.source)
            self._framework = uses_a_test_framework(context.source)

    @property
    def in_test(self) -> bool:
        self._file_facts()
        return bool(self._test_file) or self._test_depth > 0 and (
            not self.test_names_need_a_framework or self._framework)

    @property
    def uses_a_framework(self) -> bool:
        """The file mentions pytest or unittest (see `uses_a_test_framework`)."""
        self._file_facts()
        return self._framework

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._test_depth += _is_test(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._test_depth -= _is_test(original_node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._test_depth += _is_test(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._test_depth -= _is_test(original_node)
