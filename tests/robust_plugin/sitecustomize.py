"""Loaded at interpreter start-up when tests/robust_plugin is on PYTHONPATH
(tests/test_robustness.py and tests/test_notebook.py do that for their
subprocesses): makes the misbehaving test rules in rules/ visible to ptlint's
registry, lets PTL102 fix notebooks, can make a file vanish between discovery
and reading, and counts operations. Never shipped."""
import os

if os.environ.get("PTLINT_TEST_COUNT"):
    # Counts what grows with the square of the input when an algorithm is
    # quadratic: comparisons of positions (edits checked against each other)
    # and characters of source lines read (a line rescanned per finding).
    # Written to the named file when the process exits.
    import atexit
    import json

    import ptlint.io.text
    from ptlint.model import Position

    counts = {"position comparisons": 0, "line characters read": 0}

    def _counted(real):
        def compare(self, other):
            counts["position comparisons"] += 1
            return real(self, other)
        return compare

    for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__"):
        setattr(Position, _name, _counted(getattr(Position, _name)))
    _line_text = ptlint.io.text.line_text

    def line_text(text, starts, line):
        out = _line_text(text, starts, line)
        counts["line characters read"] += len(out)
        return out

    ptlint.io.text.line_text = line_text
    atexit.register(lambda: open(os.environ["PTLINT_TEST_COUNT"], "w").write(json.dumps(counts)))

if os.environ.get("PTLINT_TEST_RULES"):
    import ptlint.rules

    ptlint.rules.__path__.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules"))
    # settings select rules from the generated catalog: it must know them too
    import ptlint._catalog
    from ptlint.rule import registry

    ptlint._catalog.RULES.update((c, (r.name, r.default_enabled)) for c, r in registry().items())
    ptlint._catalog.LOAD.update(
        (c, (r.__module__.rpartition(".")[2], tuple(r.requires_text), r.torch_versions))
        for c, r in registry().items())

if os.environ.get("PTLINT_TEST_NOTEBOOK_FIXES"):
    # PTL102 fixes every call it can rebuild, notebooks included: the notebook tests use
    # it as a fix that adds an import (the rule itself offers none in notebooks)
    from ptlint.rules import ptl102_data_parallel

    ptl102_data_parallel.DataParallel._fixable = lambda self, wrap: wrap.rebuildable

if os.environ.get("PTLINT_TEST_VANISH"):
    import ptlint.io.files

    _discover = ptlint.io.files.discover

    def discover(paths, settings):
        found = _discover(paths, settings)
        for name in os.environ["PTLINT_TEST_VANISH"].split(os.pathsep):
            os.unlink(name)  # found, then gone before it is read
        return found

    ptlint.io.files.discover = discover

if os.environ.get("PTLINT_TEST_EDIT_BEFORE_WRITE"):
    # Another process saves the file between ptlint reading it and writing it back.
    import ptlint.io.text

    _write_atomic = ptlint.io.text.write_atomic

    def write_atomic(path, data, expected=None):
        from pathlib import Path

        edited = Path(path).read_bytes().replace(b"ORIGINAL", b"EDITED ELSEWHERE")
        Path(path).write_bytes(edited)
        return _write_atomic(path, data, expected)

    ptlint.io.text.write_atomic = write_atomic
