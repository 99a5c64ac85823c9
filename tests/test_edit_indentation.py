"""A replacement that spans lines keeps the indentation of the block it sits in."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, WhitespaceInclusivePositionProvider

from ptlint.engine.fix import apply_edits
from ptlint.engine.locate import edit_content
from ptlint.model import Edit, Position

SOURCE = """class Net:
    def forward(self, x):
        return dropout(
            x,
            p=0.5,
        )
"""


def test_multiline_replacement_keeps_block_indentation():
    module = cst.parse_module(SOURCE)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    span = wrapper.resolve(WhitespaceInclusivePositionProvider)
    call = m.findall(module, m.Call())[0]
    new = call.with_changes(args=[*call.args, cst.Arg(cst.parse_expression("True"),
                                                      keyword=cst.Name("training"))])
    where = span[call]
    content = edit_content(module, call, new, where)
    edit = Edit(Position(where.start.line, where.start.column),
                Position(where.end.line, where.end.column), content)
    assert apply_edits(SOURCE, [edit]) == module.deep_replace(call, new).code
    assert "            p=0.5,\n" in content  # not dedented to the module's level


def test_single_line_replacement_is_printed_alone():
    module = cst.parse_module("if x:\n    f(a)\n")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    span = wrapper.resolve(WhitespaceInclusivePositionProvider)
    call = m.findall(module, m.Call())[0]
    assert edit_content(module, call, call.with_changes(args=()), span[call]) == "f()"
