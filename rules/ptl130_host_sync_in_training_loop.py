"""PTL130 host-sync-in-training-loop."""
from __future__ import annotations

import bisect
import re
from functools import cached_property

import libcst as cst

from ptlint.analysis.dataflow import (Assignment, assignments, closure, key_of, sync_method,
                                     last_name, loss_keys, value_keys)
from ptlint.analysis.semantic import BACKWARD, STEP, Function, Loop
from ptlint.analysis.walk import descendants
from ptlint.fixers.arguments import argument
from ptlint.io.ipython import lines_of
from ptlint.rule import Rule, code_matches
from ptlint.rules._tests import is_test_file

_BUILTINS = {"builtins.print": "print", "builtins.float": "float", "builtins.int": "int",
             "builtins.bool": "bool", "builtins.str": "str"}
_STRINGS = (cst.SimpleString, cst.ConcatenatedString)
# checks whose result an `if` or `assert` turns into a Python bool, on the host
_CHECKS = frozenset({"torch.isnan", "torch.isinf", "torch.isfinite", "torch.isposinf",
                     "torch.isneginf"})
_CHECK_METHODS = frozenset(name.rpartition(".")[2] for name in _CHECKS)
_DEVICE_HINT = re.compile(r"cuda|\bdevice\b|[A-Za-z0-9]_device\b|accelerator|\bfabric\b")
# seeds the GPU if any, or asks whether there is one: uses none
_SEEDING = re.compile(r"\bcuda\.(?:manual_seed(?:_all)?\b|is_available\(\))")
# `device=values.device`, `.to(x.device)`: follows a tensor's device, names none
_FOLLOWS = re.compile(r"\bdevice\s*=\s*(?!(?:self|args|cfg|config|opt|opts|hparams|params)\.)"
                      r"[A-Za-z_]\w*\.device\b|\.to\(\s*(?!(?:self|args|cfg|config|opt|opts|"
                      r"hparams|params)\.)[A-Za-z_]\w*\.device\s*\)")
_PARTIAL_LOSS = re.compile(r"loss", re.I)  # `d_real_loss`, `loss_G`, `losses`
_NOT_A_LOSS = re.compile(r"weight|scale|fn|func|mask|factor|coef|config|type|lambda", re.I)


def _mentions_device(code: str) -> bool:
    """Whether the code, not its comments, mentions cuda, a device or an accelerator
    (`# model.cuda()  # uncomment for the GPU` runs on the CPU), other than to seed
    it (`torch.cuda.manual_seed_all(0)`), to ask for one (`torch.cuda.is_available()`)
    or to follow a tensor's device
    (`torch.zeros(1, device=values.device)`)."""
    return code_matches(_DEVICE_HINT, _FOLLOWS.sub("", _SEEDING.sub("seed", code)))


def _has_sync_inside(node: cst.BaseExpression) -> bool:
    """Whether a receiver chain already holds `.cpu()`/`.item()`/…: report the first only."""
    while True:
        if isinstance(node, cst.Call):
            func = node.func
            if sync_method(node):
                return True
            node = func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False


def _printed_keys(call: cst.Call) -> set[str]:
    """Keys of tensors passed as such (not through `.item()`) to print/float/…."""
    values = []
    for arg in call.args:
        if isinstance(arg.value, cst.FormattedString):
            values += _formatted(arg.value)
        else:
            values.append(arg.value)
    return _keys(values)


def _formatted(text: cst.FormattedString) -> list[cst.BaseExpression]:
    return [part.expression for part in text.parts
            if isinstance(part, cst.FormattedStringExpression)]


def _keys(values: list[cst.BaseExpression]) -> set[str]:
    return {key_of(value) for value in values} - {None}


