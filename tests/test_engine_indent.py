"""Replacements that span lines keep the indentation of the block they sit in."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, WhitespaceInclusivePositionProvider

from conftest import settings_for
from ptlint.engine.fix import fix_text
from ptlint.engine.locate import edit_content


def test_multiline_call_replacement_keeps_its_indentation():
    source = (
        "import torch.nn as nn\n"
        "def f(model):\n"
        "    if True:\n"
        "        model = nn.DataParallel(\n"
        "            model.cuda(),\n"
        "            device_ids=[0, 1],\n"
        "        )\n"
        "    return model\n"
    )
    fixed = fix_text(source, "x.py", settings_for("PTL102"), unsafe=True).text
    assert (
        "        model = DistributedDataParallel(model.cuda()) if torch.distributed.is_available() "
        "and torch.distributed.is_initialized() else nn.DataParallel(\n"
        "            model.cuda(),\n"
        "            device_ids=[0, 1],\n"
        "        )\n"
    ) in fixed


def test_statement_rendered_at_its_depth():
    source = "def f(p):\n    for q in p:\n        q.data.zero_()\n"
    module = cst.parse_module(source)
    spans = MetadataWrapper(module, unsafe_skip_copy=True).resolve(WhitespaceInclusivePositionProvider)
    loop = module.body[0].body.body[0]
    statement = loop.body.body[0]
    new = cst.parse_statement("with torch.no_grad():\n    q.zero_()\n")
    assert edit_content(module, statement, new, spans[statement]) == (
        "        with torch.no_grad():\n            q.zero_()\n")
