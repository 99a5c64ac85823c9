"""Engine pieces that every rule relies on."""
from __future__ import annotations


from ptlint.engine import locate
from ptlint.engine.fix import apply_edits, non_overlapping
from ptlint.engine.lint import lint_text
from ptlint.model import Edit, Fix, Position, Safety


def P(line: int, column: int) -> Position:
    return Position(line, column)


def test_apply_edits_in_any_order():
    text = "a = 1\nb = 2\n"
    edits = [Edit(P(2, 4), P(2, 5), "20"), Edit(P(1, 0), P(1, 1), "alpha")]
    assert apply_edits(text, edits) == "alpha = 1\nb = 20\n"


def test_apply_edits_keeps_crlf_and_counts_it_as_one_break():
    assert apply_edits("a = 1\r\nb = 2\r\n", [Edit(P(2, 0), P(2, 1), "c")]) == "a = 1\r\nc = 2\r\n"


def test_edit_to_the_end_of_a_file_without_final_newline():
    text = "x = 1\ny = 2"
    assert apply_edits(text, [Edit(P(2, 0), P(3, 0), "y = 3\n")]) == "x = 1\ny = 3\n"
    assert apply_edits(text, [Edit(P(2, 4), P(2, 5), "4")]) == "x = 1\ny = 4"


def test_overlapping_fixes_never_both_apply():
    a = Fix("a", Safety.SAFE, (Edit(P(1, 0), P(1, 5), "x"),))
    b = Fix("b", Safety.SAFE, (Edit(P(1, 3), P(1, 8), "y"),))
    c = Fix("c", Safety.SAFE, (Edit(P(2, 0), P(2, 1), "z"),))
    assert non_overlapping([b, a, c]) == [a, c]


LOCATOR_CASES = {
    "crlf": "import torch\r\nx = torch.zeros(3)\r\nif x:\r\n    y = (1 +\r\n         2)\r\n",
    "cr": "import torch\rx = torch.zeros(3)\rif x:\r    y = 1\r",
    "unicode": 'x = "中文"; y = [\n  1,\n]  # c\n@dec\ndef f(a, *, b=1, **k) -> int:\n    """doc"""\n    return a\n',
    "no final newline": "class A:\n    def f(self):\n        return 1",
    # a statement's text found earlier than the statement itself
    "duplicates": "x = f(1)\ny = 2\nx = f(1)\nz = 3\nx = f(1)\n",
    # the last line, without its newline, reads like an earlier statement printed alone
    "last line repeated": "def g(t):\n    y = f(1)\n\n\ndef h():\n    y = f(1)",
    "inside a string": 's = """\nx = f(1)\n"""\nx = f(1)\n',
    "inside brackets": "call(\nx\n)\nx\n",
}


def _ranges(mapping, nodes):
    return [(r.start.line, r.start.column, r.end.line, r.end.column)
            for r in (mapping(n) for n in nodes)]