class HostSyncInTrainingLoop(Rule):
    """
    ## What it does
    Flags `.item()`, `.cpu()`, `.to("cpu")`, `.numpy()` and `.tolist()`
    applied, on every step, to the loss or to values computed from the
    model's outputs inside a training loop (a loop that calls `.backward()`
    and an optimizer step), and
    `print(loss)`, `float(loss)`, `int(loss)`, `bool(loss)`, `str(loss)` and
    formatting of the loss itself (the tensor `.backward()` is called on, or
    that apex scales in `with amp.scale_loss(loss, opt) as s: s.backward()`:
    `f"{loss:.3f}"`, `"%.3f" % loss`, `"{}".format(loss)`, wherever the text
    goes, a progress bar as much as `print`) or TensorBoard's
    `writer.add_scalar("loss", loss, step)` (or `add_scalars` with the loss
    in its dictionary), which copies it to the host,
    and `if` or `assert` on a
    check of such a value (`if torch.isnan(loss):`, `if not
    torch.isfinite(out).all():`, `assert not loss.isinf()`): deciding reads
    the check's result on the host.

    Only the hot loop counts: the loop that itself calls `.backward()` or the
    optimizer step. Calls under a schedule-like `if` in that loop
    (`if step % log_every == 0:`, not a bare `if step % k:`, which holds on
    all steps but one in `k`; `if i == len(loader) - 1:`,
    `if args.verbose:`, `if regularize:` after `regularize = i % k == 0` in
    the loop, and `and`/`or` of such flags: `if early or late:`; but not a
    test without `%` whose branch holds the backward call too, which picks a
    mode, `if is_train == 0:`, and runs on every step), under a
    process guard (`if rank == 0:`,
    `if is_main_process():`), in `except` handlers and in an `if` that leaves
    the loop (its body ends in `break`, `return`, `raise` or `sys.exit(...)`:
    it runs once at most) are not flagged, nor is a read in a branch of an
    `if` whose test already read the same value on the host, before any
    backward pass or step in that branch (`if loss.item() < limit: ...
    else: print(loss.item())`), nor, in a loop that calls
    `torch.cuda.synchronize()` on every step (a statement in its body,
    directly or under `if torch.cuda.is_available():`), reads after the
    backward pass and the optimizer step or after the synchronize: the
    step waits for the device there anyway (a read before the backward pass
    still stalls the step in the middle), nor reads after a call (a statement
    before, in the same block, with no backward pass or step in between) of a
    helper of the file that trains and then reads a value on the host in a
    statement of its body that always runs (new priorities of a replay
    buffer: `memory.update(td.detach().cpu().numpy())`), nor
    are values that do not come from the loss or the outputs (the batch
    itself, hyper-parameters). A name holds what the loop body assigned to
    it before the read: the batch read on the host before the body moves it
    to the device is not an output. A call of a helper defined in the same
    file that runs the backward pass or the step counts as one; what every
    `return` of it gives as a host value (`loss.cpu().numpy()`, `x.item()`,
    arithmetic of those: `new_loss - old_loss` of two such) is not an output.
    Files whose code (comments aside) never mentions `cuda`, a `device`
    (also `default_device()`, `self.target_device`) or an accelerator but to
    seed it (`torch.cuda.manual_seed_all(0)`), to ask whether there is one
    (`torch.cuda.is_available()`) or to follow a tensor's
    (`torch.zeros(1, device=values.device)`), and trainer
    classes that do not (when the file's top-level code does not either), are
    skipped: on the CPU these calls are cheap; so are test files, which run a
    few steps. In a notebook, whose cells run
    in order, the cells that count are those up to the one holding the loop
    (or its function), and the later cells that call that function.

    ## Why is this bad?
    CUDA kernels run asynchronously: the Python loop normally queues the next
    step's work while the GPU is still busy with this one. Reading a tensor's
    value on the host (`.item()`, `.cpu()`, `.tolist()`, `float(t)`, printing
    it) blocks until every queued kernel has finished, so the CPU and the GPU
    take turns instead of overlapping, on every single step. Accumulate on
    the device (`running += loss.detach()`) and read the value only when you
    log.

    This rule is off by default: per-step logging is sometimes a deliberate
    trade, and the cost depends on how long a step is.

    ## Example
    ```python
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    ```

    Use instead:
    ```python
    running_loss = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_loss += loss.detach()
        if step % log_every == 0:
            print(running_loss.item() / (step + 1))
    ```

    ## References
    - [Performance Tuning Guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    - [CUDA semantics: asynchronous execution](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    """

    code = "PTL130"
    message = "`.item()` in the training loop waits for the device on every step"
    default_enabled = False
    tags = ("performance",)
    requires_text = ("backward",)
    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.calls = []
        self.printed: set[int] = set()  # f-strings given to print() and co., reported there
        self.mentions: dict[object, bool] = {}  # does this code name a device? (_on_device)

    def visit_Call(self, node: cst.Call) -> None:
        if self.model.here.loop is None:
            return
        func = node.func
        method = sync_method(node)
        if method:
            if (method == "item" and node.args) or _has_sync_inside(func.value):
                return
            keys = value_keys(func.value, self.qualified_name, stop_at_host=True)
            label = f".{method}()" if method != "to" else (
                f".to({cst.Module([]).code_for_node(node.args[0])})")
            self.calls.append((self.model.site(node), label, keys, False))
            return
        builtin = _BUILTINS.get(self.qualified_name(func) or "")
        if builtin is not None:
            self.calls.append((self.model.site(node), f"{builtin}()", _printed_keys(node), True))
            self.printed.update(id(arg.value) for arg in node.args)
        elif type(func) is cst.Attribute and func.attr.value == "format" and \
                isinstance(func.value, _STRINGS):  # `"{:.3f}".format(loss)`
            self.calls.append((self.model.site(node), "str.format()",
                               _keys([arg.value for arg in node.args]), True))
        elif type(func) is cst.Attribute and func.attr.value == "add_scalar":
            value = argument(node, "scalar_value", 1)
            if value is not None:  # TensorBoard's `writer.add_scalar("loss", loss, step)`
                self.calls.append((self.model.site(node), "add_scalar()", _keys([value.value]),
                                   True))
        elif type(func) is cst.Attribute and func.attr.value == "add_scalars":
            values = argument(node, "tag_scalar_dict", 1)  # `{"train": loss, ...}`
            if values is not None and isinstance(values.value, cst.Dict):
                self.calls.append((self.model.site(node), "add_scalars()", _keys(
                    [e.value for e in values.value.elements if isinstance(e, cst.DictElement)]),
                    True))

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        """`pbar.set_description(f"{loss:.3f}")`: formatting a tensor reads it."""
        if self.model.here.loop is not None and id(node) not in self.printed:
            self.calls.append((self.model.site(node), "f-string", _keys(_formatted(node)), True))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """`"%.3f" % loss`, `"%d/%f" % (step, loss)`."""
        if self.model.here.loop is None or type(node.operator) is not cst.Modulo or \
                not isinstance(node.left, _STRINGS):
            return
        right = node.right
        values = [e.value for e in right.elements] if type(right) is cst.Tuple else [right]
        self.calls.append((self.model.site(node), "%-formatting", _keys(values), True))

    def visit_If(self, node: cst.If) -> None:
        self._tested(node.test, "if {}:")

    def visit_Assert(self, node: cst.Assert) -> None:
        self._tested(node.test, "assert {}")

    def _tested(self, test: cst.BaseExpression, statement: str) -> None:
        """`if torch.isnan(loss):`, `assert not loss.isinf().any()`: the check's
        result is read on the host to decide."""
        if self.model.here.loop is None:
            return
        check = test
        if type(check) is cst.UnaryOperation and type(check.operator) is cst.Not:
            check = check.expression
        if type(check) is cst.Call and type(check.func) is cst.Attribute and \
                check.func.attr.value in ("any", "all") and not check.args:
            check = check.func.value  # `torch.isnan(loss).any()`
        if type(check) is not cst.Call:
            return
        func = check.func
        if type(func) is cst.Attribute and func.attr.value in _CHECK_METHODS and not check.args:
            tensor = func.value  # `loss.isnan()`
        elif check.args and self.qualified_name(func) in _CHECKS:
            tensor = check.args[0].value
        else:
            return
        keys = value_keys(tensor, self.qualified_name, stop_at_host=True)
        what = statement.format(cst.Module([]).code_for_node(test))
        self.calls.append((self.model.site(test), what, keys, False))

    def leave_Module(self, node: cst.Module) -> None:
        if is_test_file(self.context.path, self.context.source):
            return  # a test runs a few steps
        tainted: dict[Loop, _Taint] = {}
        for site, what, keys, loss_only in self.calls:
            hot = site.ctx.hot_loop()
            if (hot is None or site.periodic_within(hot)
                    or not self._on_device(hot.function, hot.node)):
                continue
            if hot not in tainted:
                tainted[hot] = _Taint(hot)
            taint = tainted[hot]
            if taint.quiet_from is not None and taint.where(site.node) > taint.quiet_from:
                continue  # the step waits for the device anyway: no extra wait
            if taint.reaches(site.node, keys, loss_only) and not _read_by_the_test(
                    site, hot, keys) and not taint.after_synced_helper(site.node):
                of = " of a tensor" if loss_only else ""
                self.report(site.node, message=(
                    f"`{what}`{of} in the training loop waits for the device on every step"))

    def _on_device(self, function: Function, loop: cst.CSTNode) -> bool:
        """Whether the file mentions a device; for a loop in a class (a trainer),
        whether that class or the file's top-level code does; in a notebook, see
        `_in_cells`."""
        chain = list(function.outward())
        trainers = [f.node for f in chain if type(f.node) is cst.ClassDef]
        if not trainers and self.context.cells:
            return self._in_cells(chain, loop)
        if not trainers:
            return self._once("file", lambda: _mentions_device(self.context.source))
        code = chain[-1].node.code_for_node
        return self._once("top", lambda: any(
            _mentions_device(code(s)) for s in chain[-1].node.body
            if not isinstance(s, (cst.FunctionDef, cst.ClassDef)))) or self._once(
            id(trainers[-1]), lambda: _mentions_device(code(trainers[-1])))

    def _in_cells(self, chain: list[Function], loop: cst.CSTNode) -> bool:
        """In a notebook, whose cells run in order: whether the cells up to the
        one holding the loop (or the function around it) mention a device, or a
        later cell that calls that function does (before a cell defines it anew)."""
        outer = chain[-2].node if len(chain) > 1 else loop
        texts, first = self._cell_texts, self._cell_of(chain[-1].node, outer)

        def mentions(k: int) -> bool:
            return self._once(("cell", k), lambda: _mentions_device(texts[k]))

        if any(mentions(k) for k in range(first + 1)):
            return True
        if type(outer) is not cst.FunctionDef:
            return False
        name = re.escape(outer.name.value)
        called, defined = re.compile(rf"\b{name}\s*\("), re.compile(rf"(?m)^def\s+{name}\b")
        for k in range(first + 1, len(texts)):
            if defined.search(texts[k]):  # the cells from here on call the new definition
                return False
            if code_matches(called, texts[k]) and mentions(k):
                return True
        return False

    @cached_property
    def _cell_texts(self) -> list[str]:
        starts = self.context.cells
        lines = lines_of(self.context.source)  # as the cells were counted
        return ["".join(lines[a - 1:b - 1])
                for a, b in zip(starts, [*starts[1:], len(lines) + 1])]

    def _cell_of(self, module: cst.Module, node: cst.CSTNode) -> int:
        """The cell of the top-level statement that holds `node` (the last cell
        when none is found)."""
        line = 1 + len(module.header)
        for statement in module.body:
            if statement is node or any(n is node for n in descendants(statement)):
                start = line + len(statement.leading_lines)
                return bisect.bisect_right(self.context.cells, start) - 1
            line += len(lines_of(module.code_for_node(statement)))
        return len(self.context.cells) - 1

    def _once(self, key: object, answer) -> bool:
        """`answer()`, asked once per file for each key (the file, its top level, a class)."""
        if key not in self.mentions:
            self.mentions[key] = answer()
        return self.mentions[key]


