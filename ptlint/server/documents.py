"""The open documents as the client sees them: text documents, notebooks and their
cells, and positions in the client's encoding.

The server keeps its own copy of each text rather than pygls's, because LSP counts
only `\\n`, `\\r\\n` and `\\r` as line breaks (as Python does), while pygls splits
lines with `str.splitlines`, which also breaks at form feeds and other separators
that Python source may hold; edits applied with those lines would land in the
wrong place.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from ptlint.io.text import line_starts, line_text
from ptlint.model import Position

_generations = itertools.count(1)


class Lines:
    """A text's lines, to convert between ptlint's positions (1-based lines,
    columns in characters) and LSP's (0-based lines, columns in code units)."""

    def __init__(self, text: str, encoding: str) -> None:
        self.text = text
        self.starts = line_starts(text)
        self.encoding = encoding

    def _units(self, chars: str) -> int:
        if self.encoding == types.PositionEncodingKind.Utf32 or chars.isascii():
            return len(chars)
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(chars.encode("utf-8", "surrogatepass"))
        return len(chars.encode("utf-16-le", "surrogatepass")) // 2

    def line(self, number: int) -> str:
        """Line `number` (1-based) without its line break."""
        return line_text(self.text, self.starts, number)

    def to_lsp(self, pos: Position) -> types.Position:
        if pos.line > len(self.starts):  # the end of a file without a final line break
            last = len(self.starts)
            return types.Position(last - 1, self._units(self.line(last)))
        return types.Position(pos.line - 1, self._units(self.line(pos.line)[:pos.column]))

    def range(self, start: Position, end: Position) -> types.Range:
        return types.Range(self.to_lsp(start), self.to_lsp(end))

    def offset(self, pos: types.Position) -> int:
        """The index in the text of an LSP position (clamped to the text, as the
        protocol asks: a column past the end of its line means the line's end)."""
        if pos.line >= len(self.starts):
            return len(self.text)
        line = self.line(pos.line + 1)
        if self.encoding == types.PositionEncodingKind.Utf32 or line.isascii():
            column = min(pos.character, len(line))
        else:
            column, units = 0, 0
            while column < len(line) and units < pos.character:
                units += self._units(line[column])
                column += 1
        return self.starts[pos.line] + column

    def from_offset(self, offset: int) -> Position:
        line = bisect.bisect_right(self.starts, offset) - 1
        return Position(line + 1, offset - self.starts[line])


@dataclass
class Document:
    """An open text document: a file, or one cell of a notebook."""

    uri: str
    text: str
    version: int | None
    language_id: str = "python"
    notebook: str | None = None  # a cell: its notebook's URI
    generation: int = field(default_factory=lambda: next(_generations))

    def apply(self, changes: list, encoding: str) -> None:
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                lines = Lines(self.text, encoding)
                start, end = lines.offset(change.range.start), lines.offset(change.range.end)
                self.text = self.text[:start] + change.text + self.text[max(start, end):]
            else:
                self.text = change.text
        self.generation = next(_generations)


@dataclass
class Notebook:
    uri: str
    version: int
    cells: list[types.NotebookCell]
    generation: int = field(default_factory=lambda: next(_generations))


@dataclass(frozen=True)
class Snapshot:
    """What one lint sees: a file's text, or a notebook's Python code cells as
    (index in the notebook, cell URI, text)."""

    uri: str
    generation: int
    path: Path | None  # None for a document that is not a file (untitled:)
    text: str = ""
    cells: tuple[tuple[int, str, str], ...] | None = None


def fs_path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


def is_python_file(uri: str, language_id: str) -> bool:
    return language_id == "python" or uri.endswith((".py", ".pyi"))


