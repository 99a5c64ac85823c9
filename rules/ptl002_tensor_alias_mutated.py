"""PTL002 tensor-alias-mutated."""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from ptlint.analysis.dataflow import (FACTORIES, bound, calls_in, evaluated, last_name,
                                     method_name, names_in, target_vars, var, var_base)
from ptlint.analysis.semantic import BACKWARD, STEP, Function
from ptlint.analysis.training import MODULE
from ptlint.fixers.expressions import call_method, wrapped_in_call
from ptlint.model import Safety
from ptlint.rule import Rule

# `torch.<name>(...)` calls known to return a new tensor: the factories, and ops.
_TORCH_TENSORS = FACTORIES | {
    "logspace", "empty_strided", "cat", "concat", "concatenate", "stack", "hstack", "vstack",
    "matmul", "mm", "bmm", "einsum", "exp", "log", "sqrt", "abs", "sigmoid", "tanh", "relu",
    "softmax", "log_softmax", "clone", "sum", "mean", "flatten", "reshape", "transpose", "permute",
    "squeeze", "unsqueeze", "clamp", "clip", "add", "sub", "mul", "div", "pow", "outer", "tril",
    "triu", "diag", "gather", "index_select", "masked_select", "roll", "flip", "repeat_interleave",
    "cumsum", "cumprod", "bernoulli", "multinomial", "sign", "floor", "ceil", "round", "maximum",
    "minimum", "cdist", "norm", "bucketize", "searchsorted"}
_TENSOR_MODULES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
_TENSOR_TYPES = frozenset({
    "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor",
    "torch.LongTensor", "torch.IntTensor", "torch.BoolTensor", "torch.ByteTensor",
    "torch.nn.Parameter", "torch.nn.parameter.Parameter",
})
# Methods that exist on tensors and return a tensor, but not on NumPy arrays or modules.
_TENSOR_METHODS = frozenset({
    "clone", "detach", "contiguous", "unsqueeze", "permute", "new_zeros", "new_ones",
    "new_full", "new_empty", "new_tensor", "masked_fill", "index_select", "type_as",
    "expand_as", "view_as",
})
# In-place methods that are not tensor mutations of values.
_NOT_MUTATING = frozenset({"requires_grad_", "share_memory_", "retain_grad_", "pin_memory_"})
# Modules whose `*_` functions change their first argument's values in place
# (not `torch.nn.utils.clip_grad_norm_`, which changes gradients).
_IN_PLACE_MODULES = frozenset({"torch", "torch.nn.init", "torch.nn.functional"})
# Receivers whose `state_dict()` holds no live tensors, or that the rule leaves alone.
_NOT_MODEL = re.compile(r"optim|sched|scaler|loader|sampler|opt\b|opt_|_opt\b", re.I)
_TRAINING = re.compile(
    r"(train(_(one_)?(epoch|epochs|step|steps|batch|model|loop|iteration|iter|net|network))?"
    r"|fit|fit_one_cycle|backward|manual_backward)\Z")
_OPTIMIZER = re.compile(r"optim|opt\b|opt_|_opt|scaler", re.I)
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "train", "eval", "zero_grad",
                             "modules", "children"})


