"""`ptlint server` driven over stdio by a real LSP client (pytest-lsp): documents
opened, changed and closed, diagnostics, configuration discovery and refresh."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.uris import to_fs_path

from lsp_harness import editor, position, uri

pytestmark = pytest.mark.asyncio

DP = "import torch\nm = torch.nn.DataParallel(model)\n"
FLAGGED = "torch.nn.DataParallel(model)"


def span_of(text: str, needle: str, encoding: str = "utf-16") -> types.Range:
    at = text.index(needle)
    return types.Range(position(text, at, encoding), position(text, at + len(needle), encoding))


async def barrier(ed, doc: str) -> None:
    """Returns once the server has linted `doc`'s current text: what it published
    before, for any document, has arrived."""
    await ed.client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(doc), types.Position(0, 0)))


async def test_open_change_close(tmp_path):
    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "train.py", DP)
        [diag] = await ed.diagnostics(doc)
        assert diag.code == "PTL102"
        assert diag.source == "ptlint"
        assert diag.severity == types.DiagnosticSeverity.Warning
        assert diag.range == span_of(DP, FLAGGED)
        assert "DistributedDataParallel" in diag.message
        # the documentation link is a file that exists and holds the rule's page
        page = Path(to_fs_path(diag.code_description.href))
        assert page.read_text(encoding="utf-8").startswith("# data-parallel (PTL102)")

        ed.change(doc, DP.replace("nn.DataParallel(model)", "nn.Linear(2, 2)"))
        assert await ed.diagnostics(doc) == []

        ed.change(doc, "# a comment\n" + DP)
        [diag] = await ed.diagnostics(doc)
        assert diag.range.start.line == 2

        ed.close(doc)
        await ed.wait(lambda pub: pub.uri == doc and pub.version is None and not pub.diagnostics)


async def test_columns_follow_the_negotiated_position_encoding(tmp_path):
    text = 'import torch\nnote = "ünïcödé 🔥"; m = torch.nn.DataParallel(model)\n'
    # VS Code: UTF-16; Neovim 0.11 prefers UTF-8; Emacs 29 prefers UTF-32
    for client, encoding in (("visual-studio-code", "utf-16"), ("neovim@v0.11.0", "utf-8"),
                             ("emacs", "utf-32")):
        async with editor(tmp_path, client=client) as ed:
            assert ed.encoding == encoding
            doc = ed.open(tmp_path / "enc.py", text)
            [diag] = await ed.diagnostics(doc)
            assert diag.range == span_of(text, FLAGGED, encoding), client


async def test_syntax_error_is_where_python_puts_it_and_leaves_other_files_alone(tmp_path):
    broken = "import torch\n\ndef f(:\n    pass\n"
    try:
        compile(broken, "x", "exec")
    except SyntaxError as exc:
        line, column = exc.lineno, exc.offset
    async with editor(tmp_path) as ed:
        good = ed.open(tmp_path / "good.py", DP)
        assert len(await ed.diagnostics(good)) == 1
        doc = ed.open(tmp_path / "broken.py", DP)
        await ed.diagnostics(doc)
        ed.change(doc, broken)
        [diag] = await ed.diagnostics(doc)
        assert diag.code == "PTL000"
        assert diag.severity == types.DiagnosticSeverity.Error
        assert diag.message.startswith("SyntaxError:")
        assert (diag.range.start.line, diag.range.start.character) == (line - 1, column - 1)
        await barrier(ed, doc)
        assert len(ed.for_uri(good)) == 1  # published once, never wiped
        ed.change(doc, DP)  # fixed: the findings come back
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]


async def test_only_the_changed_document_is_linted_again(tmp_path):
    async with editor(tmp_path, trace=True) as ed:
        a = ed.open(tmp_path / "a.py", DP)
        b = ed.open(tmp_path / "b.py", DP)
        await ed.diagnostics(a)
        await ed.diagnostics(b)
        for n in range(3):
            ed.change(a, f"# {n}\n" + DP)
            await ed.diagnostics(a)
        await barrier(ed, b)
        assert len(ed.for_uri(b)) == 1
        assert sum(f"linted {b} " in t for t in ed.traces) == 1
        assert sum(f"linted {a} " in t for t in ed.traces) == 4


TRAIN = """import torch


def helper(x):
    return x * 2


