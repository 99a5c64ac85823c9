"""`ptlint server`: a Language Server Protocol server over stdio, so that findings
show in the editor as the user types and are fixed with one action.

- `documents`: the open files, notebooks and cells, and LSP positions;
- `lint`: one file or notebook linted with its nearest configuration (in the
  lint thread);
- `edits`: what each code action does to the text, checked to compile;
- `docs`: the rules' documentation pages and hover text;
- `server`: the lint schedule, diagnostics and the document handlers;
- `actions`: code actions, hover and the documentation command.

Needs the `server` extra (pygls 2 and lsprotocol); this `__init__` imports
neither, so that `ptlint server` can say so when they are missing.

May import: `ptlint.engine`, `ptlint.config`, `ptlint.config_files`, `ptlint.io`, `ptlint.model`,
`ptlint.rule`, `ptlint.docs`, pygls and lsprotocol. Never the CLI, output or
verify packages.
"""
from __future__ import annotations

import os
import sys

MISSING = ('`ptlint server` needs the language server libraries: pip install pygls '
           'lsprotocol, or install ptlint with its extra: pip install "/path/to/ptlint[server]"')


def create():
    """The server with every handler registered."""
    from lsprotocol import types

    from ptlint.server import actions, server

    ls = server.PtlintServer()
    handlers = {
        types.INITIALIZE: server.initialize,
        types.INITIALIZED: server.initialized,
        types.SHUTDOWN: server.shutdown,
        types.TEXT_DOCUMENT_DID_OPEN: server.did_open,
        types.TEXT_DOCUMENT_DID_CHANGE: server.did_change,
        types.TEXT_DOCUMENT_DID_SAVE: server.did_save,
        types.TEXT_DOCUMENT_DID_CLOSE: server.did_close,
        types.NOTEBOOK_DOCUMENT_DID_OPEN: server.notebook_open,
        types.NOTEBOOK_DOCUMENT_DID_CHANGE: server.notebook_change,
        types.NOTEBOOK_DOCUMENT_DID_SAVE: server.notebook_save,
        types.NOTEBOOK_DOCUMENT_DID_CLOSE: server.notebook_close,
        types.WORKSPACE_DID_CHANGE_WATCHED_FILES: server.watched_files,
        types.TEXT_DOCUMENT_HOVER: actions.hover,
        types.CODE_ACTION_RESOLVE: actions.resolve,
    }
    for method, handler in handlers.items():
        ls.feature(method)(handler)
    ls.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, server.FIX_ALL], resolve_provider=True,
    ))(actions.code_action)
    ls.command(server.SHOW_DOCS)(actions.show_documentation)
    return ls


def main() -> int:
    """Serve over stdin and stdout until the client says exit or goes away."""
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError:
        print(f"error: {MISSING}", file=sys.stderr)
        return 2
    ls = create()
    # The protocol owns stdout: anything else printed (a library's print) goes to stderr.
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    ls.start_io(stdin, stdout)
    code = 0 if ls.shut_down else 1
    ls.executor.shutdown(wait=False, cancel_futures=True)
    sys.stderr.flush()
    # A lint still running in the worker thread would hold the interpreter's exit
    # until it finished: nothing of it is needed any more.
    os._exit(code)
