"""Driving `ptlint server` over stdio with pytest-lsp's client, as an editor does:
open, change and close documents and notebooks, wait for the diagnostics of a
given version, ask for code actions and apply their edits to the text the
client holds."""
from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pygls.protocol import default_converter

PLUGIN = Path(__file__).resolve().parent / "robust_plugin"
WAIT = 300  # seconds: a bound so that a broken server fails the test instead of hanging it


def uri(path: Path) -> str:
    return from_fs_path(str(path))


@dataclass
class Published:
    uri: str
    version: int | None
    diagnostics: list[types.Diagnostic]


@dataclass
class Editor:
    """A client session: the texts it holds, and what the server published."""

    client: LanguageClient
    texts: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    published: list[Published] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
    registrations: list[types.Registration] = field(default_factory=list)
    encoding: str = "utf-16"
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    # -- documents -----------------------------------------------------------------
    def open(self, path: Path, text: str, language: str = "python") -> str:
        doc = uri(path)
        self.texts[doc] = text
        self.versions[doc] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=doc, language_id=language, version=1, text=text)))
        return doc

    def change(self, doc: str, text: str) -> int:
        """Send the new text as one edit of the range that changed."""
        old = self.texts[doc]
        head = len(os.path.commonprefix([old, text]))
        tail = len(os.path.commonprefix([old[head:][::-1], text[head:][::-1]]))
        change = types.TextDocumentContentChangePartial(
            range=types.Range(position(old, head, self.encoding),
                              position(old, len(old) - tail, self.encoding)),
            text=text[head:len(text) - tail])
        self.texts[doc] = text
        self.versions[doc] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=doc, version=self.versions[doc]), [change]))
        return self.versions[doc]

    def close(self, doc: str) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            types.TextDocumentIdentifier(doc)))

    # -- what the server sends -------------------------------------------------------
    async def diagnostics(self, doc: str, version: int | None = None) -> list[types.Diagnostic]:
        """The first diagnostics published for `doc` at `version` (default: the
        version the client holds)."""
        want = self.versions.get(doc) if version is None else version
        return await self.wait(lambda pub: pub.uri == doc and pub.version == want)

    def mark(self) -> int:
        """A point in the publications, for `wait(since=...)`."""
        return len(self.published)

    async def wait(self, test, since: int = 0) -> list[types.Diagnostic]:
        """The diagnostics of the first publication (after `since`) for which
        `test` is true, waiting for it if need be."""

        async def first() -> list[types.Diagnostic]:
            seen = since
            while True:
                for pub in self.published[seen:]:
                    if test(pub):
                        return pub.diagnostics
                seen = len(self.published)
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(first(), WAIT)

    def for_uri(self, doc: str) -> list[Published]:
        return [p for p in self.published if p.uri == doc]

    async def actions(self, doc: str, diagnostic: types.Diagnostic | None = None,
                      only: list[str] | None = None) -> list[types.CodeAction | types.Command]:
        """The actions for `diagnostic`'s range (pytest-lsp's client reads an action
        that only runs a command as a `Command`)."""
        where = diagnostic.range if diagnostic else types.Range(types.Position(0, 0),
                                                               types.Position(0, 0))
        found = await self.client.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(doc), where,
            types.CodeActionContext(diagnostics=[diagnostic] if diagnostic else [], only=only)))
        return list(found or [])

    async def resolved(self, action: types.CodeAction) -> types.CodeAction:
        if action.edit is None and action.command is None:
            return await self.client.code_action_resolve_async(action)
        return action

    def apply(self, edit: types.WorkspaceEdit) -> dict[str, str]:
        """The client's texts with `edit` applied (they are kept, as an editor would)."""
        changed: dict[str, list[types.TextEdit]] = {}
        for doc_edit in edit.document_changes or []:
            assert isinstance(doc_edit, types.TextDocumentEdit)
            ident = doc_edit.text_document
            if ident.version is not None:  # the edit is for the version the client has
                assert ident.version == self.versions[ident.uri], (ident, self.versions)
            changed.setdefault(ident.uri, []).extend(doc_edit.edits)  # type: ignore[arg-type]
        for doc, edits in (edit.changes or {}).items():
            changed.setdefault(doc, []).extend(edits)
        out = {}
        for doc, edits in changed.items():
            text = self.texts[doc]
            spans = sorted(((offset(text, e.range.start, self.encoding),
                             offset(text, e.range.end, self.encoding), e.new_text)
                            for e in edits), reverse=True)
            for begin, end, new in spans:
                text = text[:begin] + new + text[end:]
            out[doc] = text
        return out