class TensorAliasMutated(Rule):
    """
    ## What it does
    Flags `b = a` where `a` is a tensor and one of the two names is then
    changed in place (`b[i] = ...`, `b += ...`, `b.add_(...)` or any other
    in-place `*_` method, `b.copy_(...)`, `torch.op(..., out=b)`) while the
    other name is still read afterwards, or where `a` is a parameter of the
    function, `b` is changed in place and returned: the caller's tensor
    changes too.

    Also flags `b = a[i]` (basic indexing makes a view, not a copy) under the
    same conditions, and `p.data = w.data` where `w` is the caller's tensor
    (a parameter of the function, or taken from one in a loop): `p` then
    shares its storage, and every in-place update of one changes the other.

    Also flags a `best_state = model.state_dict()` snapshot (or its shallow
    `.copy()`) that is kept while training goes on and later loaded, saved or
    returned, including a snapshot taken before a loop that trains and
    loaded back inside it (or in a later notebook cell), which restores
    nothing; and `best_model = model` in a loop that trains, with
    `best_model` used after the loop: it is the same module, not a copy.

    It stays silent for `b = a.clone()`, for rebinding without mutation
    (`b = b * 2`), when the other name is not read again, for intended
    sharing such as weight tying (`self.decoder.weight = self.encoder.weight`,
    an attribute, not a name), for an alias of a loop variable over
    parameters (`for p in model.parameters(): w = p; w.add_(...)`, where
    changing the parameter is the point), for functions named with a trailing
    underscore (in place by convention), and for a state dict that is saved
    to disk or deep-copied before training goes on. `a` counts as a tensor when it comes
    from a torch factory or op, a tensor-only method (`.clone()`,
    `.detach()`, ...), is annotated `torch.Tensor`, or is changed by an
    in-place tensor method.

    ## Why is this bad?
    Assignment never copies a tensor: `b = a` makes `b` a second name for the
    same storage, so `b[0] = 1` or `b += 1` also changes `a`. Code that reads
    `a` afterwards silently sees the new values. Likewise `model.state_dict()`
    returns references to the live parameters, not a snapshot: after more
    training steps the "best" state holds the latest weights, and restoring
    it restores nothing.

    ## Example
    ```python
    import torch

    weights = torch.ones(3)
    update = weights
    update += 0.5
    print(weights)  # tensor([1.5, 1.5, 1.5]): changed too
    ```

    Use instead:
    ```python
    import torch

    weights = torch.ones(3)
    update = weights.clone()
    update += 0.5
    print(weights)  # tensor([1., 1., 1.])
    ```

    ## Fix safety
    Unsafe. The fix copies (`a.clone()`, `copy.deepcopy(model.state_dict())`)
    so that the other name keeps its values: that is a change of behaviour
    by design, and code that relied on the sharing (the caller expecting its
    tensor to change) changes too. A copy costs memory: a deep-copied state
    dict stays on the parameters' device, holding a second copy of the
    model's weights and buffers there. `a.clone()` is recorded by autograd,
    so gradients still flow from `b` to `a`, but `b` is no longer a leaf:
    in-place changes that raised on a leaf that requires grad are allowed on
    the clone.

    ## References
    - [`Tensor.clone`](https://pytorch.org/docs/stable/generated/torch.Tensor.clone.html)
    - [Saving the best model: `copy.deepcopy(model.state_dict())`](https://pytorch.org/tutorials/beginner/transfer_learning_tutorial.html)
    """

    code = "PTL002"
    message = ("Tensor alias changed in place while the other name is still used; copy it "
               "with `.clone()`")
    fix_title = "Copy the tensor (`.clone()`, `copy.deepcopy(...)`)"
    fix_safety = Safety.UNSAFE
    requires_text = ("torch", "Tensor", "_(", "state_dict")
    semantic = True

    def leave_Module(self, node: cst.Module) -> None:
        for function in self.model.functions:
            if isinstance(function.node, (cst.Module, cst.FunctionDef)):
                _Analysis(self, function).run()


def _in_place(name: str) -> bool:
    return (name.endswith("_") and not name.endswith("__") and not name.startswith("_")
            and name not in _NOT_MUTATING)


def _snapshot(value: cst.BaseExpression) -> cst.Call | None:
    """The `model.state_dict()` call of `model.state_dict()` or of its shallow
    `model.state_dict().copy()`, for a receiver that holds live tensors."""
    if method_name(value) == "copy" and not value.args:
        value = value.func.value
    if method_name(value) == "state_dict" and not value.args:
        receiver = var(value.func.value)
        if receiver is not None and not _NOT_MODEL.search(receiver):
            return value
    return None


def _view(value: cst.BaseExpression, ints: set[str] | None) -> str | None:
    """`a` for `a[i]`, `a[0, 1]`: an item picked by integers (a loop counter, one
    of `ints`; with None, any name), a view of `a`. Slices are left alone:
    writing into a slice of a buffer is how buffers are filled."""
    if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name)):
        return None
    for element in value.slice:
        index = element.slice.value if isinstance(element.slice, cst.Index) else None
        if isinstance(index, cst.UnaryOperation):
            index = index.expression
        if not (isinstance(index, cst.Integer) or (isinstance(index, cst.Name)
                                                   and (ints is None or index.value in ints))):
            return None
    return value.value.value


