"""What PTL301 and PTL331 share about `torch.save`/`torch.load`: an object copied
through memory is neither a checkpoint nor a file from outside."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.names import dotted
from ptlint.analysis.walk import children
from ptlint.fixers.arguments import argument, keyword
from ptlint.rule import Rule

SAVES = frozenset({"torch.save", "torch.serialization.save"})
LOADS = frozenset({"torch.load", "torch.serialization.load"})


def copies_through_memory(rule: Rule, call: cst.Call, module: cst.Module) -> bool:
    """Whether `call` (a save or a load) is part of a round trip through memory: a
    def (or the module's own code) binds a name to an empty `io.BytesIO()`, saves
    into it and loads from it without `weights_only=True`, as a deep copy does
    (opacus' `clone_module`: `torch.save(module, buf); buf.seek(0);
    copy = torch.load(buf, weights_only=False)`).
    Worked out once per file, for every rule that asks."""
    found = rule.context.shared.get("round trips")
    if found is None:
        found = rule.context.shared["round trips"] = set()
        scopes = [module]
        while scopes:
            scope = scopes.pop()
            found |= _round_trips(scope, rule.qualified_name, scopes)
    return id(call) in found


def _round_trips(scope: cst.CSTNode, qualified, nested: list) -> set[int]:
    """The round-trip calls of `scope`'s own code; its nested defs go to `nested`."""
    buffers: set[str] = set()
    calls: dict[str, dict[str, list[int]]] = {"save": {}, "load": {}}
    pending = list(children(scope))
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is cst.FunctionDef:
            nested.append(node)
            continue
        pending.extend(children(node))
        if kind is cst.Assign and len(node.targets) == 1 and type(
                node.targets[0].target) is cst.Name and _empty_buffer(node.value, qualified):
            buffers.add(node.targets[0].target.value)
        elif kind is cst.WithItem and node.asname is not None and type(
                node.asname.name) is cst.Name and _empty_buffer(node.item, qualified):
            buffers.add(node.asname.name.value)
        elif kind is cst.Call and type(node.func) in (cst.Name, cst.Attribute):
            name = _name(node.func, qualified)
            how = "save" if name in SAVES else "load" if name in LOADS else None
            file = argument(node, "f", 1 if how == "save" else 0) if how else None
            safe = keyword(node, "weights_only") if how == "load" else None
            if safe is not None and type(safe.value) is cst.Name and safe.value.value == "True":
                continue  # it would refuse a whole object: no copy
            if file is not None and type(file.value) is cst.Name:
                calls[how].setdefault(file.value.value, []).append(id(node))
    return {call for name in buffers if name in calls["save"] and name in calls["load"]
            for how in ("save", "load") for call in calls[how][name]}


def _empty_buffer(value: cst.BaseExpression, qualified) -> bool:
    """`io.BytesIO()` with nothing in it: whatever it holds, the code wrote."""
    return type(value) is cst.Call and not value.args and _name(value.func, qualified) in (
        "io.BytesIO", "BytesIO")


def _name(node: cst.BaseExpression, qualified) -> str | None:
    """What `node` refers to; as written when it does not resolve where the walk
    is (the file is worked out at its first save or load: an `import io` inside
    another function is not seen from there)."""
    return qualified(node) or dotted(node)
