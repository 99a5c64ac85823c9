"""Shared facts about training steps for PTL003-PTL005 (not a rule).

- `StatementRule`: a rule base that keeps the path of statements and blocks
  from the module to the node being visited (visit/leave pairs, so it works
  batched), and can turn an edited block into an edit the engine can apply.
- `Optimizers`: what the file says about optimizers, schedulers and grad
  scalers (how each name was created), to tell `optimizer.step()` from
  `scheduler.step()`.
- Small classifiers for `.backward()`, `.zero_grad()` and gradient clearing.
"""
from __future__ import annotations

import re
from typing import Sequence

import libcst as cst

from ptlint.analysis.flow import target_vars
from ptlint.analysis.names import dotted
from ptlint.rule import Rule

# The statements and suites kept on the path.
_STATEMENTS = (
    "SimpleStatementLine", "For", "While", "If", "With", "Try", "TryStar", "FunctionDef",
    "ClassDef", "Match", "IndentedBlock", "SimpleStatementSuite",
)
LOOPS = (cst.For, cst.While)
BLOCKS = (cst.IndentedBlock, cst.Module)


class StatementRule(Rule):
    """A rule that needs to know where a node sits among statements."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.module: cst.Module | None = None
        # Module, then statements and the suites (blocks) they own, down to the
        # statement being visited.
        self.path: list[cst.CSTNode] = []

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node
        self.path.append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        self.path.pop()
        self.finish()

    def finish(self) -> None:
        """Called once the whole module has been visited."""

    def _enter(self, node: cst.CSTNode) -> None:
        self.path.append(node)

    def _leave(self, original_node: cst.CSTNode) -> None:
        self.path.pop()

    def innermost_statement(self) -> cst.CSTNode | None:
        for node in reversed(self.path):
            if not isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)):
                return node
        return None

    def block_edit(
        self, path: Sequence[cst.CSTNode], owner: cst.CSTNode, new_owner: cst.CSTNode
    ) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """The (old, new) edit replacing `owner` (an IndentedBlock or the Module)
        by `new_owner`; the engine prints it in place, at the block's indentation."""
        return owner, new_owner


def _position(path: Sequence[cst.CSTNode], node: cst.CSTNode) -> int:
    for i, candidate in enumerate(path):
        if candidate is node:
            return i
    raise ValueError("node is not on the path")


def _hook(name: str, body):
    # LibCST finds visitor methods by their __name__, so each hook needs its own.
    def hook(self, node):
        body(self, node)

    hook.__name__ = hook.__qualname__ = name
    return hook


for _name in _STATEMENTS:
    setattr(StatementRule, f"visit_{_name}", _hook(f"visit_{_name}", StatementRule._enter))
    setattr(StatementRule, f"leave_{_name}", _hook(f"leave_{_name}", StatementRule._leave))


def owner_of(path: Sequence[cst.CSTNode], statement: cst.CSTNode) -> cst.CSTNode | None:
    """The block (IndentedBlock or Module) whose body holds `statement`
    directly, or None (an `elif`, or a one-line suite)."""
    at = _position(path, statement)
    if at == 0:
        return None
    parent = path[at - 1]
    return parent if isinstance(parent, BLOCKS) else None


# -- calls -------------------------------------------------------------------
def method_name(call: cst.Call) -> str | None:
    """`x.name(...)` -> "name"; `name(...)` -> "name"."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def receiver(call: cst.Call) -> cst.BaseExpression | None:
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def key(node: cst.BaseExpression | None) -> str | None:
    """A stable text for a reference: `self.opt` -> "self.opt"; `opts[0]` -> "opts"."""
    while isinstance(node, cst.Subscript):
        node = node.value
    if node is None:
        return None
    return dotted(node)


def terminal(node: cst.BaseExpression | None) -> str:
    """The last name in a reference: `self.optimizer` -> "optimizer",
    `opts[0]` -> "opts", `self.optimizers()` -> "optimizers"."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        elif isinstance(node, cst.Attribute):
            return node.attr.value
        elif isinstance(node, cst.Name):
            return node.value
        else:
            return ""


def is_backward(rule: Rule, call: cst.Call) -> bool:
    """`x.backward(...)` (incl. `scaler.scale(loss).backward()`) or an imported
    `torch.autograd.backward(...)`."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value == "backward"
    return rule.is_name(call.func, "torch.autograd.backward")


def is_distributed_autograd(rule: Rule, call: cst.Call) -> bool:
    name = rule.qualified_name(call.func)
    if name is not None:
        return name.startswith(("torch.distributed.autograd.", "torch.distributed.optim."))
    base = key(receiver(call))
    return base is not None and base.split(".")[-1] in ("dist_autograd", "distributed_autograd")


def is_zero_grad(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "zero_grad"


def _on_grad(node: cst.BaseExpression) -> bool:
    """Whether `node` is `<x>.grad` or reaches through it (`p.grad.data`, `p.grad[0]`)."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Attribute) and node.attr.value == "grad":
            return True
        node = node.value
    return False


_CLEARING_NAME = re.compile(r"(?:zero|clear|reset)_?grad", re.I)