def train(model, loader, optimizer):
    losses = []
    for batch in loader:
        optimizer.zero_grad()
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses


def evaluate(model, loader):
    return [model(batch) for batch in loader]
"""


async def test_edits_reparse_in_part_and_match_a_fresh_lint(tmp_path):
    edits = [("optimizer.step()", "optimizer.step()  # step"),  # a comment in the loop
             ("losses.append(loss)", "losses.append(loss.item())"),  # the finding goes
             ("losses.append(loss.item())",
              "losses.append(loss)\n        m = torch.nn.DataParallel(model)"),
             ("return x * 2", "return x * (2"),  # the syntax broken
             ("return x * (2", "return x * 3"),  # and fixed
             ("def evaluate", "def added():\n    pass\n\n\ndef evaluate")]  # a new def
    async with editor(tmp_path, trace=True) as ed:
        doc = ed.open(tmp_path / "train.py", TRAIN)
        await ed.diagnostics(doc)
        text = TRAIN
        for n, (old, new) in enumerate(edits):
            assert old in text
            text = text.replace(old, new)
            got = await ed.diagnostics(doc, ed.change(doc, text))
            fresh = ed.open(tmp_path / f"fresh{n}.py", text)  # linted from scratch
            want = await ed.diagnostics(fresh)
            assert [(d.code, d.range, d.message) for d in got] == \
                [(d.code, d.range, d.message) for d in want], old
            ed.close(fresh)
        await barrier(ed, doc)
        ours = [t for t in ed.traces if f"linted {doc} " in t]
        assert len(ours) == 1 + len(edits)
        assert sum(t.endswith("re-parsed in part") for t in ours) >= 4, ours


async def test_changes_faster_than_linting_never_publish_stale_diagnostics(tmp_path):
    def text(version: int) -> str:  # each version flags a different line
        return "import torch\n" + "\n" * version + "m = torch.nn.DataParallel(model)\n"

    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "fast.py", text(1))
        for version in range(2, 41):  # sent as fast as the client can
            assert ed.change(doc, text(version)) == version
        [diag] = await ed.diagnostics(doc, 40)
        assert diag.range.start.line == 41
        await barrier(ed, doc)
        published = ed.for_uri(doc)
        assert published[-1].version == 40
        for pub in published:  # whatever got published matched its own version's text
            [diag] = pub.diagnostics
            assert diag.range.start.line == pub.version + 1, pub.version
        assert len(published) < 40  # the burst was debounced


async def test_close_while_linting_publishes_nothing_for_the_closed_document(tmp_path):
    big = "import torch\n" + "m = torch.nn.DataParallel(model)\n" * 3000
    async with editor(tmp_path) as ed:
        doc = ed.open(tmp_path / "big.py", big)
        ed.close(doc)
        small = ed.open(tmp_path / "small.py", DP)
        await ed.diagnostics(small)  # linted after the big one: one lint thread, in order
        await barrier(ed, small)
        published = ed.for_uri(doc)
        assert published and published[-1].diagnostics == []
        assert all(p.diagnostics == [] for p in published)  # its lint finished after the close


async def test_nearest_configuration_per_document_and_refresh_on_change(tmp_path):
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    config = project / "pyproject.toml"
    config.write_text('[tool.ptlint]\nignore = ["PTL102"]\n')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "ptlint.toml").write_text('extend-select = ["PTL113"]\n')
    loader = ("import torch\nloader = torch.utils.data.DataLoader(ds)\nfor batch in loader:\n"
              "    print(batch)\n" + DP.split("\n", 1)[1])
    async with editor(tmp_path) as ed:
        inside = ed.open(project / "sub" / "train.py", loader)
        outside = ed.open(tmp_path / "other" / "train.py", loader)
        assert await ed.diagnostics(inside) == []  # PTL102 ignored, PTL113 off by default
        assert sorted(d.code for d in await ed.diagnostics(outside)) == ["PTL102", "PTL113"]
        # the server asked to be told of configuration changes (sent when initialized)
        assert [r.method for r in ed.registrations] == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]

        config.write_text('[tool.ptlint]\nselect = ["PTL113"]\n')
        since = ed.mark()
        ed.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri(config), types.FileChangeType.Changed)]))
        await ed.wait(lambda pub: pub.uri == inside and [d.code for d in pub.diagnostics] == ["PTL113"],
                      since)

        config.write_text("[tool.ptlint\n")  # broken: said once, and no stale findings left
        since = ed.mark()
        ed.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri(config), types.FileChangeType.Changed)]))
        await ed.wait(lambda pub: pub.uri == inside and pub.diagnostics == [], since)
        await barrier(ed, inside)
        [message] = [m for m in ed.client.messages if m.type == types.MessageType.Error]
        assert str(config) in message.message and "invalid TOML" in message.message


async def test_a_configuration_change_is_seen_without_file_watching(tmp_path):
    """Neovim on Linux does not watch files: a change shows on the next lint."""
    config = tmp_path / "ptlint.toml"
    config.write_text('ignore = ["PTL102"]\n')
    async with editor(tmp_path, client="neovim@v0.11.0") as ed:
        assert ed.registrations == []
        doc = ed.open(tmp_path / "a.py", DP)
        assert await ed.diagnostics(doc) == []
        config.write_text("ignore = []\n")
        ed.change(doc, DP + "\n")
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]
        config.write_text('ignore = ["PTL102"]\n')  # and on save, with no edit at all
        since = ed.mark()
        ed.client.text_document_did_save(types.DidSaveTextDocumentParams(
            types.TextDocumentIdentifier(doc)))
        assert await ed.wait(lambda pub: pub.uri == doc, since) == []


async def test_a_change_to_an_extended_configuration_is_seen(tmp_path):
    """A configuration is read again when a file it `extend`s changes, whatever
    that file's name."""
    base = tmp_path / "shared.toml"
    base.write_text('ignore = ["PTL102"]\n')
    (tmp_path / "ptlint.toml").write_text('extend = "shared.toml"\n')
    async with editor(tmp_path, client="neovim@v0.11.0") as ed:
        doc = ed.open(tmp_path / "a.py", DP)
        assert await ed.diagnostics(doc) == []
        base.write_text("ignore = []\n")
        ed.change(doc, DP + "\n")
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL102"]