class Store:
    """Every open document and notebook, and the snapshot of each lint target:
    a file, or a whole notebook (its cells are linted together)."""

    def __init__(self) -> None:
        self.documents: dict[str, Document] = {}
        self.notebooks: dict[str, Notebook] = {}

    # -- text documents ----------------------------------------------------------
    def open(self, item: types.TextDocumentItem, notebook: str | None = None) -> None:
        self.documents[item.uri] = Document(item.uri, item.text, item.version, item.language_id,
                                            notebook)

    def change(self, uri: str, version: int | None, changes: list, encoding: str) -> str | None:
        """Apply changes; the lint target they affect (None if not open)."""
        doc = self.documents.get(uri)
        if doc is None:
            return None
        doc.apply(changes, encoding)
        doc.version = version
        if doc.notebook is not None:
            notebook = self.notebooks.get(doc.notebook)
            if notebook is not None:
                notebook.generation = next(_generations)
            return doc.notebook
        return uri

    def close(self, uri: str) -> None:
        self.documents.pop(uri, None)

    # -- notebooks -----------------------------------------------------------------
    def open_notebook(self, params: types.DidOpenNotebookDocumentParams) -> None:
        nb = params.notebook_document
        self.notebooks[nb.uri] = Notebook(nb.uri, nb.version, list(nb.cells))
        for item in params.cell_text_documents:
            self.open(item, notebook=nb.uri)

    def change_notebook(self, params: types.DidChangeNotebookDocumentParams, encoding: str
                        ) -> list[str]:
        """Apply a notebook change; the URIs of the cells it closed."""
        nb = self.notebooks.get(params.notebook_document.uri)
        if nb is None:
            return []
        nb.version = params.notebook_document.version
        nb.generation = next(_generations)
        closed: list[str] = []
        cells = params.change.cells
        if cells is None:
            return closed
        if cells.structure is not None:
            array = cells.structure.array
            nb.cells[array.start:array.start + array.delete_count] = list(array.cells or [])
            for item in cells.structure.did_open or []:
                self.open(item, notebook=nb.uri)
            for ident in cells.structure.did_close or []:
                self.close(ident.uri)
                closed.append(ident.uri)
        by_uri = {cell.document: cell for cell in nb.cells}
        for data in cells.data or []:
            if data.document in by_uri:
                by_uri[data.document].kind = data.kind
        for text in cells.text_content or []:
            self.change(text.document.uri, text.document.version, list(text.changes), encoding)
        return closed

    def close_notebook(self, uri: str) -> list[str]:
        """Forget a notebook; the URIs of its cells."""
        nb = self.notebooks.pop(uri, None)
        cells = [cell.document for cell in nb.cells] if nb else []
        for cell in cells:
            self.close(cell)
        return cells

    # -- lint targets --------------------------------------------------------------
    def target(self, uri: str) -> str | None:
        """The lint target a document belongs to: itself, or its notebook."""
        doc = self.documents.get(uri)
        if doc is None:
            return uri if uri in self.notebooks else None
        return doc.notebook or uri

    def targets(self) -> list[str]:
        files = [u for u, d in self.documents.items()
                 if d.notebook is None and is_python_file(u, d.language_id)]
        return files + list(self.notebooks)

    def generation(self, target: str) -> int | None:
        if target in self.notebooks:
            return self.notebooks[target].generation
        doc = self.documents.get(target)
        return doc.generation if doc is not None else None

    def code_cells(self, target: str) -> list[tuple[int, Document]]:
        """(index in the notebook, document) of the notebook's Python code cells."""
        nb = self.notebooks[target]
        out = []
        for index, cell in enumerate(nb.cells):
            doc = self.documents.get(cell.document)
            if cell.kind == types.NotebookCellKind.Code and doc is not None and \
                    doc.language_id == "python":
                out.append((index, doc))
        return out

    def snapshot(self, target: str) -> Snapshot | None:
        if target in self.notebooks:
            nb = self.notebooks[target]
            cells = tuple((i, doc.uri, doc.text) for i, doc in self.code_cells(target))
            return Snapshot(target, nb.generation, fs_path(target), cells=cells)
        doc = self.documents.get(target)
        if doc is None or doc.notebook is not None or not is_python_file(target, doc.language_id):
            return None
        return Snapshot(target, doc.generation, fs_path(target), text=doc.text)
