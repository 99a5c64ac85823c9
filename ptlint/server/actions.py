"""Code actions, their resolution, hover and the documentation command.

Actions are offered for the findings under the cursor: the rule's fix (safe
fixes preferred, unsafe ones labelled and never preferred), "Suppress PTLxxx on
this line", "Show documentation for PTLxxx", and for the whole file "Fix all"
(`source.fixAll.ptlint`). An action's edit is computed when the client resolves
it, if the client can (`codeAction/resolve`): a fix re-parses the file, too slow
to do for every action every time the cursor moves. Every edit is checked to
give text that compiles; an action whose edit would not is not offered.
"""
from __future__ import annotations

from typing import Any

from lsprotocol import types

from ptlint.model import Safety
from ptlint.server import docs, edits
from ptlint.server.lint import Linted
from ptlint.server.server import FIX_ALL, SHOW_DOCS, PtlintServer, fix_title, wanted


def _resolvable(ls: PtlintServer) -> bool:
    properties = ls.capability("text_document.code_action.resolve_support.properties") or []
    return "edit" in properties


def _fix_all_title(linted: Linted) -> str:
    if linted.settings is not None and linted.settings.unsafe_fixes:
        return "Fix all findings in file (unsafe fixes included)"
    return "Fix all safe findings in file"


def _has_fix_for_all(linted: Linted) -> bool:
    settings = linted.settings
    return settings is not None and any(
        item.finding.fix is not None and item.source is not None and settings.fix_allowed(
            item.finding.code, item.finding.fix.safety, unsafe=bool(settings.unsafe_fixes))
        for item in linted.items)


async def code_action(ls: PtlintServer, params: types.CodeActionParams
                      ) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    linted = await ls.current(ls.store.target(uri))
    if linted is None or linted.settings is None:
        return None
    only = params.context.only
    lazy = _resolvable(ls)
    actions: list[types.CodeAction] = []

    async def add(title: str, kind: str, data: dict[str, Any], compute, *,
                  diagnostics: list[types.Diagnostic] | None = None, preferred: bool = False) -> None:
        action = types.CodeAction(title=title, kind=kind, diagnostics=diagnostics,
                                  is_preferred=preferred or None,
                                  data={"target": linted.snapshot.uri,
                                        "generation": linted.generation, **data})
        if not lazy:
            texts = await ls.in_worker(compute)
            if texts is None:
                return
            action.edit = ls.workspace_edit(linted, texts)
        actions.append(action)

    if wanted(only, types.CodeActionKind.QuickFix):
        documented: set[str] = set()
        for index, item in ls.items_at(linted, uri, params.range):
            code = item.finding.code
            diagnostic = [ls.diagnostic(item)]
            if edits.fixable(linted, item):
                safe = item.finding.fix.safety is Safety.SAFE  # type: ignore[union-attr]
                await add(fix_title(item), types.CodeActionKind.QuickFix,
                          {"action": "fix", "index": index},
                          lambda item=item: edits.fixed(linted, item),
                          diagnostics=diagnostic, preferred=safe)
            noqa = edits.suppressed(linted, item)  # cheap: computed now, offered if it works
            if noqa is not None:
                actions.append(types.CodeAction(
                    title=f"Suppress {code} on this line", kind=types.CodeActionKind.QuickFix,
                    diagnostics=diagnostic, edit=ls.workspace_edit(linted, noqa)))
            if code not in documented and docs.rule(code) is not None:
                documented.add(code)
                title = f"Show documentation for {code}"
                actions.append(types.CodeAction(
                    title=title, kind=types.CodeActionKind.QuickFix, diagnostics=diagnostic,
                    command=types.Command(title=title, command=SHOW_DOCS, arguments=[code])))
    if wanted(only, FIX_ALL) and _has_fix_for_all(linted):
        await add(_fix_all_title(linted), FIX_ALL, {"action": "fixAll"},
                  lambda: edits.fixed_all(linted))
    return actions


async def resolve(ls: PtlintServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    target = data.get("target")
    linted = await ls.current(target if isinstance(target, str) else None)
    if linted is None or linted.generation != data.get("generation"):
        return action  # the document changed since: nothing to apply
    if data.get("action") == "fixAll":
        texts = await ls.in_worker(edits.fixed_all, linted)
    elif data.get("action") == "fix" and isinstance(data.get("index"), int) \
            and 0 <= data["index"] < len(linted.items):
        texts = await ls.in_worker(edits.fixed, linted, linted.items[data["index"]])
    else:
        return action
    if texts is not None:
        action.edit = ls.workspace_edit(linted, texts)
    return action


async def hover(ls: PtlintServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    linted = await ls.current(ls.store.target(uri))
    if linted is None:
        return None
    found = ls.items_at(linted, uri, types.Range(params.position, params.position))
    if not found:
        return None
    parts, seen = [], set()
    for _, item in found:
        f = item.finding
        if (f.code, f.message) not in seen:
            seen.add((f.code, f.message))
            parts.append(docs.hover(f.code, f.name, f.message))
    first = found[0][1].finding
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                     value="\n\n---\n\n".join(parts)),
        range=ls.lines(uri).range(first.span.start, first.span.end),
    )


async def show_documentation(ls: PtlintServer, *arguments: Any) -> str | None:
    """Opens the rule's documentation in the editor (where the client can show a
    document) and returns it as markdown."""
    code = str(arguments[0]).upper() if arguments else ""
    text = docs.markdown(code)
    if text is None:
        ls.tell(f"no rule {code!r}", types.MessageType.Error, once=False)
        return None
    uri = docs.doc_uri(code)
    if uri is not None and ls.capability("window.show_document.support"):
        await ls.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=True))
    return text
