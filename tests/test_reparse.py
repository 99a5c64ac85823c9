"""The editor's incremental parse gives exactly the tree a full parse gives."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from ptlint.config import Settings
from ptlint.engine.lint import lint_text
from ptlint.engine.reparse import Reparser

FIXTURES = sorted(Path(__file__).parent.parent.joinpath("fixtures").glob("*/bad.py"))

PROGRAM = '''"""A training script."""
import torch


def helper(x):
    return x * 2


class Model(torch.nn.Module):
    def forward(self, x):
        for step in range(3):
            x = x + step
            # a comment in the loop
        return x


def train(model, loader, optimizer):
    total = 0
    for batch in loader:
        optimizer.zero_grad()
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        total += loss
    return total


if __name__ == "__main__":
    train(Model(), [], None)
'''


def full(text: str) -> cst.Module | None:
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, SyntaxError, ValueError):
        return None


def check(parser: Reparser, text: str) -> cst.Module | None:
    """`text` through the parser (a full parse where it declines): the same tree
    and text as a full parse; the module is None when the text does not parse."""
    got = parser.reparse(text)
    want = full(text)
    if got is None:
        if want is not None:
            parser.remember(text, want)
        return None
    assert want is not None, "re-parsed a text that does not parse"
    assert got.code == text
    assert got.deep_equals(want)
    assert type(got.body) is type(want.body)  # tuples, as LibCST gives them
    return got


def replacements(line: str) -> list[list[str]]:
    """What each kind of edit puts in place of `line`."""
    body = line.rstrip("\r\n")
    indent = body[:len(body) - len(body.lstrip())]
    return [
        [body + " " + line[len(body):]],  # a space typed
        [indent + "# note\n", line],  # a comment, at the statement's indentation
        ["# note\n", line],  # at column 0
        [indent + "        # deep\n", line],  # indented further
        [indent + "zz = 1\n", line],  # a statement
        ["def added():\n", "    return 1\n", line],  # a top-level def
        [indent + "if zz:\n", indent + "    pass\n", line],  # a block
        [],  # the line deleted
        ["\n", line],  # a blank line
        [body + " (" + line[len(body):]],  # the syntax broken
        [body],  # joined with the next line
    ]


def edits(text: str):
    """Every kind of edit at every line, and a def appended: new texts."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        for new in replacements(line):
            yield "".join([*lines[:i], *new, *lines[i + 1:]])
    yield text + "def tail():\n    pass\n"


@pytest.mark.parametrize("text", [PROGRAM, PROGRAM.replace("\n", "\r\n"),
                                  PROGRAM.replace("    ", "\t")], ids=["lf", "crlf", "tabs"])
def test_every_edit_at_every_line_gives_the_full_parse(text):
    reparsed = 0
    for new in edits(text):
        parser = Reparser()
        parser.remember(text, cst.parse_module(text))
        if check(parser, new) is not None:
            reparsed += 1
            check(parser, text)  # and back
    assert reparsed > 100  # most edits are re-parsed, not parsed whole


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_files_edited_line_by_line(path):
    text = path.read_text(encoding="utf-8")
    if full(text) is None:
        pytest.skip("the fixture is a syntax error on purpose")
    parser = Reparser()
    parser.remember(text, cst.parse_module(text))
    lines = text.splitlines(keepends=True)
    kinds = len(replacements(""))
    # a series of edits, each on the text the one before made, every kind in turn
    for step, i in enumerate(range(len(lines) - 1, 0, -3)):
        lines[i:i + 1] = replacements(lines[i])[step % kinds]
        check(parser, "".join(lines))
    check(parser, text + "def tail():\n    pass\n")
    check(parser, text)


def test_a_change_inside_a_function_reparses_only_its_statements():
    parser = Reparser()
    parser.remember(PROGRAM, cst.parse_module(PROGRAM))
    old = parser.module
    new = check(parser, PROGRAM.replace("loss.backward()", "loss.backward(retain_graph=True)"))
    assert new is not None
    # everything but the changed function is the same objects as before
    assert [a is b for a, b in zip(old.body, new.body)] == [True, True, True, True, False, True]
    train_old, train_new = old.body[4].body.body, new.body[4].body.body
    assert train_old[0] is train_new[0] and train_old[2] is train_new[2]


def test_syntax_error_and_fix():
    parser = Reparser()
    parser.remember(PROGRAM, cst.parse_module(PROGRAM))
    broken = PROGRAM.replace("total += loss", "total += (loss")
    assert check(parser, broken) is None  # does not parse: no module, the old one is kept
    assert parser.text == PROGRAM
    assert check(parser, PROGRAM.replace("total += loss", "total += loss * 2")) is not None


def test_declines_what_it_cannot_do_exactly():
    parser = Reparser()
    parser.remember(PROGRAM, cst.parse_module(PROGRAM))
    assert parser.reparse(PROGRAM.replace('"""A', '"""The')) is None  # the header
    assert parser.reparse(PROGRAM.replace("    return x * 2", "  return x * 2")) is None
    assert parser.reparse(PROGRAM.replace("total = 0", "total = 0\f")) is None  # a form feed
    assert parser.reparse(PROGRAM.rstrip("\n")) is None  # no line break at the end


def test_lint_text_with_a_parser_finds_what_a_fresh_lint_finds():
    settings = Settings()
    parser = Reparser()
    text = PROGRAM
    for old, new in [("total += loss", "total += loss  # keep"), ("x = x + step", "x = x * step"),
                     ("total += loss  # keep", "total += loss.item()"),
                     ("total += loss.item()", "total += loss")]:
        text = text.replace(old, new)
        got = lint_text(text, "train.py", settings, parser=parser)
        want = lint_text(text, "train.py", settings)
        assert got.findings == want.findings and got.errors == want.errors
    assert any(f.code == "PTL001" for f in got.findings)


def test_the_parser_places_statements_whose_text_occurs_twice():
    """A file whose statements all occur twice: only the parser's offsets place a
    node's statement without printing the whole module, at LibCST's position."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from ptlint.analysis.walk import descendants
    from ptlint.engine.locate import Locator

    text = PROGRAM + PROGRAM
    parser = Reparser()
    parser.remember(text, cst.parse_module(text))
    edited = text.replace("x = x + step", "x = x * step", 1)  # both `train`s stay the same
    module = check(parser, edited)
    assert module is not None
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    second_train = module.body[-2].body.body  # the second `train`'s body
    nodes = [n for n in descendants(second_train[1]) if n in positions]  # its `for` loop
    alone = Locator(module, nodes, nodes, edited)
    assert not alone.partial  # the loop's text occurs twice: the whole module is printed
    placed = Locator(module, nodes, nodes, edited, parser.where)
    assert placed.partial
    assert [placed.span(n) for n in nodes] == [alone.span(n) for n in nodes]
    first = positions[nodes[0]].start
    assert (placed.span(nodes[0]).start.line, placed.span(nodes[0]).start.column) == (
        first.line, first.column)