_SYNCHRONIZE = frozenset({"torch.cuda.synchronize", "torch.accelerator.synchronize",
                          "torch.mps.synchronize", "torch.xpu.synchronize"})


class _Taint:
    """What a hot loop's values come from. Each assignment of the loop body
    makes new versions `k@i` of the keys it assigns; a read sees the versions
    assigned before it in the body or, for a key not yet assigned in this
    iteration, every version (from the iteration before)."""

    def __init__(self, hot: Loop) -> None:
        self.hot, self.events = hot, hot.events
        self.at = {id(node): i for i, (_, node, _) in enumerate(self.events)}
        self.assigns = assignments(self.events, hot.function.resolve)
        self.versions: dict[str, list[tuple[int, str]]] = {}
        for i, a in enumerate(self.assigns):
            for k in a.targets:
                self.versions.setdefault(k, []).append((a.at, f"{k}@{i}"))
        for i, a in enumerate(self.assigns):
            a.reads, a.receivers = self.seen(a.reads, a.at), self.seen(a.receivers, a.at)
            a.targets = {f"{k}@{i}" for k in a.targets}
        self.outputs, self.losses = self._tainted()
        self.keys = {found: {k.partition("@")[0] for k in getattr(self, found)}
                     for found in ("outputs", "losses")}

    def reaches(self, node: cst.CSTNode, keys: set[str], loss_only: bool) -> bool:
        """Whether `keys`, read at `node`, hold the loss (`loss_only`) or an output."""
        found = "losses" if loss_only else "outputs"
        return bool(keys & self.keys[found]) and bool(
            self.seen(keys, self.where(node)) & getattr(self, found))

    def seen(self, keys: set[str], at: int) -> set[str]:
        """The versions of `keys` that a read in event `at` sees."""
        found = set()
        for k in keys:
            versions = self.versions.get(k)
            if versions is None:
                found.add(k)  # not assigned in the loop
            else:
                found.update([v for i, v in versions if i < at] or [v for _, v in versions])
        return found

    @cached_property
    def quiet_from(self) -> int | None:
        """In a loop that calls `torch.cuda.synchronize()` on every step (a
        statement in its body, directly or under `if torch.cuda.is_available():`),
        the event after which a read adds no wait: the synchronize, or the last
        backward pass or optimizer step before it (nothing big is queued after
        them). None for any other loop."""
        resolve = self.hot.function.resolve
        synced = [i for i, (kind, node, _) in enumerate(self.events)
                  if kind == "small" and type(node) is cst.Expr and type(node.value) is cst.Call
                  and resolve(node.value.func) in _SYNCHRONIZE and self._every_step(node)]
        if not synced:
            return None
        model = self.hot.function.model
        work = [self.where(site.node) for loop in self.hot.walk() for site in loop.sites
                if site.kind == BACKWARD or site.kind == STEP and model.stepped(site) is not None]
        return min(synced[0], max(work, default=synced[0]))

    def after_synced_helper(self, node: cst.CSTNode) -> bool:
        """Whether a statement before the one that holds `node`, in the same block,
        calls a helper of the file that trains and then reads a value on the host
        (`_ends_synced`), with nothing between that backpropagates or steps: once
        it returns, nothing is queued."""
        model, trains, work = self.hot.function.model, self._trainers, self._work
        path = model.path(node, self.hot.node)
        for block, inner in zip(path, path[1:]):
            if type(block) is not cst.IndentedBlock:
                continue
            before = next((block.body[:i] for i, s in enumerate(block.body) if s is inner), ())
            for statement in reversed(before):
                inside = list(descendants(statement))
                small = statement.body[0] if type(statement) is cst.SimpleStatementLine \
                    and len(statement.body) == 1 else None
                if type(getattr(small, "value", None)) is cst.Call and \
                        self._ends_synced(small.value):
                    return True
                if _trains(inside, work, trains):
                    return False
        return False

    @cached_property
    def _trainers(self) -> set[str]:
        """The functions of the file that backpropagate or step."""
        model = self.hot.function.model
        return model.helpers(BACKWARD) | model.helpers(STEP)

    @cached_property
    def _work(self) -> set[int]:
        """The backward passes and optimizer steps of the hot loop, by id."""
        model = self.hot.function.model
        return {id(site.node) for loop in self.hot.walk() for site in loop.sites
                if site.kind == BACKWARD or model.is_mark(site, STEP)}

    def _ends_synced(self, call: cst.Call) -> bool:
        """Whether `call` runs a function of the file (each of its definitions) that
        backpropagates or steps and then, in a statement of its body that runs
        whatever happened before, reads a value on the host (`p.cpu().numpy()`)."""
        model, trains = self.hot.function.model, self._trainers
        if last_name(call.func) not in trains:
            return False
        defs = model.defs_named(call.func, self.hot.function)
        for function in defs:
            if type(function.node) is not cst.FunctionDef or type(
                    function.node.body) is not cst.IndentedBlock:
                return False
            work = {id(site.node) for site in function.all_sites()
                    if site.kind == BACKWARD or model.is_mark(site, STEP)}
            synced = trained = False
            for statement in function.node.body.body:
                inside = list(descendants(statement))
                if _trains(inside, work, trains):
                    synced, trained = False, True
                elif trained and type(statement) is cst.SimpleStatementLine and any(
                        type(n) is cst.Call and sync_method(n) for n in inside):
                    synced = True
            if not synced:
                return False
        return bool(defs)

    def _every_step(self, small: cst.CSTNode) -> bool:
        """Not under an inner loop, nor under any `if` but `if torch.cuda.is_available():`."""
        path = self.hot.function.model.path(small, self.hot.node)
        resolve = self.hot.function.resolve
        return all(type(node) is not cst.If or type(node.test) is cst.Call
                   and resolve(node.test.func) == "torch.cuda.is_available"
                   for node in path[1:]) and not any(
            type(node) in (cst.For, cst.While) for node in path[1:-1])

    def where(self, node: cst.CSTNode) -> int:
        """The index of the event that holds `node`."""
        path = self.hot.function.model.path(node, self.hot.node)
        return next((self.at[id(n)] for n in reversed(path) if id(n) in self.at), 0)

    def _tainted(self) -> tuple[set[str], set[str]]:
        """Keys holding the loss or values computed from the outputs, and the
        keys of the loss itself (minus names later rebound to host values)."""
        assigns, model = self.assigns, self.hot.function.model
        losses = {k for loop in self.hot.walk() for site in loop.sites if site.kind == BACKWARD
                  for k in self.seen(loss_keys(site.node), self.where(site.node))}
        losses |= self._scaled(losses)
        steps = model.helpers(BACKWARD, per_call=True)
        host_outs: set[str] = set()  # what such a helper returns as a Python or NumPy value
        for i, (kind, node, _) in enumerate(self.events):  # `loss = train_step(batch)`
            if kind == "small" and type(node) is cst.Assign and type(node.value) is cst.Call \
                    and last_name(node.value.func) in steps:
                held = self._host_outputs(node)
                outs = {k for a in assigns if a.at == i for k in a.targets}
                host_outs |= {k for k in outs if k.partition("@")[0] in held}
                losses |= outs - host_outs
        host_names = {k.partition("@")[0] for a in assigns if a.host for k in a.targets}
        # names computed in the loop (not just the batch moved to the device)
        computed = closure({k for a in assigns if not a.move and not a.host for k in a.targets},
                           [(a.reads, a.targets) for a in assigns if a.move])
        # names computed from the batch by tensor arithmetic alone (masks, noise
        # schedules, timesteps) are inputs too, not outputs
        inputs = {k for a in assigns for k in a.targets} - computed
        grown = True
        while grown:
            grown = {k for a in assigns if not a.targets <= inputs and _from_inputs(a, inputs)
                     for k in a.targets}
            inputs |= grown
        computed -= inputs
        # the outputs: what the loss is computed from directly, and what comes out of
        # the same call (`logits, loss = model(x)`); partial losses (`d_loss = (real_loss
        # + fake_loss) / 2`, names containing "loss") are followed back the same way
        seeds = losses | {k for a in assigns if a.targets & losses and not a.host
                          for k in a.targets}
        followed = closure(seeds, [(a.targets, {r for r in a.reads & computed if _partial(r)})
                                   for a in assigns if not a.host])
        seeds |= {r for a in assigns if a.targets & followed and not a.host
                  for r in a.reads & computed}
        # and everything computed from those
        tainted = closure(seeds, [(a.reads, a.targets) for a in assigns if not a.host])
        return tainted - host_outs, {k for k in losses if k.partition("@")[0] not in host_names}

    def _host_outputs(self, assign: cst.Assign) -> set[str]:
        """The names of `a, b = step(batch)` that every `return` of the helper `step`
        gives as a host value (`x.item()`, `loss.cpu().numpy()`, arithmetic of such
        names): reading them waits for nothing."""
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if type(target) is not cst.Tuple:
            return set()
        names = [e.value.value if type(e.value) is cst.Name else None for e in target.elements]
        defs = self.hot.function.model.defs_named(assign.value.func, self.hot.function)
        held = set(range(len(names))) if defs else set()
        for function in defs:
            found = _host_returns(function.node.body, len(names))
            if found is None:
                return set()
            held &= found
        return {names[j] for j in held if names[j] is not None}


    def _scaled(self, losses: set[str]) -> set[str]:
        """The loss apex scales: `loss` of `with amp.scale_loss(loss, optimizer) as
        scaled: scaled.backward()`."""
        names = {k.partition("@")[0] for k in losses}
        found: set[str] = set()
        for node in descendants(self.hot.node):
            if type(node) is not cst.With:
                continue
            for item in node.items:
                call, bound = item.item, item.asname
                if type(call) is cst.Call and call.args and last_name(call.func) == "scale_loss" \
                        and bound is not None and key_of(bound.name) in names:
                    found |= self.seen({key_of(call.args[0].value)} - {None}, self.where(node))
        return found