@dataclass(eq=False)
class _Alias:
    stmt: cst.Assign
    new: str
    old: str
    versions: dict[str, int]  # name -> binding version the alias is about
    tensor: bool  # known to be a tensor
    param: bool  # `old` is the function's parameter, not rebound
    mutated: str | None = None  # the name changed in place first
    reported: bool = False


class _Analysis:
    def __init__(self, rule: TensorAliasMutated, function: Function) -> None:
        self.rule, self.model, self.function = rule, rule.model, function
        self.version: dict[str, int] = {}
        self.tensors: set[str] = set()  # names currently bound to a known tensor
        self.params: set[str] = set()
        self.live: dict[str, int | None] = {}  # loop variables over parameters: version
        self.callers: set[str] = set()  # loop variables over what the caller passed
        self.ints: set[str] = set()  # loop counters: `for i in range(n)`
        self.aliases: list[_Alias] = []
        node = function.node
        if isinstance(node, cst.FunctionDef):
            for param in (*node.params.posonly_params, *node.params.params,
                          *node.params.kwonly_params):
                self.params.add(param.name.value)
                self.version[param.name.value] = 0
                if param.annotation is not None and self._is_tensor_type(param.annotation.annotation):
                    self.tensors.add(param.name.value)
        # `def clamp_(x)`: a trailing underscore says the caller's tensor is meant to change
        self.check_params = not (isinstance(node, cst.FunctionDef) and node.name.value.endswith("_"))

    def run(self) -> None:
        function = self.function
        if not (function.writes or "state_dict" in function.every("calls")
                or any(loop.training for loop in function.loops)):
            return
        assigns = [(node, node.targets[0].target, loops) for kind, node, loops in function.events
                   if kind == "small" and isinstance(node, cst.Assign)]
        if any(len(n.targets) == 1 and isinstance(target, cst.Name) and (
                _snapshot(n.value) is not None or isinstance(n.value, (cst.Name, cst.Attribute))
                and self._trains(loops)) for n, target, loops in assigns):
            self._state_dicts(function.events)
        aliases = any(len(n.targets) == 1 and isinstance(target, cst.Name) and (
            isinstance(n.value, cst.Name) or _view(n.value, None) is not None)
            for n, target, _ in assigns)
        if not (any(isinstance(target, cst.Attribute) and target.attr.value == "data"
                    for _, target, _ in assigns) or aliases and function.writes):
            return
        for kind, node, _ in function.events:
            if kind == "small":
                self._small(node)
                continue
            if kind in ("expr", "for", "with"):
                parts = evaluated(kind, node)
                self._reads(names_in(parts))
                self._mutations(parts)
            for target in bound(kind, node):
                self._bind_target(target, None)
            if kind == "for":
                self._for(node)

    def _for(self, node: cst.For) -> None:
        iterated = names_in(node.iter)
        names = [n for n in target_vars(node.target) if "." not in n]
        if "param" in cst.Module([]).code_for_node(node.iter).lower():
            # `for p in model.parameters()`: changing `p` is the point
            self.live.update((name, self.version.get(name)) for name in names)
        if iterated & (self.params - {"self", "cls"}) or iterated & self.callers:
            self.callers.update(names)  # `for p, w in zip(model.parameters(), weights)`
        if isinstance(node.iter, cst.Call) and last_name(node.iter.func) in ("range", "enumerate"):
            self.ints.update(names[:1])

    def _is_tensor_type(self, annotation: cst.BaseExpression) -> bool:
        return isinstance(annotation, (cst.Name, cst.Attribute)) and (
            self.function.resolve(annotation) in _TENSOR_TYPES)

    def _torch(self, call: cst.Call) -> str:
        """`torch.<...>` for a call of a torch function, else ""."""
        qualified = self.function.resolve(call.func) if isinstance(
            call.func, (cst.Name, cst.Attribute)) else None
        return qualified if qualified is not None and qualified.startswith("torch.") else ""

    def makes_tensor(self, value: cst.BaseExpression) -> bool:
        """Whether `value` is known to evaluate to a tensor."""
        if isinstance(value, cst.Call):
            qualified = self._torch(value)
            if qualified:
                module, _, name = qualified.rpartition(".")
                return module == "torch" and name in _TORCH_TENSORS or qualified.startswith(
                    _TENSOR_MODULES)
            return method_name(value) in _TENSOR_METHODS
        if isinstance(value, cst.BinaryOperation):
            return self.makes_tensor(value.left) or self.makes_tensor(value.right)
        return isinstance(value, cst.Name) and value.value in self.tensors

    def mutations(self, call: cst.Call) -> list[str]:
        """The names `call` changes in place: `x.add_(...)`, `x.data.zero_()`,
        `torch.op(..., out=x)`, `torch.nn.init.normal_(x)`."""
        func, qualified = call.func, self._torch(call)
        if qualified:
            module, _, name = qualified.rpartition(".")
            found = [arg.value.value for arg in call.args if arg.keyword is not None
                     and arg.keyword.value == "out" and isinstance(arg.value, cst.Name)]
            if (module in _IN_PLACE_MODULES and _in_place(name) and call.args
                    and isinstance(call.args[0].value, cst.Name)):
                found.append(call.args[0].value.value)
            return found
        if isinstance(func, cst.Attribute) and _in_place(func.attr.value):
            receiver = func.value
            if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
                receiver = receiver.value
            if isinstance(receiver, cst.Name):
                return [receiver.value]
        return []

    # -- the alias form -----------------------------------------------------
    def _small(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
            self._reads(names_in(small.value) | _target_reads(targets))
            self._mutations(small)
            for target in targets:
                if isinstance(target, cst.Subscript):
                    self._mutated(_base_name(target), evidence=False)
            for target in targets:
                self._bind_target(target, small.value)
            if len(targets) == 1:
                self._assigned(small, targets[0], small.value)
        elif isinstance(small, cst.AugAssign):
            self._reads(names_in(small.value) | _target_reads([small.target]))
            self._mutations(small.value)
            name = _base_name(small.target)
            self._mutated(name, evidence=False)
            if isinstance(small.target, cst.Name) and name not in self.tensors:
                self._bind(name, False)  # `n += 1` on a number rebinds
        elif isinstance(small, cst.AnnAssign):
            self._reads(names_in(small.value))
            if small.value is not None:
                self._mutations(small.value)
                if isinstance(small.target, cst.Name):
                    self._bind(small.target.value,
                               self._is_tensor_type(small.annotation.annotation)
                               or self.makes_tensor(small.value))
        elif isinstance(small, cst.Del):
            for name in names_in(small.target):
                self._bind(name, False)
        else:
            returned = isinstance(small, cst.Return) or (
                isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield))
            names = names_in(small.value if returned else small)
            self._reads(names)
            self._mutations(small)
            if returned and self.check_params:
                self._returned(names)

    def _assigned(self, small: cst.Assign, target: cst.BaseExpression,
                  value: cst.BaseExpression) -> None:
        """`b = a`, `b = a[i]`: a new alias; `p.data = w.data`: shared storage."""
        if isinstance(target, cst.Name):
            old = value.value if isinstance(value, cst.Name) else _view(value, self.ints)
            if old is not None and target.value != old and old in self.version and not (
                    old in self.live and self.live[old] == self.version.get(old)):
                # bound in this scope (not a global, builtin or import), and not
                # an alias of a parameter being updated in place
                versions = {target.value: self.version.get(target.value, 0),
                            old: self.version.get(old, 0)}
                self.aliases.append(_Alias(
                    small, target.value, old, versions, tensor=old in self.tensors,
                    param=old in self.params and self.version.get(old) == 0))
        elif self._shares(target, value):
            code = cst.Module([]).code_for_node
            self.rule.report(small, message=(
                f"`{code(target)} = {code(value)}` makes the two share storage with the "
                f"caller's tensor `{var(value.value)}`: changing either in place changes the "
                f"other; copy it with `{code(value)}.clone()`"),
                edits=[(value, call_method(value, "clone"))])

    def _shares(self, target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
        """`p.data = w.data` with `w` the caller's (a parameter, or from one in a loop)."""
        if not (isinstance(target, cst.Attribute) and target.attr.value == "data"
                and isinstance(value, cst.Attribute) and value.attr.value == "data"
                and isinstance(value.value, cst.Name) and self.check_params):
            return False
        name = value.value.value
        return (name in self.params - {"self", "cls"} and self.version.get(name) == 0) or (
            name in self.callers)

    def _mutations(self, node: cst.CSTNode) -> None:
        for call in calls_in(node):
            for name in self.mutations(call):
                self._mutated(name, evidence=True)

    def _mutated(self, name: str | None, evidence: bool) -> None:
        if name is not None and evidence:
            self.tensors.add(name)
        for alias in self.aliases:
            if (name is not None and alias.mutated is None and name in alias.versions
                    and self._current(alias, name) and (evidence or alias.tensor)):
                alias.tensor, alias.mutated = True, name

    def _current(self, alias: _Alias, name: str) -> bool:
        return self.version.get(name) == alias.versions[name]

    def _reads(self, names: set[str]) -> None:
        for alias in self.aliases:
            if alias.mutated is not None and not alias.reported:
                other = alias.old if alias.mutated == alias.new else alias.new
                if other in names and self._current(alias, other):
                    self._report(alias, other)

    def _returned(self, names: set[str]) -> None:
        for alias in self.aliases:
            if (alias.param and alias.mutated == alias.new and not alias.reported
                    and alias.new in names and self._current(alias, alias.new)):
                self._report(alias, None)

    def _report(self, alias: _Alias, read: str | None) -> None:
        alias.reported = True
        new, value = alias.new, alias.stmt.value
        old = cst.Module([]).code_for_node(value)
        does = "does not copy" if isinstance(value, cst.Name) else "is a view, not a copy"
        if read is None:
            message = (f"`{new} = {old}` {does}: changing `{new}` in place also changes "
                       f"the caller's tensor `{alias.old}`; copy it with `{old}.clone()`")
        else:
            message = (f"`{new} = {old}` {does}: `{alias.mutated}` is changed in place "
                       f"and `{read}` still sees the change; copy it with `{old}.clone()`")
        self.rule.report(alias.stmt, message=message, edits=[(value, call_method(value, "clone"))])

    # -- bindings -----------------------------------------------------------
    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):  # `b = a[i]` is a tensor when `a` is one
            view = _view(value, self.ints)
            self._bind(target.value, view in self.tensors if view is not None else (
                value is not None and self.makes_tensor(value)))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for name in target_vars(target):
                if "." not in name:
                    self._bind(name, False)

    def _bind(self, name: str, tensor: bool) -> None:
        self.version[name] = self.version.get(name, 0) + 1
        self.callers.discard(name)
        (self.tensors.add if tensor else self.tensors.discard)(name)

    # -- snapshots: a state dict or a module kept under a second name --------------
    def _state_dicts(self, events) -> None:
        snapshots = []  # (index, name, call or None for a module, stmt, loops)
        training: list[tuple[int, tuple]] = []
        uses: list[tuple[int, set[str], set[str], tuple]] = []  # (index, used, read, loops)
        bindings: dict[str, list[int]] = {}
        modules: set[str] | None = None
        trainers = self.model.helpers(BACKWARD) | self.model.helpers(STEP)
        for index, (kind, node, loops) in enumerate(events):
            targets = [t.target for t in node.targets] if kind == "small" and isinstance(
                node, cst.Assign) else [node.target] if kind == "for" else []
            for name in (name for target in targets for name in target_vars(target)):
                bindings.setdefault(name, []).append(index)
            target = targets[0] if kind == "small" and len(targets) == 1 else None
            call = _snapshot(node.value) if isinstance(target, cst.Name) else None
            if call is not None:
                snapshots.append((index, target.value, call, node, loops))
            elif isinstance(target, cst.Name) and isinstance(node.value, (cst.Name, cst.Attribute)):
                modules = self._modules(events) if modules is None else modules
                if var(node.value) in modules and self._trains(loops):
                    snapshots.append((index, target.value, None, node, loops))
            if kind in ("small", "expr"):
                if any(_is_training(call, trainers) for call in calls_in(node)):
                    training.append((index, loops))
                uses.append((index, self._uses(node), names_in(node), loops))
        trained = {loop for _, around in training for loop in around}  # loops that train
        for index, name, call, stmt, loops in snapshots:
            for use, used, read, use_loops in uses:
                if use <= index or name not in (used if call is not None else read):
                    continue
                if any(index < i < use for i in bindings.get(name, ())):
                    break  # a new snapshot (or a copy) by then
                # kept past a loop that trains, or (a state dict) trained after, or loaded
                # in a loop that trains; a module counts only when used after such a loop
                found = any(loop in trained and loop not in use_loops for loop in loops)
                if call is not None:
                    found = found or any(index < t < use for t, _ in training) or any(
                        loop in trained and loop not in loops for loop in use_loops)
                if found:
                    self._report_snapshot(stmt, name, stmt.value if call is None else call)
                if found or call is None:
                    break

    def _trains(self, loops: tuple) -> bool:
        return any(self.model.context(loop).loop.training for loop in loops)

    def _modules(self, events) -> set[str]:
        """Names that hold a module: built as one, or given `.parameters()`, `.train()` ..."""
        found = {key for key in self.model.bindings.ever.get(MODULE, ())
                 if self.model.holds(key, self.function) == MODULE}
        return found | {var(call.func.value) or "" for kind, node, _ in events
                        if kind in ("small", "expr", "for", "with")
                        for call in calls_in(evaluated(kind, node))
                        if method_name(call) in _MODULE_METHODS}

    def _uses(self, node: cst.CSTNode) -> set[str]:
        """Names whose state dict `node` loads, saves or returns."""
        if isinstance(node, cst.Return):
            return names_in(node.value)
        return {name for call in calls_in(node) if call.args and call.args[0].keyword is None and (
                    method_name(call) == "load_state_dict" or self._torch(call) == "torch.save")
                for name in names_in(call.args[0].value)}

    def _report_snapshot(self, stmt: cst.Assign, name: str, copied: cst.BaseExpression) -> None:
        code = cst.Module([]).code_for_node(copied)
        if isinstance(copied, cst.Call):
            message = (f"`{name}` holds references to the live parameters, not a copy: it "
                       "changes as training goes on; snapshot it with `copy.deepcopy(...)`")
        else:
            message = (f"`{name} = {code}` does not copy the module: its weights change as "
                       f"training goes on; snapshot it with `copy.deepcopy({code})`")
        if self.model.names.lookup("copy", self.function.scope) in (None, "copy"):
            self.rule.report(stmt, message=message,
                             edits=[(stmt.value, wrapped_in_call(copied, "copy.deepcopy"))],
                             imports=("import copy",),
                             fix_title="Snapshot with `copy.deepcopy(...)`")
        else:
            self.rule.report(stmt, message=message)


def _is_training(call: cst.Call, trainers: set[str]) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return bool(_TRAINING.match(func.value)) or func.value in trainers
    if not isinstance(func, cst.Attribute):
        return False
    name, receiver = func.attr.value, var(func.value)
    if name == "step":
        return receiver is not None and bool(_OPTIMIZER.search(receiver))
    if name == "train":  # `model.train()` only switches mode; `trainer.train()` trains
        return receiver is not None and "trainer" in receiver.lower()
    return bool(_TRAINING.match(name)) or (
        name in trainers and last_name(func.value) in ("self", "cls"))


def _base_name(target: cst.BaseExpression) -> str | None:
    return var(target) if isinstance(var_base(target), cst.Name) else None


def _target_reads(targets) -> set[str]:
    """Names an assignment target reads: the indices of `x[i] = ...`."""
    found: set[str] = set()
    for target in targets:
        while isinstance(target, cst.Subscript):
            for element in target.slice:
                found |= names_in(element)
            target = target.value
        if isinstance(target, cst.Attribute):
            found |= names_in(target.value)
    return found
