"""Shared machinery of the rules that flag uses of named torch APIs (removed,
deprecated or private symbols): one table of `Symbol`s in, findings out.

Not a rule module: the registry only collects classes that set `code`.
A use is a call (`torch.qr(a)`), any other reference through an attribute
chain (`collate_fn=torch.utils.data._utils.collate.default_collate`) or an
import (`from torch import qr`, `import torch._six`). Uses inside
`except ImportError/ModuleNotFoundError/AttributeError:` handlers, in the body
of a `try` with such a handler (or a bare `except:`, `except Exception:`), and
inside `if` statements that test a version or `hasattr` (compatibility
branches for other torch versions) are deliberate and not reported, and so is
an assignment to the API (`torch.backends.cuda.sdp_kernel = null_context`, a
patch). Calls through a bare
name bound by a `from` import are reported on the import instead, unless only
the call can be fixed. An import whose names the file no longer uses (their
calls fixed to the new API) is removed.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import libcst as cst
from packaging.version import Version

from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule
from ptlint.analysis.walk import descendants
from ptlint.fixers.statements import without_statement

# A call fixer gets the call and `spell` (qualified name -> expression that
# names it in this file, or None) and returns the replacement, or None when
# this call cannot be rewritten without changing what it does.
Spell = Callable[[str], "cst.BaseExpression | None"]
CallFixer = Callable[[cst.Call, Spell], "cst.BaseExpression | None"]


@dataclass(frozen=True)
class Symbol:
    """One API and what to use instead. This is data: rules read it, docs list it."""

    name: str  # fully qualified, e.g. "torch.qr"
    status: str  # "removed", "deprecated" or "private"
    replacement: str | None  # what to use instead, as shown in the message
    since: str | None = None  # torch version that deprecated it (None: long ago)
    removed: str | None = None  # torch version that removed it
    fix: str | CallFixer | None = None  # "rename" to `replacement`, a call fixer, or None
    keeps_behaviour: bool = True  # whether the fix keeps behaviour (safe) or not (unsafe)
    note: str = ""  # one clause on what differs, added to the message

    def status_at(self, version: Version | None) -> str | None:
        """The symbol's status for a target torch version (None: not yet deprecated)."""
        if version is None:
            return self.status
        if self.removed is not None:
            return "removed" if version >= Version(self.removed) else "deprecated"
        if self.since is not None and version < Version(self.since):
            return None
        return self.status


_FALLBACK_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError"})
_ANY_ERROR = frozenset({"Exception", "BaseException"})


def catches(handler: cst.ExceptHandler, names: frozenset[str]) -> bool:
    """Whether `except ...:` names one of `names` (alone or in a tuple)."""
    kind = handler.type
    if kind is None:
        return False
    items = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    return any((dotted(item) or "").rsplit(".", 1)[-1] in names for item in items)


def tries_a_fallback(node: cst.Try) -> bool:
    """`try: <the old API> except ImportError: <the new one>` (or a bare `except:`, or
    `except Exception:`): the old API is tried deliberately, with a way out."""
    return any(handler.type is None or catches(handler, _FALLBACK_ERRORS | _ANY_ERROR)
               for handler in node.handlers)


_VERSION_NAME = re.compile(r"(?i).*version.*|(.*_)?(ver|major|minor)(_.*)?")


def _version_test(test: cst.BaseExpression, hasattr_too: bool) -> bool:
    """`if is_torch_version("<", "2.2"):`, `if torch.__version__ >= ...:`,
    `if torch_ver == "0.3":`, `if TORCH_MAJOR == 0:`, and with `hasattr_too`, `if hasattr(torch, "func"):`:
    a branch for other torch versions."""
    for found in descendants(test):
        if isinstance(found, cst.Name):
            text = found.value
        elif isinstance(found, cst.Attribute):
            text = found.attr.value
        else:
            continue
        if hasattr_too and text == "hasattr" or _VERSION_NAME.fullmatch(text):
            return True
    return False


