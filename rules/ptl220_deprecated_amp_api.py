"""PTL220 deprecated-amp-api."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import libcst as cst

from ptlint.fixers.arguments import (
    positionals_as_keywords,
    prepend_argument,
    with_keyword,
)
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule
from ptlint.rules._symbols import tries_a_fallback
from ptlint.analysis.walk import descendants

# deprecated qualified name -> (member of torch.amp, device type)
_TARGETS: dict[str, tuple[str, str]] = {}
for _device in ("cuda", "cpu"):
    for _member, _home in (("autocast", "autocast_mode"), ("GradScaler", "grad_scaler")):
        _TARGETS[f"torch.{_device}.amp.{_member}"] = (_member, _device)
        _TARGETS[f"torch.{_device}.amp.{_home}.{_member}"] = (_member, _device)
for _member in ("custom_fwd", "custom_bwd"):
    _TARGETS[f"torch.cuda.amp.{_member}"] = (_member, "cuda")
    _TARGETS[f"torch.cuda.amp.autocast_mode.{_member}"] = (_member, "cuda")

_DEPRECATED_MODULES = {"torch.cuda.amp": "cuda", "torch.cpu.amp": "cpu"}
# names that `from torch.cuda.amp import ...` may bring and `torch.amp` also has
_MEMBERS = {"cuda": {"autocast", "GradScaler", "custom_fwd", "custom_bwd"},
            "cpu": {"autocast", "GradScaler"}}
# torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)
_AUTOCAST_POSITIONALS = ("enabled", "dtype", "cache_enabled")
# text that shows a file also uses the new API (then version-compat branches are possible)
_NEW_API_TEXT = ("torch.amp", "torch.autocast", "import amp", "import autocast")


@dataclass
class _Use:
    node: cst.CSTNode  # the call, or a bare decorator expression
    member: str
    device: str
    shown: str  # the deprecated name as written, for the message
    new: cst.CSTNode | None  # the rewritten use with its func unchanged; None: no exact mapping
    local: str | None = None  # the imported name the use goes through, if any
    direct: cst.CSTNode | None = None  # `torch.amp...` rewrite that needs no import change
    fallback: cst.CSTNode | None = None  # `torch.amp...` rewrite that needs `import torch`


@dataclass
class _Binding:
    statement: cst.Import | cst.ImportFrom
    alias: cst.ImportAlias
    target: str  # what the local name refers to
    tried: bool = False  # in the body of a `try` that falls back when the import fails


def _chain(node: cst.BaseExpression) -> list[cst.Name] | None:
    """The names of `a.b.c`, root first; None when the chain holds anything else."""
    names = []
    while isinstance(node, cst.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    names.append(node)
    return names[::-1]


def _dotted(names: list[str]) -> cst.BaseExpression:
    return cst.parse_expression(".".join(names))


class DeprecatedAmpApi(Rule):
    """
    ## What it does
    Flags the device-specific AMP API: `torch.cuda.amp.autocast(...)`,
    `torch.cuda.amp.GradScaler(...)`, `torch.cuda.amp.custom_fwd`/`custom_bwd`,
    `torch.cpu.amp.autocast(...)` and `torch.cpu.amp.GradScaler(...)`, however
    they are imported (`from torch.cuda.amp import autocast`, `from torch.cuda
    import amp`).

    ## Why is this bad?
    Since PyTorch 2.4 these are deprecated aliases: every call emits a
    `FutureWarning` and the device-generic `torch.amp` forms replace them:
    `torch.amp.autocast("cuda", ...)`, `torch.amp.GradScaler("cuda", ...)` and
    `torch.amp.custom_fwd(device_type="cuda")`.

    Branches that already offer the `torch.amp` form as a fallback for older
    torch (`torch.amp.GradScaler("cuda") if new_torch else
    torch.cuda.amp.GradScaler()`, a `try`/`except` around it) are not flagged,
    nor are names imported in the body of a `try` whose handler catches
    `ImportError` (or `AttributeError`, any exception, a bare `except:`): `try:
    from torch.cuda.amp import autocast` then `except ImportError: amp = False`
    is written for torch versions without `torch.amp.GradScaler` (before 2.3),
    which the rewritten import would silently turn off.

    ## Example
    ```python
    import torch

    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        pass
    ```

    Use instead:
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        pass
    ```

    ## Fix safety
    Safe. The old classes are thin subclasses that pass their arguments on to
    `torch.amp` with the device type filled in, and the fix makes the same call:
    the device type is added as the first argument, positional arguments of
    `autocast` (`enabled`, `dtype`, `cache_enabled`, in that order) become
    keywords because `torch.amp.autocast` orders them differently, and
    `custom_fwd`/`custom_bwd` get `device_type="cuda"`. A name imported from
    `torch.cuda.amp` is re-imported from `torch.amp` only when every use of
    it in the file is rewritten; otherwise each call is spelled
    `torch.amp.<name>(...)` and the import is left alone. Calls whose
    arguments cannot be mapped exactly (`*args`) are reported without a fix.
    One difference remains: when no `dtype` is passed, `torch.amp.autocast`
    uses the process-wide default (`torch.get_autocast_dtype`), which is
    float16 on CUDA and bfloat16 on CPU, the same as the old defaults, unless
    the program changes it with `torch.set_autocast_dtype`.

    ## References
    - [Automatic Mixed Precision package](https://pytorch.org/docs/stable/amp.html)
    - [torch.cuda.amp deprecation (PyTorch 2.4 release notes)](https://github.com/pytorch/pytorch/releases/tag/v2.4.0)
    """

    code = "PTL220"
    message = "`{shown}` is deprecated since torch 2.4: use `{new}`"
    fix_title = "Use `torch.amp` with the device type"
    fix_safety = Safety.SAFE
    torch_versions = ">=2.4"
    requires_text = ("cuda.amp", "cpu.amp", "torch.cuda import amp", "torch.cpu import amp",
                     "custom_fwd", "custom_bwd")

    def __init__(self, context) -> None:
        super().__init__(context)
        self.counts: Counter[str] = Counter()  # occurrences of each identifier as a name
        self.not_references: set[int] = set()  # ids of attribute and keyword names
        self.bindings: dict[str, list[_Binding]] = defaultdict(list)
        self.imported: dict[str, set[str]] = defaultdict(set)  # local name -> every import target
        self.uses: list[_Use] = []
        self.compat: set[int] = set()  # ids of calls and decorators in version-compat branches
        self.check_compat = any(t in context.source for t in _NEW_API_TEXT)
        self.tries = 0  # depth of `try` bodies whose handlers fall back when an import fails
        self.use_ids: set[int] = set()
        self.open_uses = 0  # deprecated calls being visited (their arguments are inside)
        self.nested = False

    # -- what names occur ----------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.not_references.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.not_references.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.not_references:
            self.counts[node.value] += 1

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
                self._bind(local, node, alias, self.context.names.lookup(local))
            else:  # `import torch.cuda.amp` binds `torch`
                names = _chain(alias.name)
                if names:
                    self.imported[names[0].value].add(names[0].value)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name
            self._bind(local, node, alias, self.context.names.lookup(local))

    def _bind(self, local: str, statement, alias: cst.ImportAlias, target: str | None) -> None:
        self.imported[local].add(target or "")
        self.bindings[local].append(_Binding(statement, alias, target or "", self.tries > 0))

    def visit_Try_body(self, node: cst.Try) -> None:
        self.tries += tries_a_fallback(node)

    def leave_Try_body(self, node: cst.Try) -> None:
        self.tries -= tries_a_fallback(node)

    # -- version-compat branches -----------------------------------------------------
    def _offers_new_api(self, node: cst.CSTNode | None) -> bool:
        if node is None:
            return False
        for found in descendants(node):
            if not isinstance(found, (cst.Attribute, cst.Name, cst.ImportFrom)):
                continue
            if isinstance(found, cst.ImportFrom):
                module = dotted(found.module) if found.module is not None else None
                if module == "torch.amp" or module == "torch" and not isinstance(
                        found.names, cst.ImportStar) and any(
                        a.evaluated_name in ("amp", "autocast") for a in found.names):
                    return True
                continue
            qualified = self.qualified_name(found) or ""
            if qualified.startswith("torch.amp") or qualified.startswith("torch.autocast"):
                return True
        return False

    def _mark_compat(self, node: cst.CSTNode | None) -> None:
        if node is not None:
            self.compat.update(id(n) for n in descendants(node)
                               if isinstance(n, (cst.Call, cst.Decorator)))

    def visit_If(self, node: cst.If) -> None:
        if self.check_compat:
            if self._offers_new_api(node.body) or self._offers_new_api(node.test):
                self._mark_compat(node.orelse)
            if self._offers_new_api(node.orelse):
                self._mark_compat(node.body)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self.check_compat:
            if self._offers_new_api(node.body) or self._offers_new_api(node.test):
                self._mark_compat(node.orelse)
            if self._offers_new_api(node.orelse):
                self._mark_compat(node.body)

    def visit_Try(self, node: cst.Try) -> None:
        if self.check_compat and self._offers_new_api(node.body):
            for handler in node.handlers:
                self._mark_compat(handler)

    # -- uses ----------------------------------------------------------------------------
    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if isinstance(expr, (cst.Name, cst.Attribute)) and id(node) not in self.compat:
            target = _TARGETS.get(self.qualified_name(expr) or "")
            if target is not None and target[0] in ("custom_fwd", "custom_bwd"):
                new = cst.Call(func=expr, args=[cst.Arg(
                    value=cst.SimpleString('"cuda"'), keyword=cst.Name("device_type"),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                          whitespace_after=cst.SimpleWhitespace("")))])
                self._use(expr, expr, new, *target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, (cst.Name, cst.Attribute)) or id(node) in self.compat:
            return
        target = _TARGETS.get(self.qualified_name(func) or "")
        if target is None:
            return
        if self.open_uses:
            self.nested = True  # a deprecated call inside another's arguments: edits would overlap
        self.open_uses += 1
        self.use_ids.add(id(node))
        member, device = target
        new: cst.Call | None
        if member == "autocast":  # its positionals are ordered differently in torch.amp
            new = None if any(a.star == "*" for a in node.args) else \
                positionals_as_keywords(node, _AUTOCAST_POSITIONALS)
            if new is not None:
                new = prepend_argument(new, f'"{device}"')
        elif member == "GradScaler":  # the device comes first, then the same positionals
            new = prepend_argument(node, f'"{device}"')
        else:  # custom_fwd / custom_bwd
            new = with_keyword(node, "device_type", '"cuda"')
        self._use(node, func, new, member, device)

    def leave_Call(self, node: cst.Call) -> None:
        if id(node) in self.use_ids:
            self.open_uses -= 1

    def _use(self, node, func, new, member: str, device: str) -> None:
        names = _chain(func)
        use = _Use(node=node, member=member, device=device, new=new,
                   shown=".".join(n.value for n in names) if names else member)
        root = names[0] if names else None
        root_target = self.context.names.lookup(root.value) if root else None
        values = [n.value for n in names] if names else []
        if new is not None and names:
            if root_target == "torch" and values[1:3] == [device, "amp"]:
                # torch.cuda.amp[.autocast_mode].autocast -> torch.amp.autocast, alias kept
                use.direct = _replace_func(new, _dotted([values[0], "amp", member]))
            else:
                if len(values) == 1 or (len(values) == 2 and root_target in _DEPRECATED_MODULES):
                    use.local = root.value
                if not self._torch_shadowed():
                    use.fallback = _replace_func(new, _dotted(["torch", "amp", member]))
        self.uses.append(use)

    def _torch_shadowed(self) -> bool:
        target = self.context.names.lookup("torch")
        if target == "torch":
            return False
        return target is not None or any(
            "torch" in scope.bindings for scope in self.context.names.scopes)

    # -- decide and report -------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        by_local: dict[str, list[_Use]] = defaultdict(list)
        for use in self.uses:
            if use.local is not None:
                by_local[use.local].append(use)
        grouped = self._groups(by_local)
        group_edits: list[tuple[cst.CSTNode, cst.CSTNode]] = []
        for local in grouped:
            for binding in self.bindings[local]:
                edit = _rewritten_import(binding)
                if edit is not None and all(old is not edit[0] for old, _ in group_edits):
                    group_edits.append(edit)
            group_edits.extend((u.node, u.new) for u in by_local[local])
        for use in self.uses:
            ambiguous = use.local is not None and len(self.imported[use.local]) > 1
            if ambiguous:
                continue  # imported from more than one place: which one runs is unknown
            if use.local is not None and any(b.tried for b in self.bindings[use.local]):
                continue  # imported for torch versions that may lack `torch.amp`'s form
            new_form = (f'torch.amp.{use.member}("{use.device}", ...)' if use.member in
                        ("autocast", "GradScaler") else
                        f'torch.amp.{use.member}(device_type="{use.device}")')
            message = self.message.format(shown=use.shown, new=new_form)
            if self.nested:
                self.report(use.node, message=message)
            elif use.local in grouped:
                self.report(use.node, message=message, edits=group_edits)
            elif use.direct is not None:
                self.report(use.node, message=message, replacement=use.direct)
            elif use.fallback is not None:
                self.report(use.node, message=message, replacement=use.fallback,
                            imports=("import torch",))
            else:
                self.report(use.node, message=message)

    def _groups(self, by_local: dict[str, list[_Use]]) -> set[str]:
        """The imported names whose imports can move to `torch.amp`: every occurrence of
        the name is either such an import or a use with an exact rewrite, and every
        other name those import statements bring moves with them."""
        candidates = set()
        for local, bindings in self.bindings.items():
            uses = by_local.get(local, [])
            if (bindings and len(self.imported[local]) == 1
                    and all(u.new is not None for u in uses)
                    and all(_rewritten_import(b) is not None for b in bindings)
                    and self.counts[local] == len(bindings) + len(uses)):
                candidates.add(local)
        changed = True
        while changed:  # a statement moves only if all of its names can move
            changed = False
            for local in list(candidates):
                for binding in self.bindings[local]:
                    others = _statement_locals(binding.statement)
                    if not others <= candidates:
                        candidates.discard(local)
                        changed = True
                        break
        return candidates


def _replace_func(new: cst.Call, func: cst.BaseExpression) -> cst.Call:
    return new.with_changes(func=func)


def _statement_locals(statement: cst.Import | cst.ImportFrom) -> set[str]:
    """The names that move with `statement` when its module is rewritten."""
    if isinstance(statement, cst.ImportFrom) and not isinstance(statement.names, cst.ImportStar):
        return {a.evaluated_alias or a.evaluated_name for a in statement.names}
    return set()  # `import a.b as c`: each alias is rewritten on its own


def _rewritten_import(binding: _Binding) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """The edit that makes `binding`'s import bring the same name from `torch.amp`."""
    statement, alias, target = binding.statement, binding.alias, binding.target
    if isinstance(statement, cst.ImportFrom):
        module = ".".join(n.value for n in (_chain(statement.module) or [])) \
            if statement.module is not None and not statement.relative else ""
        if module in _DEPRECATED_MODULES and alias.evaluated_name in _MEMBERS[
                _DEPRECATED_MODULES[module]]:
            return statement, statement.with_changes(module=_dotted(["torch", "amp"]))
        if module in ("torch.cuda", "torch.cpu") and alias.evaluated_name == "amp":
            if len(statement.names) == 1:  # `from torch.cuda import amp` -> `from torch import amp`
                return statement, statement.with_changes(module=cst.Name("torch"))
        return None
    if target in _DEPRECATED_MODULES:  # `import torch.cuda.amp as amp` -> `import torch.amp as amp`
        return alias, alias.with_changes(name=_dotted(["torch", "amp"]))
    return None
