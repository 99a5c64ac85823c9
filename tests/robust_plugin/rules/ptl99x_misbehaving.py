"""Rules that misbehave on purpose, for tests/test_robustness.py and
tests/test_fix_safety.py. Never shipped: tests/robust_plugin/sitecustomize.py adds
this folder to `ptlint.rules` only when PTLINT_TEST_RULES is set. All are off by
default; select them by code."""
from __future__ import annotations

import os
import signal

import libcst as cst

from ptlint.model import Safety
from ptlint.rule import Rule


class RaisesOnBoom(Rule):
    code = "PTL990"
    message = "test: raises on the name `boom`"
    default_enabled = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "boom":
            raise RuntimeError("injected failure")


class BreaksTheFile(Rule):
    code = "PTL991"
    message = "test: a fix whose result does not parse"
    fix_title = "Replace `break_me` with a keyword"
    fix_safety = Safety.SAFE
    default_enabled = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "break_me":
            self.report(node, replacement=cst.Name("lambda"))


class OverlappingFixes(Rule):
    code = "PTL992"
    message = "test: two fixes over the same text"
    fix_title = "Replace it"
    fix_safety = Safety.SAFE
    default_enabled = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "overlap_me" and node.args:
            self.report(node, replacement=cst.Name("outer_fix"))
            self.report(node.args[0].value, replacement=cst.Name("inner_fix"))


class NeverConverges(Rule):
    code = "PTL993"
    message = "test: each fix asks for another"
    fix_title = "Count up"
    fix_safety = Safety.SAFE
    default_enabled = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value.startswith("spin_") and node.value[5:].isdigit():
            self.report(node, replacement=cst.Name(f"spin_{int(node.value[5:]) + 1}"))


class CrashesTheProcess(Rule):
    code = "PTL994"
    message = "test: kills its process as native code would"
    default_enabled = False

    def visit_Module(self, node: cst.Module) -> None:
        if "CRASH-ME" in self.context.source:
            os.kill(os.getpid(), signal.SIGSEGV)


class ReportsForeignNode(Rule):
    code = "PTL995"
    message = "test: reports a node that is not in the tree"
    default_enabled = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "foreign":
            self.report(cst.Name("elsewhere"))


class RaisesWhenCreated(Rule):
    code = "PTL996"
    message = "test: raises in its constructor"
    default_enabled = False

    def __init__(self, context) -> None:
        if "init_boom" in context.source:
            raise ValueError("injected constructor failure")
        super().__init__(context)


class WritesNewerPython(Rule):
    code = "PTL980"
    message = "test: a fix whose result needs Python 3.11 (`except*`)"
    fix_title = "Catch an exception group"
    fix_safety = Safety.SAFE
    default_enabled = False

    def visit_Try(self, node: cst.Try) -> None:
        handler = node.handlers[0] if node.handlers else None
        if handler is not None and isinstance(handler.type, cst.Name) and \
                handler.type.value == "NeedsGroup":
            self.report(node, replacement=cst.parse_statement(
                "try:\n    pass\nexcept* NeedsGroup:\n    pass\n"))


class RecordsItsProcess(Rule):
    """Notes the process that lints each file in $PTLINT_TEST_PID_DIR (one empty
    file per process id); on a file containing BLOCK-ME it then blocks, as a
    long file would, until it is killed (at most five minutes)."""

    code = "PTL997"
    message = "test: records its process, may block"
    default_enabled = False

    def visit_Module(self, node: cst.Module) -> None:
        folder = os.environ.get("PTLINT_TEST_PID_DIR")
        if folder:
            open(os.path.join(folder, str(os.getpid())), "a").close()
        if "BLOCK-ME" in self.context.source:
            import time

            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                time.sleep(0.5)
