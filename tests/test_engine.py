"""Engine pieces that every rule relies on."""
from __future__ import annotations

from ptlint.engine import apply_edits, non_overlapping
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

    from ptlint.engine import _Locator
    from ptlint.walk import descendants

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
            locator = _Locator(module, nodes, nodes, source)
            assert _ranges(locator.span, nodes) == _ranges(syntactic.__getitem__, nodes), name
            assert _ranges(locator.inclusive_span, nodes) == _ranges(
                inclusive.__getitem__, nodes), name
        statements = list(module.body)
        for statement in statements[1::3]:  # a few statements: only those are printed
            below = set(descendants(statement))
            inside = [n for n in nodes if n in below]
            locator = _Locator(module, inside, inside, text)
            partial += locator.partial
            assert _ranges(locator.span, inside) == _ranges(syntactic.__getitem__, inside), name
            assert _ranges(locator.inclusive_span, inside) == _ranges(
                inclusive.__getitem__, inside), name
        if name in LOCATOR_CASES:  # asked for one node alone, it gives the same range
            for node in nodes:
                alone = _Locator(module, [node], [], text)
                assert _ranges(alone.span, [node]) == _ranges(syntactic.__getitem__, [node]), name
    assert partial > 100  # most statements are printed alone, not the whole module
