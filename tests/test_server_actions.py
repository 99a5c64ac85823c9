"""`ptlint server`'s code actions, hover and documentation command, driven over
stdio: every action applied to the text as the editor holds it, and the result
re-parsed."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.uris import to_fs_path

from conftest import fixture_dirs, settings_for
from lsp_harness import command_of, editor
from ptlint.engine.fix import fix_text
from ptlint.engine.lint import lint_text
from ptlint.rule import registry

pytestmark = pytest.mark.asyncio

DP = "import torch\nm = torch.nn.DataParallel(model.cuda())\n"


def is_command(action) -> bool:
    return isinstance(action, types.Command) or action.command is not None


async def test_every_action_on_every_rule_fixture_gives_code_that_parses(tmp_path):
    """Each fixture's bad.py: every action for every finding, applied and re-parsed;
    a fix removes its finding, a suppression silences exactly its code."""
    settings = settings_for("ALL")
    applied = {"fix": 0, "noqa": 0, "docs": 0}
    async with editor(tmp_path, options={"select": ["ALL"]}) as ed:
        for folder in fixture_dirs():
            text = (folder / "bad.py").read_text(encoding="utf-8")
            doc = ed.open(tmp_path / f"{folder.name}.py", text)
            diagnostics = await ed.diagnostics(doc)
            assert diagnostics, folder.name
            for diag in diagnostics:
                actions = await ed.actions(doc, diag, only=[types.CodeActionKind.QuickFix])
                titles = [a.title for a in actions]
                assert f"Show documentation for {diag.code}" in titles
                assert f"Suppress {diag.code} on this line" in titles
                for action in actions:
                    if is_command(action):
                        applied["docs"] += 1
                        continue
                    [target] = action.diagnostics  # the range may hold other findings too
                    code, line = target.code, target.range.start.line
                    action = await ed.resolved(action)
                    if action.title.startswith("Suppress"):
                        [new] = ed.apply(action.edit).values()
                        ast.parse(new)
                        assert re.search(rf"# noqa: (\w+, )*{code}\b", new.splitlines()[line])
                        left = lint_text(new, "x.py", settings).findings
                        assert not any(f.code == code and f.span.start.line == line + 1
                                       for f in left)
                        applied["noqa"] += 1
                        continue
                    assert action.title.startswith(f"{code}: ")
                    unsafe = action.title.endswith("(unsafe fix)")
                    assert registry()[code].fix_safety is not None
                    assert bool(action.is_preferred) == (not unsafe), action.title
                    assert action.edit is not None, action.title
                    [new] = ed.apply(action.edit).values()
                    ast.parse(new)
                    compile(new, folder.name, "exec")
                    applied["fix"] += 1
            ed.close(doc)
    assert applied["fix"] > 30 and applied["noqa"] > 50 and applied["docs"] > 40, applied


async def test_fix_all_is_what_fix_writes(tmp_path):
    text = (
        "import torch\n"
        "x = torch.tensor(3.0)\n"
        "with torch.no_grad:\n"  # PTL025: safe
        "    y = torch.log(1 + x)\n"  # PTL110: safe
        "m = torch.nn.DataParallel(model.cuda())\n"  # PTL102: unsafe
    )
    for options, unsafe, title in (
        (None, False, "Fix all safe findings in file"),
        ({"unsafe-fixes": True}, True, "Fix all findings in file (unsafe fixes included)"),
    ):
        async with editor(tmp_path, options=options) as ed:
            doc = ed.open(tmp_path / "all.py", text)
            await ed.diagnostics(doc)
            [action] = await ed.actions(doc, only=[types.CodeActionKind.SourceFixAll])
            assert action.kind == "source.fixAll.ptlint" and action.title == title
            [new] = ed.apply((await ed.resolved(action)).edit).values()
            expected = fix_text(text, str(tmp_path / "all.py"), settings_for(
                *(r for r in registry() if registry()[r].default_enabled)), unsafe=unsafe).text
            assert new == expected
            assert "log1p" in new and ("DistributedDataParallel" in new) == unsafe
            compile(new, "all.py", "exec")


async def test_suppression_appends_to_a_noqa_list_and_is_not_offered_where_it_would_break(tmp_path):
    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "noqa.py",
                      "import torch\nm = torch.nn.DataParallel(model)  # noqa: E501\n")
        [diag] = await ed.diagnostics(doc)
        [action] = [a for a in await ed.actions(doc, diag) if a.title.startswith("Suppress")]
        [new] = ed.apply(action.edit).values()
        assert new == "import torch\nm = torch.nn.DataParallel(model)  # noqa: E501, PTL102\n"
        # the line goes on in a string, or after a backslash: a comment cannot go there
        for text in ('import torch\nm = torch.nn.DataParallel(model.cuda(), x="""\n""")\n',
                     "import torch\nm = torch.nn.DataParallel(model.cuda()) if a else \\\n    b\n"):
            ed.change(doc, text)
            [diag] = await ed.diagnostics(doc)
            titles = [a.title for a in await ed.actions(doc, diag)]
            assert "Suppress PTL102 on this line" not in titles
            assert any(t.startswith("PTL102: ") for t in titles)


async def test_clients_without_resolve_get_the_edits_at_once(tmp_path):
    """Emacs 29 (eglot) cannot resolve code actions, counts columns in UTF-32
    and takes `documentChanges` with versions."""
    text = "import torch\nnote = '🔥'; m = torch.nn.DataParallel(model.cuda())\n"
    async with editor(tmp_path, client="emacs") as ed:
        doc = ed.open(tmp_path / "e.py", text)
        [diag] = await ed.diagnostics(doc)
        actions = await ed.actions(doc, diag)
        fix = next(a for a in actions if a.title.startswith("PTL102"))
        assert fix.edit is not None and fix.edit.document_changes
        [new] = ed.apply(fix.edit).values()
        assert "note = '🔥'; m = DistributedDataParallel(model.cuda())" in new
        compile(new, "e.py", "exec")


async def test_a_fix_that_would_break_the_file_is_never_applied(tmp_path):
    async with editor(tmp_path, options={"select": ["PTL991"]}, test_rules=True) as ed:
        doc = ed.open(tmp_path / "b.py", "break_me = 1\n")
        [diag] = await ed.diagnostics(doc)
        [fix] = [a for a in await ed.actions(doc, diag) if a.title.startswith("PTL991")]
        assert (await ed.resolved(fix)).edit is None
    async with editor(tmp_path, options={"select": ["PTL991"]}, test_rules=True,
                      client="emacs") as ed:  # no resolve: such an action is not offered
        doc = ed.open(tmp_path / "b.py", "break_me = 1\n")
        [diag] = await ed.diagnostics(doc)
        assert not [a for a in await ed.actions(doc, diag) if a.title.startswith("PTL991")]


async def test_a_stale_action_resolves_to_nothing(tmp_path):
    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "s.py", DP)
        [diag] = await ed.diagnostics(doc)
        [fix] = [a for a in await ed.actions(doc, diag) if a.title.startswith("PTL102")]
        ed.change(doc, "# moved\n" + DP)
        await ed.diagnostics(doc)
        assert (await ed.resolved(fix)).edit is None


async def test_hover_says_why_it_is_bad(tmp_path):
    why = registry()["PTL102"].doc_section("Why is this bad?")
    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "h.py", DP)
        [diag] = await ed.diagnostics(doc)
        hover = await ed.client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(doc), types.Position(1, 10)))
        assert hover.contents.kind == types.MarkupKind.Markdown
        assert hover.contents.value.startswith("**PTL102** `data-parallel`: ")
        assert "**Why is this bad?**" in hover.contents.value and why in hover.contents.value
        assert hover.range == diag.range
        assert await ed.client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(doc), types.Position(0, 3))) is None


async def test_show_documentation_opens_and_returns_the_rules_page(tmp_path):
    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "d.py", DP)
        [diag] = await ed.diagnostics(doc)
        [action] = [a for a in await ed.actions(doc, diag) if a.title.startswith("Show")]
        name, arguments = command_of(action)
        assert name == "ptlint.showDocumentation"
        text = await ed.client.workspace_execute_command_async(types.ExecuteCommandParams(
            name, arguments))
        assert text.startswith("# data-parallel (PTL102)") and "## Why is this bad?" in text
        [shown] = ed.client.shown_documents
        assert shown.uri == diag.code_description.href
        assert Path(to_fs_path(shown.uri)).read_text(encoding="utf-8") == text