def clears_gradients(call: cst.Call) -> bool:
    """`opt.zero_grad()`, `model.zero_grad()`, `zero_grad(model)`,
    `p.grad.zero_()`, `p.grad.data.fill_(0)`."""
    name = method_name(call)
    if name is None:
        return False
    if _CLEARING_NAME.search(name):
        return True
    return name in ("zero_", "fill_") and _on_grad(receiver(call))


def clearing_target(target: cst.BaseExpression) -> bool:
    """An assignment or `del` target that resets gradients: `p.grad = None`."""
    return _on_grad(target)


# -- optimizers, schedulers, scalers -------------------------------------------
_OPTIMIZER_NAME = re.compile(r"optim|(?:^|_)opt(?!ion)", re.I)
_SCHEDULER_NAME = re.compile(r"sched", re.I)
_SCALER_NAME = re.compile(r"scaler", re.I)
_GRAD_SCALERS = ("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.GradScaler",
                 "torch.cpu.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler",
                 "torch.amp.grad_scaler.GradScaler")


class BlockRule(Rule):
    """A rule that knows the block (the module or an indented block) and the
    simple statement line the traversal is in: what a fix that inserts or
    moves statements needs."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.blocks: list[cst.IndentedBlock | cst.Module] = []
        self.line: cst.SimpleStatementLine | None = None

    def visit_Module(self, node: cst.Module) -> None:
        self.blocks.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.line = node

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.line = None


class Optimizers:
    """How names were created in this file, recorded at every assignment."""

    def __init__(self) -> None:
        self.optimizers: set[str] = set()
        self.schedulers: set[str] = set()
        self.scalers: set[str] = set()
        self.model_of: dict[str, str] = {}  # optimizer key -> key of `m` in `Opt(m.parameters())`

    def note_assignment(self, rule: Rule, targets: Sequence[cst.BaseExpression],
                        value: cst.BaseExpression | None) -> None:
        if not isinstance(value, cst.Call):
            return
        name = rule.qualified_name(value.func) or ""
        callee = terminal(value.func)
        if name.startswith("torch.optim.lr_scheduler.") or (
                _SCHEDULER_NAME.search(callee) and not _OPTIMIZER_NAME.search(callee)):
            # `get_cosine_schedule_with_warmup(...)`, but not `ScheduledOptim(...)`
            kind = self.schedulers
        elif name.startswith("torch.optim.") and not name.startswith("torch.optim.swa_utils"):
            kind = self.optimizers
        elif name in _GRAD_SCALERS:
            kind = self.scalers
        else:
            return
        for target in targets:
            text = key(target)
            if text is None:
                continue
            kind.add(text)
            if kind is self.optimizers and value.args:
                first = value.args[0].value
                if (isinstance(first, cst.Call) and method_name(first) == "parameters"
                        and not first.args):
                    model = key(receiver(first))
                    if model is not None:
                        self.model_of[text] = model

    def is_scheduler(self, node: cst.BaseExpression | None) -> bool:
        name = terminal(node)
        if _SCHEDULER_NAME.search(name):
            return True
        # built by a scheduler, unless its own name says optimizer
        # (`optimizer = AdamWScheduleFree(...)`)
        return key(node) in self.schedulers and not _OPTIMIZER_NAME.search(name)

    def is_optimizer(self, node: cst.BaseExpression | None) -> bool:
        if node is None or self.is_scheduler(node):
            return False
        text = key(node)
        if text in self.optimizers:
            return True
        if text in self.scalers or _SCALER_NAME.search(terminal(node)):
            return False
        return bool(_OPTIMIZER_NAME.search(terminal(node)))

    def stepped(self, call: cst.Call) -> tuple[cst.BaseExpression, bool] | None:
        """For a `.step(...)` call, the optimizer it steps and whether it
        passes a closure (`opt.step(closure)`), or None when it is no
        optimizer step (`scheduler.step()`, `env.step(action)`)."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "step"):
            return None
        obj = call.func.value
        if self.is_scheduler(obj):
            return None
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if positional and self.is_optimizer(positional[0].value):
            return positional[0].value, False  # scaler.step(optimizer)
        if self.is_optimizer(obj):
            closure = bool(positional) or any(
                a.keyword is not None and a.keyword.value == "closure" for a in call.args)
            return obj, closure
        return None


# -- bindings ------------------------------------------------------------------
def _target_keys(target: cst.BaseExpression):
    return target_vars(target, key)


class _Bindings(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()
        self.from_calls: set[str] = set()  # `x = f(...)`

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.keys.update(_target_keys(target.target))
            if isinstance(node.value, cst.Call):
                self.from_calls.update(_target_keys(target.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.keys.update(_target_keys(node.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.keys.update(_target_keys(node.target))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.keys.update(_target_keys(node.target))

    def visit_For(self, node: cst.For) -> None:
        self.keys.update(_target_keys(node.target))

    def visit_AsName(self, node: cst.AsName) -> None:
        self.keys.update(_target_keys(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.keys.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.keys.add(node.name.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def bound_keys(node: cst.CSTNode, *, from_calls: bool = False) -> set[str]:
    """Names and attribute chains (`opt`, `self.opt`) bound anywhere in `node`
    (not inside nested functions or classes); with `from_calls`, only those
    assigned the result of a call (`opt = SGD(...)`)."""
    finder = _Bindings()
    node.visit(finder)
    return finder.from_calls if from_calls else finder.keys
