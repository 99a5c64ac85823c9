"""The server: the lint schedule, diagnostics, and the handlers of each LSP
message.

Linting runs in one worker thread, so the server keeps reading messages while a
large file is linted. A change is linted at once when the lint thread is idle;
while it is busy, the change waits `DEBOUNCE` seconds and a newer change cancels
that wait (typing faster than linting is coalesced), and the result of a lint whose
document changed or closed meanwhile is dropped: every document and notebook
has a generation that each change bumps, and only a result for the current
generation is published (with the client's version).
"""
from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ptlint import __version__
from ptlint.model import Safety
from ptlint.server import docs
from ptlint.server.documents import Lines, Store, fs_path
from ptlint.server.lint import Configs, Item, Linted, check_overrides, lint

DEBOUNCE = 0.05  # seconds a change waits for the next one while a lint is running
FIX_ALL = "source.fixAll.ptlint"
SHOW_DOCS = "ptlint.showDocumentation"
CONFIG_FILES = ("pyproject.toml", "ptlint.toml")


class PtlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "ptlint", __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                # "*": every notebook type (Jupyter, VS Code's interactive window)
                notebook_selector=[types.NotebookDocumentFilterWithNotebook(
                    notebook="*", cells=[types.NotebookCellLanguage(language="python")])],
                save=True,
            ),
        )
        self.store = Store()
        self.configs = Configs({}, [])
        self.encoding = types.PositionEncodingKind.Utf16.value
        self.results: dict[str, Linted] = {}
        self.published: dict[str, set[str]] = {}  # target -> URIs given diagnostics
        self.tasks: dict[str, asyncio.Task] = {}
        self.linting = 0  # lints running in the lint thread or queued for it
        self.waiting: set[str] = set()  # targets whose lint is still in its debounce
        self.parsers: dict[str, Any] = {}  # file -> its Reparser (used in the lint thread only)
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="ptlint-lint")
        self.shown: set[str] = set()  # messages already shown to the user
        self.problems: list[str] = []  # with the initialization options, shown when initialized
        self.shut_down = False

    # -- messages to the user -----------------------------------------------------
    def tell(self, message: str, kind: types.MessageType, *, once: bool = True) -> None:
        """Log `message`, and show it the first time (or every time, `once=False`)."""
        self.window_log_message(types.LogMessageParams(kind, f"ptlint: {message}"))
        if not once or message not in self.shown:
            self.shown.add(message)
            self.window_show_message(types.ShowMessageParams(kind, f"ptlint: {message}"))

    def trace(self, message: str) -> None:
        if self.protocol.trace not in (None, types.TraceValue.Off):
            self.log_trace(types.LogTraceParams(message=message))

    def capability(self, path: str) -> Any:
        """A client capability by dotted path, or None."""
        value: Any = self.client_capabilities
        for name in path.split("."):
            value = getattr(value, name, None)
        return value

    # -- the lint schedule ----------------------------------------------------------
    def schedule(self, target: str, delay: float = DEBOUNCE) -> asyncio.Task:
        old = self.tasks.pop(target, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._run(target, delay))
        self.tasks[target] = task
        return task

    async def _run(self, target: str, delay: float) -> None:
        if delay and not self.linting and not self.waiting:
            delay = 0  # nothing to coalesce with: no need to wait
        if delay:
            self.waiting.add(target)
            try:
                await asyncio.sleep(delay)
            finally:
                self.waiting.discard(target)
        snapshot = self.store.snapshot(target)
        if snapshot is None:
            return
        previous = self.results.get(target)
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        job = self.executor.submit(self._lint, snapshot, previous)
        self.linting += 1  # until the job ends, even if this task is cancelled first
        job.add_done_callback(lambda _: _call_soon(loop, self._lint_done))
        linted = await asyncio.wrap_future(job)
        if self.store.generation(target) != snapshot.generation:
            return  # changed or closed while it was linted: a newer lint follows
        self.results[target] = linted
        if linted is not previous:
            self.publish(linted)
            parser = self.parsers.get(target)
            part = ", re-parsed in part" if parser is not None and parser.partial else ""
            self.trace(f"linted {target} in {time.perf_counter() - started:.3f} s: "
                       f"{len(linted.items)} findings{part}")

    def _lint_done(self) -> None:
        self.linting -= 1

    def _lint(self, snapshot, previous: Linted | None) -> Linted:
        """In the worker thread: the previous result if nothing it depends on changed."""
        if previous is not None and previous.generation == snapshot.generation \
                and previous.settings is not None:
            try:
                if self.configs.settings_for(snapshot.path) is previous.settings:
                    return previous
            except Exception:  # noqa: BLE001 - lint() reports configuration errors
                pass
        parser = None
        if snapshot.cells is None and self.store.generation(snapshot.uri) is not None:
            parser = self.parsers.get(snapshot.uri)
            if parser is None:
                from ptlint.engine.reparse import Reparser

                parser = self.parsers[snapshot.uri] = Reparser()
        return lint(snapshot, self.configs, parser)

    async def current(self, target: str | None) -> Linted | None:
        """The lint of the target's current text, linting it now if need be."""
        for _ in range(20):  # gives up only if the document keeps changing
            if target is None or self.store.generation(target) is None:
                return None
            done = self.results.get(target)
            if done is not None and done.generation == self.store.generation(target):
                return done
            task = self.tasks.get(target)
            if task is None or task.done() or target in self.waiting:
                task = self.schedule(target, 0)
            await asyncio.wait({task})
        return None

    def forget(self, target: str) -> None:
        """A closed document or notebook: no lint, and no diagnostics left behind."""
        task = self.tasks.pop(target, None)
        if task is not None:
            task.cancel()
        self.results.pop(target, None)
        self.parsers.pop(target, None)
        for uri in self.published.pop(target, set()) | {target}:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    # -- diagnostics ----------------------------------------------------------------
    def publish(self, linted: Linted) -> None:
        snapshot = linted.snapshot
        if linted.config_error is not None:
            self.tell(linted.config_error, types.MessageType.Error)
        for error in linted.errors:
            self.tell(error, types.MessageType.Warning)
        uris = [snapshot.uri] if snapshot.cells is None else [u for _, u, _ in snapshot.cells]
        by_uri: dict[str, list[types.Diagnostic]] = {uri: [] for uri in uris}
        lines: dict[str, Lines] = {}
        for item in linted.items:
            by_uri[item.uri].append(self.diagnostic(item, lines))
        for uri in self.published.get(snapshot.uri, set()) - set(uris):
            by_uri[uri] = []  # a cell that left the notebook or stopped being Python code
        self.published[snapshot.uri] = set(uris)
        for uri, diagnostics in by_uri.items():
            doc = self.store.documents.get(uri)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri, diagnostics, version=doc.version if doc is not None else None))

    def lines(self, uri: str, cache: dict[str, Lines] | None = None) -> Lines:
        if cache is not None and uri in cache:
            return cache[uri]
        doc = self.store.documents.get(uri)
        found = Lines(doc.text if doc is not None else "", self.encoding)
        if cache is not None:
            cache[uri] = found
        return found

    def diagnostic(self, item: Item, cache: dict[str, Lines] | None = None) -> types.Diagnostic:
        f = item.finding
        href = docs.doc_uri(f.code)
        return types.Diagnostic(
            range=self.lines(item.uri, cache).range(f.span.start, f.span.end),
            message=f.message,
            severity=types.DiagnosticSeverity.Error if f.code == "PTL000"
            else types.DiagnosticSeverity.Warning,
            code=f.code,
            code_description=types.CodeDescription(href=href) if href else None,
            source="ptlint",
            data={"name": f.name},
        )

    def items_at(self, linted: Linted, uri: str, where: types.Range) -> list[tuple[int, Item]]:
        """The findings of `uri` whose range touches `where`, with their index."""
        lines = self.lines(uri)
        start = lines.from_offset(lines.offset(where.start))
        end = lines.from_offset(lines.offset(where.end))
        return [(i, item) for i, item in enumerate(linted.items) if item.uri == uri
                and item.finding.span.start <= end and start <= item.finding.span.end]

    # -- edits ------------------------------------------------------------------------
    def workspace_edit(self, linted: Linted, texts: dict[str, str]) -> types.WorkspaceEdit:
        from ptlint.server.edits import text_edits

        old = linted.texts()
        edits = {uri: text_edits(old[uri], new, self.encoding) for uri, new in texts.items()}
        if self.capability("workspace.workspace_edit.document_changes"):
            return types.WorkspaceEdit(document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri, self.store.documents[uri].version
                        if uri in self.store.documents else None),
                    edits=list(changes),
                ) for uri, changes in edits.items()
            ])
        return types.WorkspaceEdit(changes=edits)

    async def in_worker(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


def _call_soon(loop: asyncio.AbstractEventLoop, fn) -> None:
    try:
        loop.call_soon_threadsafe(fn)
    except RuntimeError:  # the loop is closed: the server is stopping
        pass


def wanted(only: list[str] | None, kind: str) -> bool:
    """Whether a request for the kinds `only` asks for actions of `kind`."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def fix_title(item: Item) -> str:
    fix = item.finding.fix
    assert fix is not None
    label = " (unsafe fix)" if fix.safety is Safety.UNSAFE else ""
    return f"{item.finding.code}: {fix.title}{label}"


# -- the handlers ---------------------------------------------------------------------
def initialize(ls: PtlintServer, params: types.InitializeParams) -> None:
    overrides, problems = check_overrides(params.initialization_options)
    folders = [fs_path(f.uri) for f in params.workspace_folders or []]
    if not folders and params.root_uri:
        folders = [fs_path(params.root_uri)]
    ls.configs = Configs(overrides, [f for f in folders if f is not None])
    encoding = ls.workspace.position_encoding or types.PositionEncodingKind.Utf16
    ls.encoding = getattr(encoding, "value", encoding)
    if params.trace is not None:
        ls.protocol.trace = params.trace
    ls.problems = problems
    if params.process_id is not None and os.name == "posix":
        asyncio.get_running_loop().create_task(_watch_parent(params.process_id))


async def _watch_parent(pid: int) -> None:
    """The client went away without closing the pipe: stop too."""
    while True:
        await asyncio.sleep(5)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:
            pass  # alive, but another user's


async def initialized(ls: PtlintServer, params: types.InitializedParams) -> None:
    for problem in ls.problems:
        ls.tell(problem, types.MessageType.Warning)
    if ls.capability("workspace.did_change_watched_files.dynamic_registration"):
        watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILES]
        try:
            await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                types.Registration(
                    id="ptlint-config", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(
                        watchers=watchers),
                )
            ]))
        except Exception as exc:  # noqa: BLE001 - configuration changes then show on the next lint
            ls.window_log_message(types.LogMessageParams(
                types.MessageType.Warning, f"ptlint: cannot watch configuration files: {exc}"))


def did_open(ls: PtlintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.store.open(params.text_document)
    ls.schedule(params.text_document.uri, 0)


def did_change(ls: PtlintServer, params: types.DidChangeTextDocumentParams) -> None:
    doc = params.text_document
    target = ls.store.change(doc.uri, doc.version, list(params.content_changes), ls.encoding)
    if target is not None:
        ls.schedule(target)


def did_save(ls: PtlintServer, params: types.DidSaveTextDocumentParams) -> None:
    target = ls.store.target(params.text_document.uri)
    if target is not None:
        ls.schedule(target, 0)


def did_close(ls: PtlintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.store.close(params.text_document.uri)
    ls.forget(params.text_document.uri)


def notebook_open(ls: PtlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    ls.store.open_notebook(params)
    ls.schedule(params.notebook_document.uri, 0)


def notebook_change(ls: PtlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    for cell in ls.store.change_notebook(params, ls.encoding):
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(cell, []))
        ls.published.get(uri, set()).discard(cell)
    if uri in ls.store.notebooks:
        ls.schedule(uri)


def notebook_save(ls: PtlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    if params.notebook_document.uri in ls.store.notebooks:
        ls.schedule(params.notebook_document.uri, 0)


def notebook_close(ls: PtlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    ls.store.close_notebook(params.notebook_document.uri)
    ls.forget(params.notebook_document.uri)


def watched_files(ls: PtlintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if not any(Path(fs_path(c.uri) or "").name in CONFIG_FILES for c in params.changes):
        return
    ls.configs.clear()
    ls.shown.clear()  # a configuration error may come back: say it again
    for target in ls.store.targets():
        ls.schedule(target, 0)


def shutdown(ls: PtlintServer, params: None) -> None:
    ls.shut_down = True
