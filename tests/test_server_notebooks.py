"""`ptlint server` and notebooks (LSP 3.17 notebook document sync): the code cells
are linted as one module, each finding lands on its cell, and edits go to the
cells they change."""
from __future__ import annotations

import pytest
from lsprotocol import types

from lsp_harness import editor, uri
from ptlint.io.ipython import mask

pytestmark = pytest.mark.asyncio

CELLS = [
    (types.NotebookCellKind.Code, "%matplotlib inline\nimport torch\nmodel = torch.nn.Linear(2, 2)\n"),
    (types.NotebookCellKind.Markup, "# torch.nn.DataParallel(model) in prose\n"),
    (types.NotebookCellKind.Code, "x = 1\nm = torch.nn.DataParallel(model)"),
]


def open_notebook(ed, path, cells):
    nb = uri(path)
    items = []
    for i, (kind, text) in enumerate(cells):
        cell = f"vscode-notebook-cell:{path}#C{i}"
        language = "python" if kind == types.NotebookCellKind.Code else "markdown"
        ed.texts[cell], ed.versions[cell] = text, 1
        items.append(types.TextDocumentItem(uri=cell, language_id=language, version=1, text=text))
    ed.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=nb, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=kind, document=item.uri)
                   for (kind, _), item in zip(cells, items)]),
        cell_text_documents=items))
    return nb, [item.uri for item in items]


def change_cell(ed, nb, version, cell, text):
    ed.texts[cell] = text
    ed.versions[cell] += 1
    ed.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(version=version, uri=nb),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            text_content=[types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=cell, version=ed.versions[cell]),
                changes=[types.TextDocumentContentChangeWholeDocument(text=text)])]))))


def compiles_as_cell(text: str) -> None:
    masked = mask(text, 0)
    compile(masked.text if masked else text, "cell", "exec")


async def test_findings_land_on_their_cell(tmp_path):
    async with editor(tmp_path, notebooks=True) as ed:
        nb, cells = open_notebook(ed, tmp_path / "nb.ipynb", CELLS)
        [diag] = await ed.diagnostics(cells[2])
        assert diag.code == "PTL102"  # `torch` and `model` come from cell 0
        assert (diag.range.start.line, diag.range.start.character) == (1, 4)
        assert (diag.range.end.line, diag.range.end.character) == (1, 32)
        assert await ed.diagnostics(cells[0]) == []
        assert ed.for_uri(cells[1]) == []  # markdown is not linted

        # a cell that does not parse: PTL000 on it, and the other cells are still linted
        change_cell(ed, nb, 2, cells[0], "%matplotlib inline\nimport torch\nmodel = (\n")
        [broken] = await ed.diagnostics(cells[0])
        assert broken.code == "PTL000" and broken.range.start.line == 2
        assert [d.code for d in await ed.diagnostics(cells[2])] == ["PTL102"]


async def test_cells_added_removed_and_closed(tmp_path):
    async with editor(tmp_path, notebooks=True) as ed:
        nb, cells = open_notebook(ed, tmp_path / "nb.ipynb", CELLS)
        await ed.diagnostics(cells[2])
        new = f"vscode-notebook-cell:{tmp_path / 'nb.ipynb'}#C9"
        ed.texts[new], ed.versions[new] = "n = torch.nn.DataParallel(model)\n", 1
        since = ed.mark()
        ed.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=nb),
            change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(start=2, delete_count=1, cells=[
                        types.NotebookCell(kind=types.NotebookCellKind.Code, document=new)]),
                    did_open=[types.TextDocumentItem(uri=new, language_id="python", version=1,
                                                     text=ed.texts[new])],
                    did_close=[types.TextDocumentIdentifier(uri=cells[2])])))))
        assert [d.code for d in await ed.diagnostics(new)] == ["PTL102"]
        await ed.wait(lambda pub: pub.uri == cells[2] and pub.diagnostics == [], since)

        ed.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=nb),
            cell_text_documents=[types.TextDocumentIdentifier(uri=c) for c in (cells[0], cells[1], new)]))
        await ed.wait(lambda pub: pub.uri == new and pub.diagnostics == [], since)


async def test_actions_edit_the_cells(tmp_path):
    # PTL102 offers no fix in notebooks: its fix is let through for this test (an import)
    async with editor(tmp_path, notebooks=True, notebook_fixes=True) as ed:
        nb, cells = open_notebook(ed, tmp_path / "nb.ipynb", CELLS)
        [diag] = await ed.diagnostics(cells[2])
        actions = await ed.actions(cells[2], diag)
        fix = next(a for a in actions if a.title.startswith("PTL102"))
        new = ed.apply((await ed.resolved(fix)).edit)
        # the fix's import goes to the cell that imports, the rewrite to the flagged cell
        assert set(new) == {cells[0], cells[2]}
        assert new[cells[0]].startswith("%matplotlib inline\n")
        assert "from torch.nn.parallel import DistributedDataParallel" in new[cells[0]]
        assert "m = DistributedDataParallel(model) if" in new[cells[2]]
        for text in new.values():
            compiles_as_cell(text)

        noqa = next(a for a in actions if a.title == "Suppress PTL102 on this line")
        [(cell, text)] = ed.apply(noqa.edit).items()
        assert cell == cells[2] and text == "x = 1\nm = torch.nn.DataParallel(model)  # noqa: PTL102"

        # PTL102's fix is unsafe: no "fix all" without `unsafe-fixes`
        assert await ed.actions(cells[2], only=["source.fixAll.ptlint"]) == []
        change_cell(ed, nb, 2, cells[2], "import torch\ny = torch.log(1 + x)\n")
        await ed.diagnostics(cells[2])
        [fix_all] = await ed.actions(cells[2], only=["source.fixAll.ptlint"])
        assert ed.apply((await ed.resolved(fix_all)).edit) == {
            cells[2]: "import torch\ny = torch.log1p(x)\n"}