def command_of(action: types.CodeAction | types.Command) -> tuple[str, list | None]:
    """The command an action runs. lsprotocol reads any code action that has a
    `command` as a Command, whose `command` then holds the action's command
    object, printed: read it back."""
    command = action.command
    if isinstance(command, types.Command):
        return command.command, command.arguments
    if isinstance(command, str) and command.startswith("{"):
        found = ast.literal_eval(command)
        return found["command"], found.get("arguments")
    return str(command), getattr(action, "arguments", None)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")


def _lines(text: str) -> list[str]:
    return [m.group() for m in _LINE.finditer(text)][:-1] or [""]


def units(s: str, encoding: str = "utf-16") -> int:
    """The length of `s` in the code units of a position encoding."""
    if encoding == "utf-32":
        return len(s)
    if encoding == "utf-8":
        return len(s.encode("utf-8"))
    return len(s.encode("utf-16-le")) // 2


def position(text: str, at: int, encoding: str = "utf-16") -> types.Position:
    """The LSP position of index `at`."""
    pieces = re.split(r"\r\n|\r|\n", text[:at])
    return types.Position(len(pieces) - 1, units(pieces[-1], encoding))


def offset(text: str, pos: types.Position, encoding: str = "utf-16") -> int:
    lines = _lines(text)
    if pos.line >= len(lines):
        return len(text)
    begin = sum(len(piece) for piece in lines[:pos.line])
    body = lines[pos.line].rstrip("\r\n")
    count = column = 0
    while column < len(body) and count < pos.character:
        count += units(body[column], encoding)
        column += 1
    return begin + column


# -- starting a server ----------------------------------------------------------------------
def env(tmp_path: Path, *, test_rules: bool = False, pythonpath: Path | None = None,
        notebook_fixes: bool = False) -> dict[str, str]:
    out = dict(os.environ)
    out["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    if test_rules:  # the misbehaving rules of tests/robust_plugin
        pythonpath = PLUGIN
        out["PTLINT_TEST_RULES"] = "1"
    if notebook_fixes:  # PTL102 fixes notebooks too (tests/robust_plugin)
        pythonpath = PLUGIN
        out["PTLINT_TEST_NOTEBOOK_FIXES"] = "1"
    if pythonpath is not None:
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), out.get("PYTHONPATH")]))
    return out


def capabilities(client: str, *, notebooks: bool = False) -> types.ClientCapabilities:
    """A real client's capabilities (as pytest-lsp recorded them), optionally with
    LSP 3.17 notebook synchronisation, which VS Code has but did not record."""
    caps = client_capabilities(client)
    if notebooks:
        caps.notebook_document = types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities())
    return caps


@contextlib.asynccontextmanager
async def editor(tmp_path: Path, *, options: Any = None, client: str = "visual-studio-code",
                 trace: bool = False, test_rules: bool = False, folder: Path | None = None,
                 notebooks: bool = False, pythonpath: Path | None = None,
                 notebook_fixes: bool = False):
    """A started and initialized `ptlint server`, stopped at the end."""
    session: Editor

    def publish(_client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        session.published.append(Published(params.uri, params.version, list(params.diagnostics)))
        session.arrived.set()

    def log_trace(_client: LanguageClient, params: types.LogTraceParams) -> None:
        session.traces.append(params.message)

    def register(_client: LanguageClient, params: types.RegistrationParams) -> None:
        session.registrations.extend(params.registrations)

    def factory() -> LanguageClient:
        made = LanguageClient(converter_factory=default_converter)
        register_lsp_features(made, {**DEFAULT_CLIENT_FEATURES,
                                     types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
                                     types.LOG_TRACE: log_trace,
                                     types.CLIENT_REGISTER_CAPABILITY: register})
        return made

    config = ClientServerConfig(server_command=[sys.executable, "-m", "ptlint", "server"],
                                client_factory=factory, server_env=env(tmp_path, test_rules=test_rules,
                                                          pythonpath=pythonpath,
                                                          notebook_fixes=notebook_fixes))
    lsp = await config.start()
    session = Editor(lsp)
    root = folder or tmp_path
    try:
        result = await lsp.initialize_session(types.InitializeParams(
            capabilities=capabilities(client, notebooks=notebooks),
            workspace_folders=[types.WorkspaceFolder(uri(root), root.name)],
            initialization_options=options,
            trace=types.TraceValue.Verbose if trace else None,
        ))
        encoding = result.capabilities.position_encoding or "utf-16"
        session.encoding = getattr(encoding, "value", encoding)
        yield session
        await asyncio.wait_for(lsp.shutdown_session(), WAIT)
    finally:
        server = lsp._server
        if server is not None and server.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                server.kill()  # the test failed: don't wait for a server that may be fine
        await lsp.stop()
