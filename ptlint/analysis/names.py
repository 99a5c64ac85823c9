"""Light, single-pass name resolution for rules.

Full scope analysis (LibCST's ``ScopeProvider``/``QualifiedNameProvider``)
costs several times the parse. Rules only need to know what an imported name
refers to (``import torch as T``, ``from torch.nn import DataParallel as DP``,
``nn = torch.nn``) and whether a local binding shadows it, so this resolver
tracks scopes and bindings during the same batched traversal the rules use.
It runs as the first visitor on entry and the last on exit, so every rule sees
the scope of the node it is looking at.
"""
from __future__ import annotations

import builtins
from typing import Iterator

import libcst as cst

from ptlint.analysis.walk import Visitor

_BUILTINS = frozenset(dir(builtins))
_LOCAL = ""  # a binding that is not an import: shadows whatever was imported


class Scope:
    """The bindings of one function, class, comprehension or the module; kept
    after the walk (with its parent) so that names can be resolved later."""

    __slots__ = ("bindings", "is_class", "parent", "references")

    def __init__(self, parent: "Scope | None" = None, is_class: bool = False) -> None:
        self.bindings: dict[str, str] = {}
        self.is_class = is_class
        self.parent = parent
        # names assigned a name or attribute (`ac = suppress`): what that meant ("": unknown)
        self.references: dict[str, str | None] = {}  # (None: bound to two things)


def dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as text, or None when the chain holds anything but names."""
    # `type(x) is` rather than `isinstance`: node classes are ABCs, and a
    # failed isinstance check against one is slow (this runs for most nodes).
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def is_named(node: cst.CSTNode | None, *names: str) -> bool:
    """Whether `node` is a bare name, one of `names`."""
    return type(node) is cst.Name and node.value in names


def parameter_names(params: cst.Parameters) -> Iterator[str]:
    """The names a function's (or a lambda's) parameters bind, `*args` and
    `**kwargs` included."""
    for param in (*params.posonly_params, *params.params, *params.kwonly_params,
                  params.star_arg, params.star_kwarg):
        if isinstance(param, cst.Param):
            yield param.name.value


def target_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            yield from target_names(el.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def _import_module(node: cst.ImportFrom) -> str | None:
    if node.relative or node.module is None:
        return None
    return dotted(node.module)


def _imported(node: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, str]]:
    """(the name bound, what it means) for each name an import binds (`_LOCAL`
    for a relative import's); nothing for `from x import *`."""
    if type(node) is cst.Import:
        for alias in node.names:
            full = dotted(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                head = full.split(".", 1)[0]
                yield head, head
        return
    if isinstance(node.names, cst.ImportStar):
        return
    module = _import_module(node)
    for alias in node.names:
        name = dotted(alias.name)
        if name is None:
            continue
        local = name
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        yield local, f"{module}.{name}" if module else _LOCAL


def _is_marimo_cell(node: cst.FunctionDef) -> bool:
    """`@app.cell` or `@app.cell(...)`: a cell of a marimo notebook."""
    for decorator in node.decorators:
        func = decorator.decorator
        func = func.func if type(func) is cst.Call else func
        if type(func) is cst.Attribute and func.attr.value == "cell":
            return True
    return False


def marimo_imports(module: cst.Module) -> dict[str, str]:
    """In a marimo notebook (a `.py` file that imports marimo, each cell a
    function decorated with `@app.cell`): the modules its cells import, by the
    name each binds. A cell gets the names other cells define as parameters,
    so a parameter `torch` is the module some cell imported."""
    def imports_marimo(statement: cst.CSTNode) -> bool:
        return type(statement) is cst.SimpleStatementLine and any(
            type(small) is cst.Import and any(dotted(a.name) == "marimo" for a in small.names)
            for small in statement.body)

    if not any(imports_marimo(statement) for statement in module.body):
        return {}
    found: dict[str, str] = {}
    for cell in module.body:
        if type(cell) is not cst.FunctionDef or not _is_marimo_cell(cell):
            continue
        for statement in getattr(cell.body, "body", ()):
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) in (cst.Import, cst.ImportFrom):
                        found.update((k, v) for k, v in _imported(small) if v != _LOCAL)
    return found


class NameResolver(Visitor):
    """Scope stack plus the visit/leave hooks that maintain it."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[Scope] = [Scope()]
        self.cell_imports: dict[str, str] = {}  # a marimo notebook's (see marimo_imports)
        self.excepting = 0  # `except` blocks the walk is in

    # -- queries -------------------------------------------------------
    def lookup(self, name: str, scope: Scope | None = None) -> str | None:
        """What `name` means in `scope` (by default where the walk is now).
        After the walk a scope holds all its bindings, so a name rebound after
        the node asked about resolves to its last binding there."""
        innermost = current = scope or self.scopes[-1]
        while current is not None:
            if not current.is_class or current is innermost:  # class bodies are not
                found = current.bindings.get(name)       # visible from nested functions
                if found is not None:
                    return found or None
            current = current.parent
        if name in _BUILTINS:
            return f"builtins.{name}"
        return None

    def qualified_name(self, node: cst.CSTNode, scope: Scope | None = None) -> str | None:
        """The fully qualified name `node` refers to, or None; in `scope` when
        given (see `lookup`), else where the walk is now.

        Never looks through calls: `torch.nn.Linear(3, 3).cuda` has none.
        """
        if type(node) is cst.Call:
            node = node.func
        parts = []
        while type(node) is cst.Attribute:  # see `dotted`
            parts.append(node.attr.value)
            node = node.value
        if type(node) is not cst.Name:
            return None
        base = self.lookup(node.value, scope)
        if base is None:
            return None
        parts.append(base)
        return ".".join(reversed(parts))

    # -- bindings ------------------------------------------------------
    def bind(self, name: str, qualified: str = _LOCAL, *, fallback: bool = False) -> None:
        """A top-level binding replaces an import of the same name (`import model`,
        then `model = model.RNNModel()`), unless it is a fallback for the import
        (`except ImportError: torch = None`, or a class or function defined in
        an `except` block; `fallback`: the value is `None`)."""
        bindings = self.scopes[-1].bindings
        if (qualified == _LOCAL and (fallback or self.excepting) and bindings.get(name)
                and len(self.scopes) == 1):
            return
        bindings[name] = qualified

    def _push(self, is_class: bool = False) -> None:
        self.scopes.append(Scope(self.scopes[-1], is_class))

    def _bind_params(self, params: cst.Parameters) -> None:
        for name in parameter_names(params):
            self.bind(name)

    # -- entry hooks (run before every rule) ---------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.cell_imports = marimo_imports(node)

    def visit_Import(self, node: cst.Import) -> None:
        for name, qualified in _imported(node):
            self.bind(name, qualified)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            # `from utils import *` brings what utils imported: a module-level
            # `torch` the file does not bind itself is the torch module
            if len(self.scopes) == 1 and "torch" not in self.scopes[0].bindings:
                self.bind("torch", "torch")
            return
        for name, qualified in _imported(node):
            self.bind(name, qualified)

    def visit_Assign(self, node: cst.Assign) -> None:
        alias = None
        if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            # `nn = torch.nn` / `F = torch.nn.functional`: a module alias
            if type(node.value) in (cst.Name, cst.Attribute):
                alias = self.qualified_name(node.value)
        fallback = type(node.value) is cst.Name and node.value.value == "None"
        if fallback:
            alias = None  # `x = None` names no module
        references = self.scopes[-1].references
        for target in node.targets:
            for name in target_names(target.target):
                known = alias
                if type(node.value) in (cst.Name, cst.Attribute) and not fallback:
                    # assigned something else before (`ac = suppress`, then `if amp: ac =
                    # torch.cuda.amp.autocast`): which one a use sees is not known, unless
                    # both live in one module (`dtype = torch.float16` or `torch.bfloat16`)
                    earlier = references.setdefault(name, alias or "")
                    if earlier != (alias or "") and (
                            not earlier or not alias
                            or earlier.rpartition(".")[0] != alias.rpartition(".")[0]):
                        known = references[name] = None
                self.bind(name, known or _LOCAL, fallback=fallback)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            for name in target_names(node.target):
                self.bind(name)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        for name in target_names(node.target):
            self.bind(name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        for name in target_names(node.target):
            self.bind(name)

    def visit_For(self, node: cst.For) -> None:
        for name in target_names(node.target):
            self.bind(name)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            for name in target_names(node.asname.name):
                self.bind(name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self.excepting += 1
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self.bind(node.name.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.bind(node.name.value)
        self._push()
        self._bind_params(node.params)
        if self.cell_imports and len(self.scopes) == 2 and _is_marimo_cell(node):
            for param in node.params.params:  # what the other cells imported
                qualified = self.cell_imports.get(param.name.value)
                if qualified is not None:
                    self.bind(param.name.value, qualified)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push()
        self._bind_params(node.params)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.bind(node.name.value)
        self._push(is_class=True)

    # one method each, not aliases of one helper: LibCST's `get_visitors` keeps
    # a method only when its `__name__` starts with `visit_`/`leave_`
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._push()

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._push()

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._push()

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._push()

    def visit_CompFor(self, node: cst.CompFor) -> None:
        for name in target_names(node.target):
            self.bind(name)


class ScopeExit(Visitor):
    """The leave hooks of the resolver; the engine runs them after every rule."""

    def __init__(self, resolver: NameResolver) -> None:
        super().__init__()
        self.resolver = resolver

    def _pop(self, node: cst.CSTNode) -> None:
        self.resolver.scopes.pop()

    # named methods, not aliases of `_pop`: LibCST's `get_visitors` drops a
    # method whose `__name__` does not start with `leave_`
    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self.resolver.excepting -= 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._pop(node)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._pop(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._pop(node)

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self._pop(node)

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self._pop(node)

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self._pop(node)

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._pop(node)