def _trains(nodes: list[cst.CSTNode], work: set[int], trainers: set[str]) -> bool:
    """Whether `nodes` hold a backward pass or step (`work`, by id) or a call of a
    helper of the file that runs one."""
    return any(id(n) in work or type(n) is cst.Call and last_name(n.func) in trainers
               for n in nodes)


def _read_by_the_test(site, hot: Loop, keys: set[str]) -> bool:
    """In a branch of an `if` of the hot loop whose test already read the same value
    on the host (`if loss.item() < limit: ... else: print(loss.item())`), with no
    backward pass or optimizer step before it in that branch: nothing new to wait for."""
    path = hot.function.model.path(site.node, hot.node)
    for node, inner in zip(path, path[1:]):
        if type(node) is not cst.If or inner is node.test:
            continue
        synced = {key for call in descendants(node.test) if type(call) is cst.Call
                  and sync_method(call) for key in value_keys(call.func.value)}
        if keys & synced and not any(
                s.order < site.order and any(n is s.node for n in descendants(inner))
                for loop in hot.walk() for s in loop.sites if s.kind in (BACKWARD, STEP)):
            return True
    return False


def _host_value(value: cst.BaseExpression, hosted: set[str]) -> bool:
    """A value on the host: `x.item()`, `.tolist()`, `.numpy()`, `float(x)`, a number,
    a name in `hosted`, or arithmetic of those."""
    kind = type(value)
    if kind is cst.Call:
        func = value.func
        return (type(func) is cst.Attribute and func.attr.value in ("item", "tolist", "numpy")) \
            or (type(func) is cst.Name and func.value in ("float", "int", "bool", "round"))
    if kind is cst.BinaryOperation:
        return _host_value(value.left, hosted) and _host_value(value.right, hosted)
    if kind is cst.UnaryOperation:
        return _host_value(value.expression, hosted)
    return kind in (cst.Integer, cst.Float) or (kind is cst.Name and value.value in hosted)


