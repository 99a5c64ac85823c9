"""PTL002 tensor-alias-mutated."""
from __future__ import annotations

import re

import libcst as cst

from ptlint.fixers.expressions import call_method, wrapped_in_call
from ptlint.analysis.flow import body_of, calls_in, evaluated, statements, target_vars, vars_in
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule

# `torch.<name>(...)` calls known to return a new tensor.
_TORCH_TENSORS = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "linspace", "logspace", "eye", "empty_strided",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "cat", "concat", "concatenate", "stack", "hstack", "vstack", "matmul", "mm",
    "bmm", "einsum", "exp", "log", "sqrt", "abs", "sigmoid", "tanh", "relu", "softmax",
    "log_softmax", "clone", "sum", "mean", "flatten", "reshape", "transpose", "permute",
    "squeeze", "unsqueeze", "clamp", "clip", "add", "sub", "mul", "div", "pow", "outer",
    "tril", "triu", "diag", "gather", "index_select", "masked_select", "roll", "flip",
    "repeat_interleave", "cumsum", "cumprod", "normal", "bernoulli", "multinomial", "sign",
    "floor", "ceil", "round", "maximum", "minimum", "cdist", "norm", "bucketize", "searchsorted",
})
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


class TensorAliasMutated(Rule):
    """
    ## What it does
    Flags `b = a` where `a` is a tensor and one of the two names is then
    changed in place (`b[i] = ...`, `b += ...`, `b.add_(...)` or any other
    in-place `*_` method, `b.copy_(...)`, `torch.op(..., out=b)`) while the
    other name is still read afterwards, or where `a` is a parameter of the
    function, `b` is changed in place and returned: the caller's tensor
    changes too.

    Also flags a `best_state = model.state_dict()` snapshot (or its shallow
    `.copy()`) that is kept while training goes on and later loaded, saved or
    returned.

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

    def __init__(self, context) -> None:
        super().__init__(context)
        self._frames: list[_Frame] = []
        self._torch: dict[int, str] = {}  # id(Call) -> qualified name of a torch callee
        self._tensor_annotated: set[int] = set()  # id(Param or AnnAssign)
        self._copy_ok: set[int] = set()  # id(Assign) whose fix may write `copy.deepcopy`

    # -- facts gathered during the traversal, where names resolve ----------
    def visit_Module(self, node: cst.Module) -> None:
        self._frames.append(_Frame(node))

    def leave_Module(self, original_node: cst.Module) -> None:
        frame = self._frames.pop()
        if frame.snapshot or (frame.alias and frame.mutation):
            _Analysis(self, frame).run()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append(_Frame(node))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        frame = self._frames.pop()
        if frame.snapshot or (frame.alias and frame.mutation):
            _Analysis(self, frame).run()

    def visit_Param(self, node: cst.Param) -> None:
        if node.annotation is not None and self._is_tensor_type(node.annotation.annotation):
            self._tensor_annotated.add(id(node))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._is_tensor_type(node.annotation.annotation):
            self._tensor_annotated.add(id(node))

    def visit_Assign(self, node: cst.Assign) -> None:
        frame = self._frames[-1]
        if any(isinstance(t.target, cst.Subscript) for t in node.targets):
            frame.mutation = True
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        value = node.value
        if isinstance(value, cst.Name):
            frame.alias = True
        elif _snapshot(value) is not None:
            frame.snapshot = True
            if self.context.names.lookup("copy") in (None, "copy"):
                self._copy_ok.add(id(node))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._frames[-1].mutation = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            if _in_place(func.attr.value):
                self._frames[-1].mutation = True
        elif not isinstance(func, cst.Name):
            return
        qualified = self.qualified_name(func)
        if qualified is not None and qualified.startswith("torch."):
            self._torch[id(node)] = qualified
            module, _, name = qualified.rpartition(".")
            if (module in _IN_PLACE_MODULES and _in_place(name)) or any(
                    a.keyword is not None and a.keyword.value == "out" for a in node.args):
                self._frames[-1].mutation = True

    def _is_tensor_type(self, annotation: cst.BaseExpression) -> bool:
        return isinstance(annotation, (cst.Name, cst.Attribute)) and (
            self.qualified_name(annotation) in _TENSOR_TYPES)

    # -- used by the analysis ---------------------------------------------
    def makes_tensor(self, value: cst.BaseExpression, tensors: set[str]) -> bool:
        """Whether `value` is known to evaluate to a tensor."""
        if isinstance(value, cst.Call):
            qualified = self._torch.get(id(value))
            if qualified is not None:
                module, _, name = qualified.rpartition(".")
                return (module == "torch" and name in _TORCH_TENSORS) or (
                    qualified.startswith(_TENSOR_MODULES))
            func = value.func
            return isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS
        if isinstance(value, cst.BinaryOperation):
            return self.makes_tensor(value.left, tensors) or self.makes_tensor(value.right, tensors)
        if isinstance(value, cst.Name):
            return value.value in tensors
        return False

    def mutations(self, call: cst.Call) -> list[str]:
        """The names `call` changes in place: `x.add_(...)`, `x.data.zero_()`,
        `torch.op(..., out=x)`, `torch.nn.init.normal_(x)`."""
        found = []
        func = call.func
        qualified = self._torch.get(id(call))
        if qualified is not None:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "out" and isinstance(
                        arg.value, cst.Name):
                    found.append(arg.value.value)
            module, _, name = qualified.rpartition(".")
            if (module in _IN_PLACE_MODULES and _in_place(name) and call.args
                    and isinstance(call.args[0].value, cst.Name)):
                found.append(call.args[0].value.value)
            return found
        if isinstance(func, cst.Attribute) and _in_place(func.attr.value):
            receiver = func.value
            if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
                receiver = receiver.value
            if isinstance(receiver, cst.Name):
                found.append(receiver.value)
        return found


def _in_place(name: str) -> bool:
    return (name.endswith("_") and not name.endswith("__") and not name.startswith("_")
            and name not in _NOT_MUTATING)


def _snapshot(value: cst.BaseExpression) -> cst.Call | None:
    """The `model.state_dict()` call of `model.state_dict()` or of its shallow
    `model.state_dict().copy()`, for a receiver that holds live tensors."""
    if (isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "copy"):
        value = value.func.value
    if (isinstance(value, cst.Call) and not value.args
            and isinstance(value.func, cst.Attribute) and value.func.attr.value == "state_dict"):
        receiver = dotted(value.func.value)
        if receiver is not None and not _NOT_MODEL.search(receiver):
            return value
    return None


class _Frame:
    """A function or module body, analysed when it is left if it holds a
    `x = m.state_dict()`, or a `b = a` and something that changes a tensor in place."""

    __slots__ = ("node", "alias", "mutation", "snapshot")

    def __init__(self, node: cst.Module | cst.FunctionDef) -> None:
        self.node = node
        self.alias = self.mutation = self.snapshot = False


class _Alias:
    __slots__ = ("stmt", "new", "old", "versions", "tensor", "param", "mutated", "reported")

    def __init__(self, stmt, new, old, versions, tensor, param) -> None:
        self.stmt = stmt
        self.new = new
        self.old = old
        self.versions = versions  # name -> binding version the alias is about
        self.tensor = tensor  # known to be a tensor
        self.param = param  # `old` is the function's parameter, not rebound
        self.mutated: str | None = None  # the name changed in place first
        self.reported = False


class _Analysis:
    def __init__(self, rule: TensorAliasMutated, frame: _Frame) -> None:
        self.rule = rule
        self.frame = frame
        self.node = frame.node
        self.version: dict[str, int] = {}
        self.tensors: set[str] = set()  # names currently bound to a known tensor
        self.params: set[str] = set()
        self.live: dict[str, int | None] = {}  # loop variables over parameters: version
        self.aliases: list[_Alias] = []
        if isinstance(self.node, cst.FunctionDef):
            params = self.node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                name = param.name.value
                self.params.add(name)
                self.version[name] = 0
                if id(param) in rule._tensor_annotated:
                    self.tensors.add(name)
        # `def clamp_(x)`: a trailing underscore says the caller's tensor is meant to change
        self.check_params = not (isinstance(self.node, cst.FunctionDef)
                                 and self.node.name.value.endswith("_"))

    def run(self) -> None:
        events = list(statements(body_of(self.node)))
        if self.frame.snapshot:
            self._state_dicts(events)
        if not (self.frame.alias and self.frame.mutation):
            return
        for kind, node, _ in events:
            if kind == "small":
                self._small(node)
            elif kind in ("expr", "for", "with"):
                parts = evaluated(kind, node)
                self._reads(_names(vars_in(parts)))
                self._mutations(parts)
                if kind == "for":
                    self._bind_target(node.target, None)
                    if "param" in cst.Module([]).code_for_node(node.iter).lower():
                        # `for p in model.parameters()`: changing `p` is the point
                        for name in target_vars(node.target):
                            self.live[name] = self.version.get(name)
                elif kind == "with":
                    for item in node.items:
                        if item.asname is not None:
                            self._bind_target(item.asname.name, None)
            elif kind == "handler" and node.name is not None:
                self._bind_target(node.name.name, None)
            elif kind == "def":
                self._bind(node.name.value, False)

    # -- the alias form -----------------------------------------------------
    def _small(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
            self._reads(_names(vars_in(small.value)) | _target_reads(targets))
            self._mutations(small)
            for target in targets:
                if isinstance(target, cst.Subscript):
                    self._mutated(_base_name(target), evidence=False)
            for target in targets:
                self._bind_target(target, small.value)
            if (len(targets) == 1 and isinstance(targets[0], cst.Name)
                    and isinstance(small.value, cst.Name)
                    and targets[0].value != small.value.value):
                self._alias(small, targets[0].value, small.value.value)
        elif isinstance(small, cst.AugAssign):
            self._reads(_names(vars_in(small.value)) | _target_reads([small.target]))
            self._mutations(small.value)
            name = _base_name(small.target)
            self._mutated(name, evidence=False)
            if isinstance(small.target, cst.Name) and name not in self.tensors:
                self._bind(name, False)  # `n += 1` on a number rebinds
        elif isinstance(small, cst.AnnAssign):
            self._reads(_names(vars_in(small.value)))
            if small.value is not None:
                self._mutations(small.value)
                if isinstance(small.target, cst.Name):
                    self._bind(small.target.value,
                               id(small) in self.rule._tensor_annotated
                               or self.rule.makes_tensor(small.value, self.tensors))
        elif isinstance(small, cst.Del):
            for name in _names(vars_in(small.target)):
                self._bind(name, False)
        elif isinstance(small, cst.Return) or (
                isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield)):
            names = _names(vars_in(small.value))
            self._reads(names)
            self._mutations(small)
            self._returned(names)
        else:
            self._reads(_names(vars_in(small)))
            self._mutations(small)

    def _mutations(self, node: cst.CSTNode) -> None:
        for call in calls_in(node):
            for name in self.rule.mutations(call):
                self._mutated(name, evidence=True)

    def _mutated(self, name: str | None, evidence: bool) -> None:
        if name is None:
            return
        if evidence:
            self.tensors.add(name)
        for alias in self.aliases:
            if (alias.mutated is None and name in alias.versions
                    and self.version.get(name) == alias.versions[name]):
                if evidence or alias.tensor:
                    alias.tensor = True
                    alias.mutated = name

    def _reads(self, names: set[str]) -> None:
        for alias in self.aliases:
            if alias.mutated is None or alias.reported:
                continue
            other = alias.old if alias.mutated == alias.new else alias.new
            if other in names and self.version.get(other) == alias.versions[other]:
                self._report(alias, other)

    def _returned(self, names: set[str]) -> None:
        if not self.check_params:
            return
        for alias in self.aliases:
            if (alias.param and alias.mutated == alias.new and not alias.reported
                    and alias.new in names
                    and self.version.get(alias.new) == alias.versions[alias.new]):
                self._report(alias, None)

    def _report(self, alias: _Alias, read: str | None) -> None:
        alias.reported = True
        new, old = alias.new, alias.old
        if read is None:
            message = (f"`{new} = {old}` does not copy: changing `{new}` in place also changes "
                       f"the caller's tensor `{old}`; copy it with `{old}.clone()`")
        else:
            message = (f"`{new} = {old}` does not copy: `{alias.mutated}` is changed in place "
                       f"and `{read}` still sees the change; copy it with `{old}.clone()`")
        value = alias.stmt.value
        self.rule.report(alias.stmt, message=message,
                         edits=[(value, call_method(value, "clone"))])

    def _alias(self, stmt: cst.Assign, new: str, old: str) -> None:
        if old not in self.version:
            return  # not bound in this scope: a global, a builtin, an import
        if old in self.live and self.live[old] == self.version.get(old):
            return  # an alias of a parameter being updated in place
        versions = {new: self.version.get(new, 0), old: self.version.get(old, 0)}
        self.aliases.append(_Alias(
            stmt, new, old, versions, tensor=old in self.tensors,
            param=old in self.params and self.version.get(old) == 0))

    # -- bindings -----------------------------------------------------------
    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            tensor = value is not None and self.rule.makes_tensor(value, self.tensors)
            if isinstance(value, cst.Name):
                tensor = value.value in self.tensors
            self._bind(target.value, tensor)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for name in target_vars(target):
                if "." not in name:
                    self._bind(name, False)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None)

    def _bind(self, name: str, tensor: bool) -> None:
        self.version[name] = self.version.get(name, 0) + 1
        if tensor:
            self.tensors.add(name)
        else:
            self.tensors.discard(name)

    # -- the state_dict form ------------------------------------------------
    def _state_dicts(self, events) -> None:
        snapshots = []  # (index, name, call, stmt, loops)
        training: list[tuple[int, tuple]] = []
        uses: list[tuple[int, set[str], tuple]] = []
        bindings: dict[str, list[int]] = {}
        for index, (kind, node, loops) in enumerate(events):
            if kind == "small" and isinstance(node, cst.Assign):
                for target in node.targets:
                    for name in target_vars(target.target):
                        bindings.setdefault(name, []).append(index)
                call = _snapshot(node.value)
                if call is not None and len(node.targets) == 1 and isinstance(
                        node.targets[0].target, cst.Name):
                    snapshots.append((index, node.targets[0].target.value, call, node, loops))
            elif kind == "for":
                for name in target_vars(node.target):
                    bindings.setdefault(name, []).append(index)
            if kind not in ("small", "expr"):
                continue
            if any(_is_training(call) for call in calls_in(node)):
                training.append((index, loops))
            used = self._uses(node)
            if used:
                uses.append((index, used, loops))
        for index, name, call, stmt, loops in snapshots:
            rebound = [i for i in bindings.get(name, ()) if i > index]
            for use, used, use_loops in uses:
                if use <= index or name not in used:
                    continue
                if any(index < i < use for i in rebound):
                    break  # a new snapshot (or a copy) by then
                later = any(index < t < use for t, _ in training)
                carried = any(
                    loop not in use_loops and any(loop in t_loops for _, t_loops in training)
                    for loop in loops)
                if later or carried:
                    self._report_snapshot(stmt, name, call)
                    break

    def _uses(self, node: cst.CSTNode) -> set[str]:
        """Names whose state dict `node` loads, saves or returns."""
        used: set[str] = set()
        if isinstance(node, cst.Return):
            return _names(vars_in(node.value))
        for call in calls_in(node):
            func = call.func
            first = call.args[0].value if call.args and call.args[0].keyword is None else None
            if first is None:
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
                used |= _names(vars_in(first))
            elif self.rule._torch.get(id(call)) == "torch.save":
                used |= _names(vars_in(first))
        return used

    def _report_snapshot(self, stmt: cst.Assign, name: str, call: cst.Call) -> None:
        message = (f"`{name}` holds references to the live parameters, not a copy: it changes "
                   "as training goes on; snapshot it with `copy.deepcopy(...)`")
        if id(stmt) in self.rule._copy_ok:
            self.rule.report(stmt, message=message,
                             edits=[(stmt.value, wrapped_in_call(call, "copy.deepcopy"))],
                             imports=("import copy",),
                             fix_title="Snapshot with `copy.deepcopy(...)`")
        else:
            self.rule.report(stmt, message=message)


def _is_training(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return bool(_TRAINING.match(func.value))
    if not isinstance(func, cst.Attribute):
        return False
    name = func.attr.value
    if name == "step":
        receiver = dotted(func.value)
        return receiver is not None and bool(_OPTIMIZER.search(receiver))
    if name == "train":  # `model.train()` only switches mode; `trainer.train()` trains
        receiver = dotted(func.value)
        return receiver is not None and "trainer" in receiver.lower()
    return bool(_TRAINING.match(name))


def _names(found: set[str]) -> set[str]:
    return {v for v in found if "." not in v}


def _base_name(target: cst.BaseExpression) -> str | None:
    while isinstance(target, cst.Subscript):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


def _target_reads(targets) -> set[str]:
    """Names an assignment target reads: the indices of `x[i] = ...`."""
    found: set[str] = set()
    for target in targets:
        while isinstance(target, cst.Subscript):
            for element in target.slice:
                found |= _names(vars_in(element))
            target = target.value
        if isinstance(target, cst.Attribute):
            found |= _names(vars_in(target.value))
    return found
