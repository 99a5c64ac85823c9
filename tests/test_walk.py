"""The lean walker visits what LibCST's own traversal visits, in the same order."""
from __future__ import annotations

import libcst as cst

from conftest import FIXTURES
from ptlint.analysis.walk import walk

PUNCTUATION = (cst.BaseParenthesizableWhitespace, cst.Comma, cst.LeftParen, cst.RightParen,
               cst.EmptyLine, cst.TrailingWhitespace, cst.Newline, cst.Comment,
               cst.AssignEqual, cst.Colon, cst.Dot, cst.Semicolon, cst.LeftSquareBracket,
               cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.ImportStar,
               cst.ParenthesizedWhitespace, cst.SimpleWhitespace)


class Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


class Everything(cst.BatchableCSTVisitor):
    def __init__(self, kinds: set[type]) -> None:
        super().__init__()
        self.seen: list[cst.CSTNode] = []
        self.left: list[cst.CSTNode] = []
        for kind in kinds:
            setattr(self, f"visit_{kind.__name__}", self.seen.append)
            setattr(self, f"leave_{kind.__name__}", self.left.append)

    def get_visitors(self):
        return {name: getattr(self, name) for name in vars(self) if name.startswith(("visit_", "leave_"))}


SAMPLE = '''
import torch as T
@T.no_grad()
def f(a, *b, c=1, **d) -> int:
    x = [i for i in range(3) if i]; y = {k: v for k, v in d.items()}
    with T.autocast("cpu") as ctx, open("f") as g:
        z = lambda q: q + 1 if q else -q
    for i, j in zip(a, b):
        x[i] += j ** 2
    try:
        pass
    except (ValueError, TypeError) as e:
        raise RuntimeError(f"{e!r:>10}") from e
    return (yield from g)
class C(T.nn.Module, metaclass=type):
    w: int = 3
'''


def _check(text: str) -> None:
    module = cst.parse_module(text)
    recorder = Recorder()
    module.visit(recorder)
    semantic = [n for n in recorder.nodes if not isinstance(n, PUNCTUATION)]
    visitor = Everything({type(n) for n in recorder.nodes})
    walk(module, [visitor])
    assert [id(n) for n in visitor.seen if not isinstance(n, PUNCTUATION)] == [id(n) for n in semantic]
    assert sorted(map(id, visitor.left)) == sorted(map(id, visitor.seen))


def test_same_nodes_same_order_on_sample():
    _check(SAMPLE)


def test_same_nodes_same_order_on_fixtures():
    for path in sorted(FIXTURES.glob("PTL*/*.py")):
        _check(path.read_text(encoding="utf-8"))


def test_deep_nesting_does_not_recurse():
    text = "x = " + "(" * 200 + "1" + ")" * 200 + "\n"
    module = cst.parse_module(text)
    visitor = Everything({cst.Integer})
    walk(module, [visitor])
    assert len(visitor.seen) == 1


def test_attribute_hooks_bracket_their_attribute():
    events = []

    class Hooks(cst.BatchableCSTVisitor):
        def visit_If_body(self, node):
            events.append("enter body")

        def leave_If_body(self, node):
            events.append("leave body")

        def visit_Name(self, node):
            events.append(node.value)

    walk(cst.parse_module("if a:\n    b\nelse:\n    c\n"), [Hooks()])
    assert events == ["a", "enter body", "b", "leave body", "c"]
