"""PTL101 tensor-moved-after-creation."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from ptlint.analysis.walk import descendants
from ptlint.fixers.arguments import argument, has_star_args, keyword, positional
from ptlint.fixers.expressions import is_size
from ptlint.model import Safety
from ptlint.analysis.dataflow import assigned_pairs, last_name
from ptlint.rule import Rule, code_matches
from ptlint.rules._creation import (
    CASTS, FACTORIES, FILLS, LEGACY, LIKE, NEW, RANDOM, RANDOM_FILLS, VIEWS, Chain, device_string,
    is_cpu_string, literal_legacy, named_like_device, on_device, requires_grad, unwind,
)

# what puts an argument on a device: `Data(x=x.cuda())`, `Net(device=d)` are no host builds
_ON_DEVICE = re.compile(r"cuda|device|\.to\(")

# `.to()`/`.cuda()` keywords that a factory has no use for once it creates on the device.
_DROPPED = ("non_blocking", "copy")


def _scalar_mix(chain: Chain, name: str) -> bool:
    """`torch.tensor(2.0) * x`, `torch.ones(()) * x`: arithmetic with a name, of a
    factory that may make a 0-dim tensor, which goes to the device of a tensor
    `x` by itself (nothing would be moved)."""
    if not chain.with_names:
        return False
    first = chain.factory.args[0].value if chain.factory.args else None
    return name in ("tensor", "as_tensor") or first is None or (
        isinstance(first, cst.Tuple) and not first.elements)


def _copies_data(chain: Chain, kind: tuple[str, str]) -> bool:
    """A tensor made from data (`torch.tensor(data)`, `torch.as_tensor(a)`,
    `t.new_tensor(data)`, a legacy constructor given data): with `device=`,
    torch builds it on the CPU and copies it over just the same, so the move
    after costs nothing more; unless `.repeat(...)` before the move copies it
    many times over. Data from `range(...)` are not such: `torch.arange(...,
    device=...)` makes them on the device."""
    group, name = kind
    if not (group == "torch" and name in ("tensor", "as_tensor") or group == "legacy"
            or group == "new" and name == "new_tensor"):
        return False
    args = [a for a in chain.factory.args if a.keyword is None]
    if not args or group == "legacy" and (len(args) >= 2 or is_size(args[0].value)):
        return False  # sizes: uninitialised memory, made on the device by `empty`
    first = args[0].value
    if isinstance(first, cst.Call) and isinstance(first.func, cst.Name) \
            and first.func.value == "range":
        return False
    return not any(op.kind == "view" and isinstance(op.call, cst.Call) and op.method == "repeat"
                   for op in chain.ops)


@dataclass
class _Scope:
    """The names a function (or the module, or a class body) binds: for each,
    whether every binding is a tensor created on the CPU (one flag per binding)."""

    parent: "_Scope | None"
    is_class: bool = False
    bindings: dict[str, list[bool]] = field(default_factory=dict)
    escaped: set[str] = field(default_factory=set)  # `global x` somewhere: bound elsewhere too
    cpu: set[str] = field(default_factory=set)  # names bound to the CPU device (`"cpu"`)
    batches: dict[str, frozenset[str]] = field(default_factory=dict)  # `for x, y in ...`: x -> {y}
    casts: dict[str, int] = field(default_factory=dict)  # `x = x.float()`: how many times
    moved: set[str] = field(default_factory=set)  # `x = x.to(device)`
    # `m = Net()`, `m = Net().to("cpu")`: m -> (the class's name, moved to the CPU in the chain)
    modules: dict[str, tuple[str, bool]] = field(default_factory=dict)

    def bind(self, name: str, on_cpu: bool = False, cpu: bool = False) -> None:
        self.bindings.setdefault(name, []).append(on_cpu)
        if cpu:
            self.cpu.add(name)

    def _once(self, name: str) -> "tuple[_Scope, list[bool]] | None":
        """The scope that binds `name`, read here, and its bindings."""
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.bindings and not (scope.is_class and scope is not self):
                return (scope, scope.bindings[name]) if name not in scope.escaped else None
            scope = scope.parent
        return None

    def on_cpu(self, name: str) -> bool:
        """Whether `name`, read here, is bound exactly once, to a tensor created on the CPU."""
        found = self._once(name)
        return found is not None and found[1] == [True]

    def host_batch(self, name: str) -> bool:
        """Whether `name`, read here, is an item of a loop's batch (`for x, y in
        loader`) that is only ever cast (`y = y.float()`), never moved, while
        another item of the same batch is moved (`x = x.to(device)`): the loader
        yields host tensors, and `y.device` is the CPU."""
        found = self._once(name)
        if found is None:
            return False
        scope, bindings = found
        return (name in scope.batches and name not in scope.moved
                and len(bindings) == 1 + scope.casts.get(name, 0)
                and bool(scope.batches[name] & scope.moved))

    def host_module(self, name: str, unmoved_class: Callable[[str], bool]) -> bool:
        """Whether `name`, read here, is bound exactly once, to a model built on the
        CPU (`Net().to("cpu")`, or `Net()` of a class the file defines and never
        moves, given nothing that names a device): `model.device` is the CPU,
        unless the file moves it (`model.to(...)`)."""
        found = self._once(name)
        if found is None or len(found[1]) != 1 or name not in found[0].modules:
            return False
        built, to_cpu = found[0].modules[name]
        return to_cpu or unmoved_class(built)

    def cpu_device(self, name: str) -> bool:
        """Whether `name`, read here, is bound exactly once, to the CPU device
        (`device = torch.device("cpu")`): a move there is no move."""
        found = self._once(name)
        return found is not None and len(found[1]) == 1 and name in found[0].cpu


@dataclass
class _Finding:
    node: cst.Call
    replacement: cst.CSTNode | None
    safety: Safety
    source: str | None = None  # a name that must hold a CPU tensor (the `*_like`/`new_*` source)
    scope: _Scope | None = None
    message: str | None = None
    imports: tuple[str, ...] = ()
    host: str | None = None  # the `y` of a move to `y.device`, when a name


class TensorMovedAfterCreation(Rule):
    """
    ## What it does
    Flags a tensor created on the CPU and then moved to a device with
    `.cuda(...)`, `.to(<device>)` or `.to(device=...)`:

    - a factory (`torch.zeros`, `torch.rand`, `torch.arange`,
      `torch.full`, the window functions, ...), also when a dtype cast
      (`.long()`, `.half()`, `.to(torch.float16)`, `.to(x.dtype)`,
      `.type(torch.LongTensor)`, `.type_as(t)`, `.type(t.type())`),
      a view (`.unsqueeze(0)`, `.view(...)`, `.t()`, new axes by indexing
      with only `None`, `:` and `...`: `[None, :, :]`), `.repeat(...)`, an
      in-place fill (`.fill_(v)`, `.uniform_()`), element-wise math
      (`torch.exp(t)`, `t.sin()`, `.sqrt()`, `.log()`, ...) or arithmetic
      with a number, a name, a `math` call or arithmetic of these (`1.0 / n`)
      (`+`, `-`, `*`, `/`, `//`, `%`),
      or a `Variable(...)` wrapper without `requires_grad=` but `False` (the
      tensor itself since torch 0.4; `volatile=` does nothing) sits between
      the factory and the move: `torch.zeros(n).long().to(device)`,
      `(torch.ones(n) * -1).to(device)`,
      `torch.exp(-math.log(p) * torch.arange(h) / h).to(t.device)`;
    - a legacy constructor with literal sizes, or `range(...)` data
      (`torch.Tensor(b, b).fill_(v).cuda()`, `torch.ByteTensor(size=(n,)).cuda()`,
      `torch.LongTensor(range(n)).cuda()`);
    - a tensor made from data (`torch.tensor(data)`, `torch.as_tensor(a)`,
      `torch.FloatTensor([1e-8])`) only when `.repeat(...)` comes before the
      move, which then copies every repetition over;
    - `torch.zeros_like(t)` (and the other `*_like` factories) and
      `t.new_zeros(...)` (and the other `new_*` methods) only when `t` is
      provably on the CPU: a factory call, `x.cpu()`, or a name bound exactly
      once in its function (or module), to such a tensor. These create on
      `t`'s device, so with `t` on the GPU nothing touches host memory;
    - a factory (with the same steps) assigned to a name that the next
      statement moves: `x = torch.zeros(n)` then `x = x.cuda()`, or
      `if x.is_cuda: x = x.cuda()`, `x = x.cuda() if t.is_cuda else x`, or
      `x = x.long().to(device)` and `x = x.to(device).float()` (casts and
      views on the way), also in a tuple (`x, z = x.cuda(), z.cuda()`);
      items set to a number in between (`x[0, 0] = 0`,
      `x[:, 0] = math.inf`) do not count, nor does filling it in place
      (`x.normal_(0, 1)`, `x.zero_()`: the move is reported without a fix),
      since setting them on the device is a small kernel where the move
      copies the whole tensor; also several tensors created one after
      another and then moved together, by consecutive moves or in one `if`
      that only moves them (reported on the move, without a fix).

    A device is a string such as `"cuda"`, `"cuda:1"` or `"mps"` (also an
    f-string starting with one), `torch.device(...)`, `x.device`, a name or
    attribute named like a device (`device`, `DEVICE`, `dev`, `self.device`,
    `self._device`, `*_device`), an item of that name (`config["device"]`),
    `self.device()` or `model._device()`, or a call of a function named for
    returning one (`get_device()`, `utils.get_default_device()`). A move to the
    CPU (`.to("cpu")`, `.to(torch.device("cpu"))`, `.to(device)` where the
    function binds `device` once, to one of those) is not a move: the tensor is
    already there and `.to()` returns it. Nor is `.to(y.device)` where `y` is an
    item of a loop's batch (`for x, y in loader`) that the function only casts
    while it moves another item of the same batch: the loader yields host
    tensors; nor `.to(model.device)` where the scope binds `model` once, to a
    model built on the CPU (`Codec().to("cpu")`, or `Codec()` of a class the
    file defines and whose code never names `cuda`, given no argument that
    names a device), and the file never calls `model.to(...)` or `model.cuda()`
    (an `Accelerator()` of another module picks its own device).
    `.to(torch.float16)` and `.half()` are not device moves.
    `.to(other_tensor)` moves to the other tensor's device and dtype, but which
    device that is the rule cannot tell: not flagged.

    Not flagged: a tensor made from data (`torch.tensor(data)`,
    `torch.as_tensor(a)`, `t.new_tensor(data)`, a legacy constructor given
    data) moved as it is or after casts, views or arithmetic: with
    `device=`, torch builds it on the CPU and copies it over just the same,
    so there is nothing to save. Factories that already pass `device=` (or `**kwargs`, or
    `out=`), random factories drawing from an explicit `generator=` (a seeded
    CPU generator gives the same numbers on every device, which is why such
    code creates on the CPU on purpose), modules (`nn.Linear(...).cuda()`),
    `torch.from_numpy(...)`, data from a loader, a slice or `expand` between
    factory and move, arithmetic with a name on a factory that may make a
    0-dim tensor (`torch.tensor(2.0) * x`: a CPU scalar follows `x` to its
    device by itself), and any file that changes the default device
    (`torch.set_default_device`, `torch.set_default_tensor_type`) or code
    inside `with torch.device(...):`, where factories do not create on the CPU.

    ## Why is this bad?
    The tensor is first allocated and filled in host memory, then copied to
    the device and the host copy is thrown away: an extra allocation, an extra
    host-to-device transfer and, for `.cuda()`, a synchronising copy. Passing
    `device=` creates it where it is used, in one step.

    ## Example
    ```python
    import torch
    mask = torch.ones(8, 8).cuda()
    noise = torch.randn(16, 100).to(device)
    labels = torch.zeros(16).long().to(device)
    ```

    Use instead:
    ```python
    import torch
    mask = torch.ones(8, 8, device="cuda")
    noise = torch.randn(16, 100, device=device)
    labels = torch.zeros(16, dtype=torch.long, device=device)
    ```

    ## Fix safety
    The fix passes `device=` to the factory, turns `.cuda(1)` into
    `device="cuda:1"` and drops `non_blocking=`/`copy=`, which mean nothing
    for a tensor created in place. Steps between the factory and the move
    stay where they were, now on the device (`torch.arange(n).float().cuda()`
    becomes `torch.arange(n, device="cuda").float()`; `.type(torch.FloatTensor)`,
    which would move back to the CPU, becomes `.to(torch.float32)`, and
    `.type_as(t)` or `.type(t.type())`, which would move to `t`'s device,
    `.to(t.dtype)`), with two folds:

    - a dtype (from casts, or from `.to(device, dtype)`) goes into the
      factory as `dtype=` for `zeros`, `ones`, `empty`, `eye`, their
      `*_like` and `new_*` forms, whose values are the same in every dtype:
      `torch.zeros(n).long().to(device)` becomes
      `torch.zeros(n, dtype=torch.long, device=device)`;
    - `torch.zeros(size).fill_(v)` (or `ones`, `empty`) with a literal `v`
      becomes `torch.full(size, v, device=...)` (an integer literal is
      written as a float, so the dtype stays the default one).

    The rule's declared `fix_safety` is safe, the most permissive level it
    emits; each finding carries its own level, so `--fix` applies only the
    safe ones and `--unsafe-fixes` adds the rest:

    - Safe: `zeros`, `ones`, `empty`, `full`, `eye`, `tensor`, `as_tensor`,
      the `*_like` and `new_*` forms of these, and `arange` over whole
      numbers (`start` and `step` absent or integer literals), with casts, views and
      fills (`fill_`, `zero_`, `triu`, `tril`, also as `torch.triu(factory, 1)`)
      after them: every device
      gives the same values (data are converted on the host either way, and
      casts round the same way everywhere).
    - Unsafe: `linspace`, `logspace`, the window functions and other
      `arange` calls: their values are computed in the device's arithmetic,
      whose last bit can differ on an accelerator.
    - Unsafe: random factories (`rand`, `randn`, `randint`, `randperm`,
      `*_like`) and random fills (`uniform_`, `normal_`, ...). They then draw
      from the device's generator instead of the CPU's, so a seeded run
      produces other numbers (on the CPU itself they are the same).
    - Unsafe: arithmetic by `/`, `//` or `%` after the factory (`+`, `-` and
      `*` with a number are correctly rounded on every device: safe), and
      element-wise math (`exp`, `sin`, ...), computed in the device's
      arithmetic. With a name or a call (`(torch.ones(n) * i).to(device)`,
      `(1.0 / n * torch.ones(n)).to(device)`)
      no fix is offered: a CPU tensor `i` would not mix with a tensor created
      on the device.
    - Unsafe: a factory called with `requires_grad=True` (or followed by
      `.requires_grad_()`). The result becomes a leaf on the device (usually
      what was meant: before, the device copy was a non-leaf whose `.grad`
      stayed `None`), but gradients now land on a different tensor.
    - Unsafe: `tensor`, `as_tensor`, `full`, `arange`, `linspace`,
      `logspace` when the move carries a dtype (`.to(device, torch.half)`):
      values computed directly in the target dtype can differ in the last
      bit from values computed in the default dtype and then converted.

    No fix is offered for `.cuda(<expression>)` (the expression may be
    `None`, which `.cuda()` reads as the current device but a factory reads
    as the CPU), for `pin_memory=` or `memory_format=`, for a tensor that
    requires grad assigned to a name the file writes in place
    (`self.context[:] = 0`: the moved copy is no leaf and allows it, a leaf
    that requires grad raises), for a move in the
    statements after (it may be conditional), and for legacy
    constructors: the fix of PTL230 (legacy-tensor-constructor) turns them
    into factories first, and this rule's fix then applies to the result.

    ## References
    - [Performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    """

    code = "PTL101"
    message = "Tensor created on the CPU and then moved; pass `device=` to the factory instead"
    fix_title = "Pass `device=` to the factory"
    fix_safety = Safety.SAFE
    tags = ("performance",)
    requires_text = (".cuda(", ".to(")

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scope = _Scope(None)
        self.module_scope = self.scope
        self._stack: list[_Scope] = []  # the scopes enclosing the current one
        self.device_blocks: list[int] = []  # id() of `with torch.device(...)` statements entered
        self.findings: list[_Finding] = []
        self.targets: dict[int, cst.BaseExpression] = {}  # id(value) -> its one target
        self.moved_anywhere: set[str] = set()  # `x` of `x.to(...)`, `x.cuda()` in the file
        self.local_classes: dict[str, list[cst.ClassDef]] = {}  # the classes the file defines
        source = context.source
        # factories follow the default device or tensor type, which the file changes
        self.default_changed = "set_default_device" in source or "set_default_tensor_type" in source

    # -- scopes and bindings ----------------------------------------------------
    def _enter(self, is_class: bool = False) -> None:
        self._stack.append(self.scope)
        self.scope = _Scope(self.scope, is_class=is_class)

    def _pop(self) -> None:
        self.scope = self._stack.pop()

    def _params(self, params: cst.Parameters) -> None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self.scope.bind(param.name.value)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.scope.bind(star.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.bind(node.name.value)
        self._enter()
        self._params(node.params)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._enter()
        self._params(node.params)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.bind(node.name.value)
        self.local_classes.setdefault(node.name.value, []).append(node)
        self._enter(is_class=True)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._pop()

    def _bind_target(self, target: cst.BaseExpression, on_cpu: bool = False) -> None:
        if isinstance(target, cst.Name):
            self.scope.bind(target.value, on_cpu)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self.targets[id(node.value)] = node.targets[0].target
        single = len(node.targets) == 1
        on_cpu = single and self._on_cpu(node.value)
        if single and isinstance(node.targets[0].target, cst.Name) and self._is_cpu(node.value) \
                and self.scope is not self.module_scope:  # (a module's `DEVICE` is a setting)
            self.scope.bind(node.targets[0].target.value, cpu=True)  # `device = "cpu"`
            return
        for target in node.targets:
            self._bind_target(target.target, on_cpu)
        if single and type(node.targets[0].target) is cst.Name and type(node.value) in (
                cst.Call, cst.IfExp):
            name = node.targets[0].target.value
            built = _built_on_cpu(node.value)
            if built is not None:
                self.scope.modules[name] = built
            if _moved(node.targets[0].target, node.value):
                self.scope.moved.add(name)
            elif _cast_of(name, node.value):
                self.scope.casts[name] = self.scope.casts.get(name, 0) + 1

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target, node.value is not None and self._on_cpu(node.value))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target)
        names = {n.value for n in descendants(node.target) if type(n) is cst.Name}
        if len(names) > 1:
            for name in names:
                self.scope.batches[name] = frozenset(names - {name})

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:  # with/except/import `as` names
        self._bind_target(node.name)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.module_scope.escaped.add(item.name.value)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            for scope in self._stack:
                scope.escaped.add(item.name.value)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            if isinstance(item.item, cst.Call) and self.is_name(item.item.func, "torch.device"):
                self.device_blocks.append(id(node))

    def leave_With(self, original_node: cst.With) -> None:
        while id(original_node) in self.device_blocks:
            self.device_blocks.remove(id(original_node))

    # -- what was created on the CPU --------------------------------------------
    def _factory(self, call: cst.Call) -> tuple[str, str] | None:
        """("torch" | "like" | "new" | "legacy" | "cpu", name) for a call creating a tensor."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in NEW:
            return ("new", func.attr.value) if not isinstance(func.value, cst.Subscript) else None
        if isinstance(func, cst.Attribute) and func.attr.value == "cpu" and not call.args:
            return "cpu", "cpu"
        qualified = self.qualified_name(func)
        if qualified is None or not qualified.startswith("torch."):
            return None
        name = qualified[len("torch."):]
        if name in FACTORIES:
            return "torch", name
        if name in LIKE:
            return "like", name
        if name in LEGACY:
            return "legacy", name
        if name == "from_numpy":
            return "cpu", name
        return None

    def _creates_on_cpu(self, chain: Chain) -> tuple[str, str] | None:
        """The factory of `chain` when it certainly creates on the CPU (a `*_like`
        or `new_*` source that is a plain name is left to the caller)."""
        if self.device_blocks or self.default_changed:
            return None
        factory = chain.factory
        if type(factory.func) in (cst.Call, cst.Subscript):
            return None
        kind = self._factory(factory)
        if kind is None:
            return None
        if keyword(factory, "device") or keyword(factory, "out") or any(
                a.star == "**" for a in factory.args):
            return None
        if kind[0] == "legacy" and not literal_legacy(factory):
            return None
        return kind

    def _source(self, factory: cst.Call, kind: str) -> cst.BaseExpression | None:
        """The tensor whose device a `*_like` factory or `new_*` method creates on."""
        if kind == "new":
            assert isinstance(factory.func, cst.Attribute)
            return factory.func.value
        arg = argument(factory, "input", 0)
        return None if arg is None else arg.value

    def _on_cpu(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is certainly a tensor created on the CPU (not through a name)."""
        chain = unwind(expr, self.qualified_name)
        if chain is None:
            return False
        kind = self._creates_on_cpu(chain)
        if kind is None:
            return False
        if kind[0] in ("like", "new"):
            source = self._source(chain.factory, kind[0])
            return source is not None and self._on_cpu(source)
        return True

    # -- the moves ------------------------------------------------------------------
    # after the block, when the imports in it (and above) resolve
    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._next_statement(original_node.body)

    def _next_statement(self, body) -> None:
        """`x = torch.zeros(n)` and then `x = x.cuda()` (or `if c: x = x.cuda()`): the
        move right after the creation (items set in between, `x[0] = 1`, and casts or
        views in the move, `x = x.long().cuda()`, allowed), also of tensors created
        one after another and then moved together (`a = torch.zeros(n)`, `b =
        torch.ones(n)`, then `a = a.cuda()`, `b = b.cuda()`, or both in one `if c:`).
        Reported without a fix (the move may be conditional)."""
        all_moves = [_moves(statement) for statement in body]
        if not any(all_moves):
            return
        created: dict[str, Chain] = {}  # the names the statements just above create
        moving = False  # the statement before moved some of them
        for statement, moves in zip(body, all_moves):
            if moves:
                for name, move in moves:
                    if created.pop(name, None) is None:
                        continue
                    target = self._move(move, move.func.attr.value == "cuda")
                    if target is not None:
                        self.findings.append(_Finding(move, None, Safety.SAFE, message=(
                            "Tensor created on the CPU just before, then moved; create it "
                            "with `device=` instead"), scope=self.scope, host=_host(target[0])))
                moving = True
                continue
            if moving:  # a new run of creations starts after the moves
                created.clear()
                moving = False
            if _fills(statement, created):
                continue
            assigned = _assignment(statement)
            chain = unwind(assigned[1], self.qualified_name) if assigned is not None else None
            if chain is None or not self._created_on_cpu(chain):
                created.clear()
                continue
            created[assigned[0]] = chain

    def _created_on_cpu(self, chain: Chain) -> bool:
        """A torch factory or legacy constructor that makes the tensor on the CPU
        (not drawn from an explicit generator, nor mixed with a 0-dim name)."""
        kind = self._creates_on_cpu(chain)
        if kind is None or kind[0] not in ("torch", "legacy") or _scalar_mix(chain, kind[1]) \
                or _copies_data(chain, kind):
            return False
        return not (kind[1] in RANDOM and keyword(chain.factory, "generator"))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            return
        if type(func.value) is cst.Name:  # `model.to(device)`: a module moves in place
            self.moved_anywhere.add(func.value.value)
        chain = unwind(func.value, self.qualified_name)
        if chain is None:
            return
        kind = self._creates_on_cpu(chain)
        if kind is None:
            return
        factory = chain.factory
        group, name = kind
        if group == "cpu":
            return  # `torch.from_numpy(a).to(device)`, `x.cpu().to(device)`: no factory to fix
        if _copies_data(chain, kind):
            return  # `torch.tensor(data).to(device)`: what `device=` would do anyway
        if _scalar_mix(chain, name):
            return
        if name in RANDOM and keyword(factory, "generator"):
            return  # a seeded CPU generator: drawn on the CPU on purpose, for reproducibility
        move = self._move(node, func.attr.value == "cuda")
        if move is None:
            return
        source_name = None
        if group in ("like", "new"):
            source = self._source(factory, group)
            if isinstance(source, cst.Name):
                source_name = source.value
            elif source is None or not self._on_cpu(source):
                return
        device, dtype, fixable = move
        replacement, safety, imports = None, Safety.SAFE, ()
        if fixable and group != "legacy" and not keyword(factory, "pin_memory") \
                and not keyword(factory, "memory_format"):
            fixed = on_device(chain, name, device, dtype)
            if fixed is not None and (requires_grad(factory) or any(
                    op.kind == "grad" for op in chain.ops)) and self._written_in_place(node):
                fixed = None  # a leaf that requires grad would refuse the in-place write
            if fixed is not None:
                replacement, safety, spelled = fixed
                if node.lpar or not isinstance(replacement, cst.BinaryOperation):
                    # (arithmetic keeps its own parentheses: `(t * 2).to(d).sum()`)
                    replacement = replacement.with_changes(lpar=node.lpar, rpar=node.rpar)
                imports = ("import torch",) if spelled else ()
        self.findings.append(_Finding(node, replacement, safety, source_name, self.scope,
                                      imports=imports, host=_host(device)))

    def _unmoved_class(self, name: str) -> bool:
        """A class the file defines (once), whose code never names `cuda`."""
        found = self.local_classes.get(name, [])
        return len(found) == 1 and "cuda" not in cst.Module([]).code_for_node(found[0])

    def _written_in_place(self, move: cst.Call) -> bool:
        """Whether the name the moved tensor is assigned to (`self.context`) is written
        in place somewhere in the file (`context[:] = 0`, `context += d`,
        `context.zero_()`): the moved copy is no leaf, and allows that."""
        target = self.targets.get(id(move))
        name = last_name(target) if target is not None else ""
        if not name:
            return False
        item = r"(?:\s*\[[^\]\n]*\])"
        return code_matches(re.compile(rf"\b{re.escape(name)}(?:{item}\s*=(?!=)|{item}?\s*"
                                       rf"[-+*/%@&|^]=|{item}?\.[a-z]\w*[a-z0-9]_\()"),
                            self.context.source)

    def leave_Module(self, original_node: cst.Module) -> None:
        self._next_statement(original_node.body)
        for found in self.findings:
            if found.source is not None and not (found.scope and found.scope.on_cpu(found.source)):
                continue
            if found.host is not None and found.scope and (found.scope.host_batch(found.host) or (
                    found.host not in self.moved_anywhere
                    and found.scope.host_module(found.host, self._unmoved_class))):
                continue  # `.to(y.device)` where `y` is a batch the loop keeps on the host,
                # or a model built on the CPU and never moved
            if found.replacement is None:
                self.report(found.node, message=found.message)
            else:
                self.report(found.node, replacement=found.replacement, safety=found.safety,
                            imports=found.imports)

    def _move(self, node: cst.Call, cuda: bool):
        """(device expression, dtype expression or None, fixable) for a move to a
        device other than the CPU, or None."""
        args = node.args
        if has_star_args(node):
            return None
        known = {"device", "dtype", *_DROPPED} if not cuda else {"device", *_DROPPED}
        if any(a.keyword is not None and a.keyword.value not in known for a in args):
            return None  # memory_format=, unknown keywords: leave it alone
        plain = [a for a in args if a.keyword is None]
        if cuda:
            if len(plain) > 2:  # `.cuda(device, non_blocking)`
                return None
            target = plain[0] if plain else keyword(node, "device")
            if target is None:
                return cst.SimpleString('"cuda"'), None, True
            value = target.value
            if isinstance(value, cst.Integer):
                return cst.SimpleString(f'"cuda:{value.evaluated_value}"'), None, True
            return value, None, device_string(value)
        device = argument(node, "device", 0)
        if device is None or not self._is_device(device.value) or self._is_cpu(device.value):
            return None
        dtype = argument(node, "dtype", 1)
        if len(plain) > 2:
            return None
        return device.value, dtype.value if dtype is not None else None, True

    def _is_cpu(self, node: cst.BaseExpression) -> bool:
        """`"cpu"`, `"cpu:0"`, `torch.device("cpu")`, a name bound once to one of
        those: where factories create anyway."""
        if type(node) is cst.Name and self.scope.cpu_device(node.value):
            return True
        if isinstance(node, cst.Call) and self.is_name(node.func, "torch.device"):
            first = positional(node, 0) or keyword(node, "type")
            return first is not None and is_cpu_string(first.value)
        return is_cpu_string(node)

    def _is_device(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.SimpleString):
            return device_string(node)
        if isinstance(node, cst.FormattedString):
            head = node.parts[0] if node.parts else None
            return isinstance(head, cst.FormattedStringText) and bool(
                re.match(r"(cuda|mps|xpu|npu|hpu)(:|$)", head.value))
        if isinstance(node, cst.Call) and self.is_name(node.func, "torch.device"):
            return True
        return named_like_device(node)


IN_PLACE_FILLS = frozenset(f for f in FILLS | RANDOM_FILLS if f.endswith("_"))


def _target_and_value(statement: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(target, value) of `target = value` as a statement of its own."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        return small.targets[0].target, small.value
    return None


def _assignment(statement: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """`name = value` as a statement of its own."""
    assigned = _target_and_value(statement)
    if assigned is None or not isinstance(assigned[0], cst.Name):
        return None
    return assigned[0].value, assigned[1]


def _moves(statement: cst.CSTNode) -> list[tuple[str, cst.Call]]:
    """(name, call) of `name = name.cuda()` / `name = name.to(device)`: the
    statement itself, or every statement of an `if` without `else` when each is
    such a move; [] otherwise."""
    if type(statement) is cst.If and statement.orelse is None:
        block = statement.body
        lines = block.body if isinstance(block, cst.IndentedBlock) \
            else [cst.SimpleStatementLine(body=block.body)]
        moves = [_move_of(line) for line in lines]
        return [m for line_moves in moves for m in line_moves] if all(moves) else []
    return _move_of(statement)


def _move_of(statement: cst.CSTNode) -> list[tuple[str, cst.Call]]:
    """`x = x.cuda()`, `x = x.to(device)`, also with casts and views of `x`
    (`x = x.long().to(device)`, `x = x.to(device).float()`), and several at once (`x, z = x.cuda(),
    z.cuda()`); [] for anything else."""
    assigned = _target_and_value(statement)
    if assigned is None:
        return []
    moves = [_moved(name, value) for name, value in assigned_pairs(*assigned)]
    return moves if all(moves) else []  # type: ignore[return-value]


def _built_on_cpu(value: cst.BaseExpression) -> tuple[str, bool] | None:
    """(the class, whether the chain moves it to the CPU) for `Net(...)`, also
    followed by `.to("cpu")`, `.cpu()`, `.eval()`: a class (a capitalised name)
    built where its parameters start, on the CPU, given nothing that names a
    device; else None."""
    to_cpu = False
    while type(value) is cst.Call and type(value.func) is cst.Attribute and (
            value.func.attr.value in ("cpu", "eval", "train", "float", "double")
            or value.func.attr.value == "to" and len(value.args) == 1
            and is_cpu_string(value.args[0].value)):
        to_cpu |= value.func.attr.value in ("cpu", "to")
        value = value.func.value
    if not (type(value) is cst.Call and type(value.func) in (cst.Name, cst.Attribute)):
        return None
    name = last_name(value.func)
    if not name[:1].isupper() or has_star_args(value) or any(
            _ON_DEVICE.search(cst.Module([]).code_for_node(a.value)) for a in value.args):
        return None
    return name, to_cpu


def _host(device: cst.BaseExpression) -> str | None:
    """`y` of the device `y.device`."""
    if type(device) is cst.Attribute and device.attr.value == "device" \
            and type(device.value) is cst.Name:
        return device.value.value
    return None


def _cast_or_view(node: cst.BaseExpression) -> bool:
    """`t.float()`, `t.view(n)`: a method call that casts or views its receiver."""
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and (node.func.attr.value in CASTS or node.func.attr.value in VIEWS))


def _under_casts(node: cst.BaseExpression) -> cst.BaseExpression:
    """`x` of `x.long().view(n)`: the receiver under casts and views."""
    while _cast_or_view(node):
        node = node.func.value
    return node


def _cast_of(name: str, value: cst.BaseExpression) -> bool:
    """`x.float()`, `x.long().view(n)`: casts and views of the name `x`."""
    under = _under_casts(value)
    return under is not value and type(under) is cst.Name and under.value == name


def _moved(target: cst.BaseExpression, value: cst.BaseExpression) -> tuple[str, cst.Call] | None:
    """(name, move) when `value` moves the name `target` (through casts and views,
    before or after the move: `x.long().cuda()`, `x.to(device).float()`; also
    `x.cuda() if t.is_cuda else x`)."""
    if isinstance(value, cst.IfExp):
        kept = [isinstance(v, cst.Name) and v.deep_equals(target) for v in (value.body, value.orelse)]
        if kept.count(True) != 1:
            return None
        value = value.orelse if kept[0] else value.body
    while _cast_or_view(value) and isinstance(value.func.value, cst.Call):
        value = value.func.value
    if not (isinstance(target, cst.Name) and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("cuda", "to")):
        return None
    moved = _under_casts(value.func.value)
    return (target.value, value) if isinstance(moved, cst.Name) and moved.value == target.value \
        else None


def _fills(statement: cst.CSTNode, names: dict[str, Chain]) -> bool:
    """`x[0, 0] = 0`: items of a tensor just created set to a number or a name
    (`math.inf`), at an index without calls: the same on either device; or the
    tensor filled in place, `x.normal_(0, 1)` (the move is reported without a fix)."""
    if (type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
            and type(statement.body[0]) is cst.Expr):
        call = statement.body[0].value
        return (type(call) is cst.Call and type(call.func) is cst.Attribute
                and type(call.func.value) is cst.Name and call.func.value.value in names
                and call.func.attr.value in IN_PLACE_FILLS)
    assigned = _target_and_value(statement)
    if assigned is None:
        return False
    target, value = assigned
    if isinstance(value, cst.UnaryOperation):
        value = value.expression
    return (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name)
            and target.value.value in names
            and isinstance(value, (cst.Integer, cst.Float, cst.Name, cst.Attribute))
            and not any(type(n) is cst.Call for n in descendants(target)))
