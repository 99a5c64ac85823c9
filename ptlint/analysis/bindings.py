"""What the names of a file hold, where it is known: the semantic model's
answer to "is `opt` an optimizer, `criterion` a loss function, `meter` an
object of some other class?" (`SemanticModel.holds`).

Every assignment of the file is read once, on the first question: a plain
name by the function that binds it (then the functions around it), an
attribute chain (`self.optimizer`) file-wide. A name holds a kind where all
its bindings agree; parameters and names bound by loops, `with ... as` and
`except ... as` hold what the model does not know.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ptlint.analysis import training as t
from ptlint.analysis.dataflow import bound, last_name, var
from ptlint.analysis.names import parameter_names

if TYPE_CHECKING:
    from ptlint.analysis.semantic import Function


# arithmetic that keeps a loss a loss, and whose result has no fewer elements than a term
SUMS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


class Bindings:
    def __init__(self, functions: list["Function"]) -> None:
        self.classes: dict[str, str] = {}  # classes of the file: MODULE, CONTAINER or INSTANCE
        for f in functions:
            if type(f.node) is cst.ClassDef:
                self.classes[f.name] = t.class_kind(f.node, f.parent.resolve, self.classes)
        self.attributes: dict[str, set] = {}  # `self.x` -> kinds, file-wide
        self.local: dict["Function", dict[str, set]] = {}  # plain names, by function
        self.ever: dict[str, set[str]] = {}  # kind -> every name bound to it somewhere
        self.models: dict[str, str] = {}  # optimizer -> the model whose parameters it takes
        for fn in functions:
            self._read(fn)

    def holds(self, key: str | None, fn: "Function") -> str | None:
        found = self._kinds(key, fn)
        return next(iter(found)) if found is not None and len(found) == 1 else None

    def may_hold(self, key: str | None, fn: "Function", kind: str) -> bool:
        return kind in (self._kinds(key, fn) or ())

    def is_loss_call(self, call: cst.Call, fn: "Function") -> bool:
        """A call of a loss function: `F.cross_entropy(...)`, `nn.MSELoss()(...)`, a
        name bound to an `nn.*Loss` anywhere in the file, or named like one
        (`criterion(...)`, `self.loss_fn(...)`)."""
        return t.value_kind(call, fn.resolve, self.classes) == t.LOSS or self._calls_loss(call)

    def _kinds(self, key: str | None, fn: "Function") -> set | None:
        if key is None or "." in key:
            return self.attributes.get(key)
        for scope in fn.outward():  # a class body's names are not seen from its methods
            if scope is fn or type(scope.node) is not cst.ClassDef:
                found = self.local[scope].get(key)
                if found is not None:
                    return found
        return None

    def _read(self, fn: "Function") -> None:
        local = self.local[fn] = {}
        if type(fn.node) is cst.FunctionDef:
            for name in parameter_names(fn.node.params):
                local[name] = {None}
        for event, node, _ in fn.events:
            if event == "small" and type(node) in (cst.Assign, cst.AnnAssign) and node.value:
                targets = [x.target for x in node.targets] if type(node) is cst.Assign \
                    else [node.target]
                for target in targets:
                    self._bind(local, target, node.value, fn)
            else:  # names bound to what the model does not know
                for target in bound(event, node):
                    self._bind(local, target, None, fn)

    def _bind(self, local: dict, target, value, fn: "Function") -> None:
        if type(target) in (cst.Tuple, cst.List):
            values = value.elements if type(value) in (cst.Tuple, cst.List) and len(
                value.elements) == len(target.elements) else None
            whole = None if value is None or values else self._value(local, value, fn)
            for i, element in enumerate(target.elements):
                if values is not None:
                    self._bind(local, element.value, values[i].value, fn)
                else:  # `cls_loss, loc_loss = criterion(...)`: each one is a loss
                    self._bind_kind(local, element.value, whole if whole == t.LOSS else None)
            return
        kind = None if value is None else self._value(local, value, fn)
        self._bind_kind(local, target, kind)
        if kind == t.OPTIMIZER and type(value) is cst.Call and value.args \
                and type(value.args[0].value) is cst.Call:
            first = value.args[0].value
            if last_name(first.func) == "parameters" and type(first.func) is cst.Attribute:
                self.models[var(target)] = var(first.func.value)

    def _value(self, local: dict, value: cst.BaseExpression, fn: "Function") -> str | None:
        kind = t.value_kind(value, fn.resolve, self.classes)
        if kind is None and type(value) in (cst.Name, cst.Attribute):  # an alias keeps the kind
            found = (self.attributes if "." in (var(value) or ".") else local).get(var(value))
            kind = next(iter(found)) if found and len(found) == 1 else None
        elif kind is None and type(value) is cst.Call and self._calls_loss(value):
            kind = t.LOSS
        elif kind is None and type(value) is cst.BinaryOperation and type(value.operator) in SUMS:
            # `d_loss = d_loss_real + d_loss_fake`, `loss = a + 0.1 * b`: losses summed
            sides = [side for side in (value.left, value.right)
                     if type(side) not in (cst.Integer, cst.Float)]
            kind = t.LOSS if sides and all(
                self._value(local, side, fn) == t.LOSS for side in sides) else None
        return kind

    def _calls_loss(self, call: cst.Call) -> bool:
        key = var(call.func) if type(call.func) in (cst.Name, cst.Attribute) else None
        return key is not None and (key in self.ever.get(t.LOSS_FN, ()) or bool(
            t.LOSS_NAME.match(key.rpartition(".")[2])))

    def _bind_kind(self, local: dict, target, kind: str | None) -> None:
        key = var(target) if type(target) in (cst.Name, cst.Attribute) else None
        if key is not None:
            (self.attributes if "." in key else local).setdefault(key, set()).add(kind)
            if kind is not None:
                self.ever.setdefault(kind, set()).add(key)