@functools.lru_cache(maxsize=None)
def _active(rule: type["SymbolRule"], version: Version | None) -> tuple[dict[str, Symbol], frozenset]:
    """The symbols `rule` reports at a target torch version, and their names'
    last parts (worked out once per rule and version, not per file)."""
    active = {n: s for n, s in rule.symbols_at(version).items()
              if s.status_at(version) in rule.statuses}
    return active, frozenset(n.rsplit(".", 1)[-1] for n in active)


def table(symbols: Iterable[Symbol]) -> dict[str, Symbol]:
    out: dict[str, Symbol] = {}
    for symbol in symbols:
        if symbol.name in out:
            raise ValueError(f"duplicate symbol {symbol.name}")
        out[symbol.name] = symbol
    return out


class VersionBranches(Rule):
    """A rule that leaves alone the branches of an `if` that tests the torch
    version (or, with `hasattr_too`, `hasattr`): code kept on purpose for other
    versions."""

    hasattr_too = True  # `if hasattr(torch, "func"):` asks for an API of some versions

    def __init__(self, context) -> None:
        super().__init__(context)
        self.ifs: list[cst.If] = []  # the enclosing `if`s

    def visit_If(self, node: cst.If) -> None:
        self.ifs.append(node)

    def leave_If(self, original_node: cst.If) -> None:
        self.ifs.pop()

    def in_version_branch(self) -> bool:
        """Inside an `if` that tests the version. The `if`s are looked at only
        when a rule asks (the same answer for every rule, kept per file)."""
        shared = self.context.shared
        for node in self.ifs:
            key = ("version test", self.hasattr_too, id(node))
            found = shared.get(key)
            if found is None:
                found = shared[key] = _version_test(node.test, self.hasattr_too)
            if found:
                return True
        return False