def test_locator_gives_libcst_positions_for_every_node():
    """The engine's one-pass locator must agree with LibCST's two position
    providers on every node, for every fixture and odd line endings."""
    from pathlib import Path

    import libcst as cst
    from libcst.metadata import (
        MetadataWrapper,
        PositionProvider,
        WhitespaceInclusivePositionProvider,
    )

    from ptlint.analysis.walk import descendants

    texts = dict(LOCATOR_CASES)
    root = Path(__file__).resolve().parent.parent / "fixtures"
    texts.update((str(p), p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py")))
    assert len(texts) > 100
    partial = 0
    for name, text in texts.items():
        module = cst.parse_module(text)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        syntactic = wrapper.resolve(PositionProvider)
        inclusive = wrapper.resolve(WhitespaceInclusivePositionProvider)
        nodes = list(syntactic)
        for source in (None, text):  # the whole module printed, or only the statements needed
            locator = locate.Locator(module, nodes, nodes, source)
            assert _ranges(locator.span, nodes) == _ranges(syntactic.__getitem__, nodes), name
            assert _ranges(locator.inclusive_span, nodes) == _ranges(
                inclusive.__getitem__, nodes), name
        statements = list(module.body)
        for statement in statements[1::3]:  # a few statements: only those are printed
            below = set(descendants(statement))
            inside = [n for n in nodes if n in below]
            locator = locate.Locator(module, inside, inside, text)
            partial += locator.partial
            assert _ranges(locator.span, inside) == _ranges(syntactic.__getitem__, inside), name
            assert _ranges(locator.inclusive_span, inside) == _ranges(
                inclusive.__getitem__, inside), name
        if name in LOCATOR_CASES:  # asked for one node alone, it gives the same range
            for node in nodes:
                alone = locate.Locator(module, [node], [], text)
                assert _ranges(alone.span, [node]) == _ranges(syntactic.__getitem__, [node]), name
    assert partial > 100  # most statements are printed alone, not the whole module


def test_locator_prints_only_the_innermost_statement_it_needs():
    """Nodes inside a function's loop: only their statement is printed, and
    the positions are LibCST's."""
    from pathlib import Path

    import libcst as cst
    from libcst.metadata import (MetadataWrapper, PositionProvider,
                                 WhitespaceInclusivePositionProvider)

    from ptlint.analysis.walk import descendants

    root = Path(__file__).resolve().parent.parent / "fixtures"
    smaller = checked = 0
    for path in sorted(root.glob("PTL*/bad.py")):
        text = path.read_text(encoding="utf-8")
        module = cst.parse_module(text)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        syntactic = wrapper.resolve(PositionProvider)
        inclusive = wrapper.resolve(WhitespaceInclusivePositionProvider)
        for top in module.body:
            block = getattr(top, "body", None)
            if not isinstance(block, cst.IndentedBlock):
                continue
            whole = len(locate.Locator(module, [top], [top], text).tokens)
            for statement in block.body[::2]:
                inside = [n for n in descendants(statement) if n in syntactic]
                locator = locate.Locator(module, inside, inside, text)
                assert _ranges(locator.span, inside) == _ranges(syntactic.__getitem__, inside)
                assert _ranges(locator.inclusive_span, inside) == _ranges(
                    inclusive.__getitem__, inside)
                checked += 1
                smaller += len(locator.tokens) < whole
    assert checked > 200 and smaller > 0.9 * checked


NARROW_CASES = {
    # a block edit at the top level: the rule rebuilds the module
    "module-level loop": (
        "import torch\nfrom torch.amp import GradScaler\n\nopt = torch.optim.SGD([], 0.1)\n"
        "for x in range(3):\n    scaler = GradScaler('cpu')\n    scaler.scale(x).backward()\n"
        "    scaler.step(opt)\n    scaler.update()\n\nprint('done')\n"
    ),
}


def test_block_edits_are_narrowed_to_the_statements_that_change(monkeypatch):
    """A fix that rebuilds a whole block is applied as an edit of just the
    statements it changes, with the same result as printing the whole block."""
    from pathlib import Path

    from ptlint.config import Settings, validate

    settings = Settings(select=["ALL"])
    validate(settings)
    root = Path(__file__).resolve().parent.parent / "fixtures"
    texts = dict(NARROW_CASES)
    texts.update((str(p), p.read_text(encoding="utf-8")) for p in sorted(root.glob("PTL*/bad.py")))
    narrowed = 0
    for name, text in texts.items():
        narrow = lint_text(text, "x.py", settings).findings
        with monkeypatch.context() as m:
            m.setattr(locate, "_narrow", lambda old, new: None)
            whole = lint_text(text, "x.py", settings).findings
        assert [(f.code, f.span) for f in narrow] == [(f.code, f.span) for f in whole], name
        for a, b in zip(narrow, whole):
            if a.fix is None:
                assert b.fix is None
                continue
            assert apply_edits(text, a.fix.edits) == apply_edits(text, b.fix.edits), (name, a.code)
            size = sum(len(e.content) for e in a.fix.edits)
            narrowed += size < sum(len(e.content) for e in b.fix.edits)
    assert narrowed >= 5
    (finding,) = [f for f in lint_text(NARROW_CASES["module-level loop"], "x.py",
                                              settings).findings if f.code == "PTL120"]
    assert [(e.start.line, e.end.line) for e in finding.fix.edits] == [(5, 10)]


def test_narrowed_insertions_go_before_or_after_the_unchanged_statements():
    import libcst as cst

    from ptlint.config import Settings, validate
    from ptlint.model import Safety
    from ptlint.analysis.names import NameResolver
    from ptlint.rule import Context, Report, registry

    settings = Settings(select=["ALL"])
    validate(settings)
    text = "# top\nimport torch\n\n\ndef f():\n    a = 1\n    # b\n    b = 2\n"
    module = cst.parse_module(text)
    rule = registry()["PTL102"](Context("x.py", text, NameResolver()))
    body = module.body[1].body
    new = cst.parse_statement("x = 0\n")

    def fixed(old, replaced):
        report = Report(rule, module.body[1], "m", ((old, replaced),), Safety.SAFE)
        (finding,) = locate.build_findings(module, text, [report], "x.py", settings)
        return apply_edits(text, finding.fix.edits)

    for at in range(3):  # in an indented block: first, middle, last
        changed = body.with_changes(body=[*body.body[:at], new, *body.body[at:]])
        assert fixed(body, changed) == module.deep_replace(body, changed).code, at
    for at in range(3):  # at the top level
        changed = module.with_changes(body=[*module.body[:at], new, *module.body[at:]])
        assert fixed(module, changed) == changed.code, at