async def test_initialization_options_override_the_configuration(tmp_path):
    (tmp_path / "ptlint.toml").write_text('ignore = ["PTL102"]\n')
    text = DP + "loader = torch.utils.data.DataLoader(ds)\nfor batch in loader:\n    print(batch)\n"
    async with editor(tmp_path, options={"select": ["PTL113"]}) as ed:
        doc = ed.open(tmp_path / "a.py", text)
        assert [d.code for d in await ed.diagnostics(doc)] == ["PTL113"]
    async with editor(tmp_path, options={"select": ["PTL999"], "colour": "blue"}) as ed:
        doc = ed.open(tmp_path / "a.py", text)
        assert await ed.diagnostics(doc) == []  # the configuration alone: PTL102 ignored
        await barrier(ed, doc)
        shown = " | ".join(m.message for m in ed.client.messages)
        assert "unknown rule selector 'PTL999'" in shown and "unknown key 'colour'" in shown


async def test_untitled_and_non_python_documents(tmp_path):
    async with editor(tmp_path) as ed:
        untitled = "untitled:Untitled-1"
        ed.texts[untitled], ed.versions[untitled] = DP, 1
        ed.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=untitled, language_id="python", version=1, text=DP)))
        assert [d.code for d in await ed.diagnostics(untitled)] == ["PTL102"]
        notes = ed.open(tmp_path / "notes.md", DP, language="markdown")
        await barrier(ed, untitled)
        await asyncio.sleep(0)
        assert ed.for_uri(notes) == []


async def test_a_change_waits_for_more_typing_only_while_a_lint_runs():
    from ptlint.server.server import PtlintServer

    ls = PtlintServer()
    doc = "untitled:scratch"
    ls.store.open(types.TextDocumentItem(uri=doc, language_id="python", version=1, text=DP))
    gate = threading.Event()
    ls.executor.submit(gate.wait)  # the lint thread holds what it is given until the end
    try:
        task = ls.schedule(doc)  # a change, with no lint running
        await asyncio.sleep(0)
        assert doc not in ls.waiting and ls.linting == 1  # handed to the lint thread at once
        task.cancel()
        assert ls.linting == 1  # the lint still runs, though its task was cancelled
        task = ls.schedule(doc)  # a change while it runs: waits for the next one
        await asyncio.sleep(0)
        assert doc in ls.waiting
        task.cancel()
    finally:
        gate.set()
        ls.executor.shutdown(wait=True)