class SymbolRule(VersionBranches):
    """Base of the rules driven by a `Symbol` table; subclasses set `symbols`
    and `statuses` and may override `describe`."""

    symbols: dict[str, Symbol] = {}
    statuses: tuple[str, ...] = ()

    @classmethod
    def symbols_at(cls, version: Version | None) -> dict[str, Symbol]:
        """The symbol table for a target torch version."""
        return cls.symbols

    def __init__(self, context) -> None:
        super().__init__(context)
        self.active, self.last_parts = _active(type(self), context.torch_version)
        self.handled: set[int] = set()  # attribute nodes already part of a finding
        self.fallbacks = 0  # depth of `except ImportError:` handlers
        self.module: cst.Module | None = None

    # -- messages ------------------------------------------------------------
    def describe(self, symbol: Symbol) -> str:
        status = symbol.status_at(self.context.torch_version)
        if status == "removed":
            head = f"`{symbol.name}` was removed in torch {symbol.removed}"
        elif symbol.removed is not None:
            head = f"`{symbol.name}` is deprecated and removed in torch {symbol.removed}"
        elif status == "private":
            head = f"`{symbol.name}` is private"
        elif symbol.since is not None:
            head = f"`{symbol.name}` is deprecated since torch {symbol.since}"
        else:
            head = f"`{symbol.name}` is deprecated"
        if symbol.replacement:
            text = symbol.replacement
            head += f"; use {text}" if "`" in text else f"; use `{text}`"
        if symbol.note:
            head += f" ({symbol.note})"
        return head

    def _safety(self, symbol: Symbol) -> Safety:
        return Safety.SAFE if symbol.keeps_behaviour else Safety.UNSAFE

    # -- spelling a qualified name in this file ------------------------------------
    def _speller(self, original: cst.BaseExpression, imports: list[str]) -> Spell:
        """`spell(qualified)`: an expression naming `qualified` here, reusing the
        alias the original reference went through (`T.ger` -> `T.outer`), else
        the full dotted name plus the import it needs."""
        head = original
        while isinstance(head, cst.Attribute):
            head = head.value
        head_text = head.value if isinstance(head, cst.Name) else None
        head_qualified = self.qualified_name(head) if head_text else None

        def spell(qualified: str) -> cst.BaseExpression | None:
            if head_text and head_qualified and qualified.startswith(head_qualified + "."):
                return cst.parse_expression(head_text + qualified[len(head_qualified):])
            top = qualified.split(".", 1)[0]
            bound = self.context.names.lookup(top)
            if bound is None:
                imports.append(f"import {top}")
            elif bound != top:
                return None  # the name is taken by something else here
            return cst.parse_expression(qualified)

        return spell

    # -- detection -------------------------------------------------------------------
    def visit_Try_body(self, node: cst.Try) -> None:
        self.fallbacks += tries_a_fallback(node)

    def leave_Try_body(self, node: cst.Try) -> None:
        self.fallbacks -= tries_a_fallback(node)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if catches(node, _FALLBACK_ERRORS):
            self.fallbacks += 1

    def leave_ExceptHandler(self, original_node: cst.ExceptHandler) -> None:
        if catches(original_node, _FALLBACK_ERRORS):
            self.fallbacks -= 1

    def _deliberate(self) -> bool:
        """Inside a fallback for other torch versions (`except ImportError:`, an
        `if` that tests the version): the old API is used on purpose."""
        return bool(self.fallbacks) or self.in_version_branch()

    def _symbol(self, node: cst.BaseExpression) -> Symbol | None:
        kind = type(node)  # not isinstance: this runs for every call and attribute
        last = node.attr.value if kind is cst.Attribute else (
            node.value if kind is cst.Name else None)
        if last not in self.last_parts or self._deliberate():
            return None
        return self.active.get(self.qualified_name(node) or "")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute and type(func) is not cst.Name:
            return
        symbol = self._symbol(func)
        if symbol is None:
            return
        self._handled(func)
        if isinstance(func, cst.Name) and (symbol.fix is None or self._import_fixable(symbol)):
            return  # the import is reported (and its fix, if any, covers this call)
        imports: list[str] = []
        spell = self._speller(func, imports)
        new: cst.BaseExpression | None = None
        if symbol.fix == "rename" and symbol.replacement:
            callee = spell(symbol.replacement)
            new = node.with_changes(func=callee) if callee is not None else None
        elif callable(symbol.fix):
            new = symbol.fix(node, spell)
        if new is None:
            self.report(node, message=self.describe(symbol))
            return
        fix = dict(message=self.describe(symbol), safety=self._safety(symbol),
                   imports=tuple(dict.fromkeys(imports)))
        if isinstance(new, cst.Call) and len(new.args) == len(node.args) and all(
                a is b for a, b in zip(new.args, node.args)):
            self.report(node, edits=[(func, new.func)], **fix)  # only the callee changes
            return
        new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        self.report(node, replacement=new, **fix)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self.handled:
            return
        symbol = self._symbol(node)
        if symbol is None:
            return
        self._handled(node)
        if symbol.fix == "rename" and symbol.replacement:
            imports: list[str] = []
            new = self._speller(node, imports)(symbol.replacement)
            if new is not None:
                self.report(node, message=self.describe(symbol), replacement=new,
                            safety=self._safety(symbol), imports=tuple(dict.fromkeys(imports)))
                return
        self.report(node, message=self.describe(symbol))

    def visit_DictElement(self, node: cst.DictElement) -> None:
        """`{"uniform": nn.init.uniform, ...}`: a table of functions by their own
        names (to patch and restore them all) lists an API, it does not use it."""
        key, value = node.key, node.value
        if type(key) is not cst.SimpleString or type(value) not in (cst.Attribute, cst.Name):
            return
        name = (value.attr if type(value) is cst.Attribute else value).value
        if name in key.value and key.evaluated_value == name:  # (the cheap test first)
            self._handled(value)

    def visit_Assign(self, node: cst.Assign) -> None:
        """`torch.backends.cuda.sdp_kernel = null_context`: a patch of the API, not a use."""
        for target in node.targets:
            if type(target.target) is cst.Attribute:
                self._handled(target.target)

    def _handled(self, node: cst.BaseExpression) -> None:
        while type(node) is cst.Attribute:
            self.handled.add(id(node))
            node = node.value

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._handled(alias.name)
            if self._deliberate():
                continue
            name = dotted(alias.name)
            symbol = self.active.get(name or "")
            if symbol is not None:
                self.report(alias, message=self.describe(symbol))

    def _import_fixable(self, symbol: Symbol) -> bool:
        """`from a import b` of this symbol can become `from c import b`."""
        return (
            symbol.fix == "rename" and symbol.keeps_behaviour and bool(symbol.replacement)
            and symbol.replacement.rsplit(".", 1)[-1] == symbol.name.rsplit(".", 1)[-1]
        )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        self._handled(node.module)
        module = dotted(node.module)
        if module is None or self._deliberate():
            return
        found: list[tuple[cst.ImportAlias, Symbol]] = []
        for alias in node.names:
            name = dotted(alias.name)
            symbol = self.active.get(f"{module}.{name}") or self.active.get(module)
            if symbol is not None:
                found.append((alias, symbol))
        if not found:
            return
        message = "; ".join(dict.fromkeys(self.describe(s) for _, s in found))
        fix = self._import_fix(node, found)
        if fix is None:
            unused = self._unused_import_fix(node, found)
            self.report(node, message=message, edits=unused or (), safety=Safety.SAFE,
                        fix_title="Remove the unused import" if unused else None)
            return
        edits, imports = fix
        self.report(node, message=message, edits=edits, imports=imports, safety=Safety.SAFE)

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node

    def _unused_import_fix(self, node: cst.ImportFrom, found) -> list | None:
        """Edits that drop the names of `found` from a module-level import when
        the file uses them nowhere else (their calls were fixed to the new API,
        `torch.nn.utils.clip_grad_norm_(...)`, and the old name is left behind),
        else None. Not in a package's `__init__.py`, which may re-export them;
        a name also written in a string (`__all__`) or a comment counts as used."""
        if os.path.basename(self.context.path) == "__init__.py":
            return None
        for alias, _ in found:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if not isinstance(bound, cst.Name) or len(re.findall(
                    rf"(?<![\w.]){re.escape(bound.value)}\b", self.context.source)) != 1:
                return None
        line = next((s for s in self.module.body if isinstance(s, cst.SimpleStatementLine)
                     and any(small is node for small in s.body)), None)
        if line is None:
            return None
        kept = [a for a in node.names if all(a is not alias for alias, _ in found)]
        if kept:
            if kept[-1] is not node.names[-1]:  # the new last name takes the old last one's comma
                kept[-1] = kept[-1].with_changes(comma=node.names[-1].comma)
            return [(node, node.with_changes(names=kept))]
        if len(line.body) != 1:
            return None
        return [(self.module, without_statement(self.module, line))]

    def _import_fix(self, node: cst.ImportFrom, found):
        if not all(self._import_fixable(s) for _, s in found):
            return None
        modules = {s.replacement.rsplit(".", 1)[0] for _, s in found}
        if len(found) == len(node.names) and len(modules) == 1:
            new = node.with_changes(module=cst.parse_expression(modules.pop()))
            return [(node, new)], ()
        if any(alias.asname is not None for alias, _ in found):
            return None
        kept = [a for a in node.names if all(a is not alias for alias, _ in found)]
        if kept[-1] is not node.names[-1]:  # the new last name takes the old last one's comma
            kept[-1] = kept[-1].with_changes(comma=node.names[-1].comma)
        imports = tuple(f"from {s.replacement.rsplit('.', 1)[0]} import "
                        f"{s.replacement.rsplit('.', 1)[1]}" for _, s in found)
        return [(node, node.with_changes(names=kept))], imports