def _host_returns(function: cst.CSTNode, size: int) -> set[int] | None:
    """The positions of the `size`-tuple that every `return` of `function` gives as a
    host value, each name read as its assignment just above last bound it (in the
    order of the text); None when a return gives anything but such a tuple."""
    hosted: set[str] = set()
    held = set(range(size))
    for node in descendants(function):
        kind = type(node)
        if kind is cst.Assign:
            host = _host_value(node.value, hosted)
            for t in node.targets:
                for name in descendants(t.target):
                    if type(name) is cst.Name:
                        (hosted.add if host and type(t.target) is cst.Name else
                         hosted.discard)(name.value)
        elif kind in (cst.AugAssign, cst.AnnAssign) and type(node.target) is cst.Name:
            hosted.discard(node.target.value)  # (not followed)
        elif kind is cst.Return:
            if type(node.value) is not cst.Tuple or len(node.value.elements) != size:
                return None
            held &= {j for j, e in enumerate(node.value.elements) if _host_value(e.value, hosted)}
    return held


def _partial(key: str) -> bool:
    key = key.partition("@")[0]
    return bool(_PARTIAL_LOSS.search(key)) and not _NOT_A_LOSS.search(key)


def _from_inputs(a: Assignment, inputs: set[str]) -> bool:
    """Arithmetic on inputs and on names the loop never assigns (no `@`)."""
    if a.host or not a.arithmetic:
        return False
    return a.move or a.fresh or all(r in inputs or "@" not in r for r in a.reads | a.receivers)
