"""PTL130 host-sync-in-training-loop."""
from __future__ import annotations

import re

import libcst as cst

from ptlint.analysis.dataflow import (SYNC_METHODS, Assignment, assignments, key_of, last_name,
                                     loss_keys, target_keys, value_keys)
from ptlint.analysis.semantic import BACKWARD, Function, Loop
from ptlint.rule import Rule

_BUILTINS = {"builtins.print": "print", "builtins.float": "float", "builtins.int": "int",
             "builtins.bool": "bool"}
_DEVICE_HINT = re.compile(r"cuda|\bdevice\b|accelerator|\bfabric\b")
_PARTIAL_LOSS = re.compile(r"loss", re.I)  # `d_real_loss`, `loss_G`, `losses`
_NOT_A_LOSS = re.compile(r"weight|scale|fn|func|mask|factor|coef|config|type|lambda", re.I)


def _has_sync_inside(node: cst.BaseExpression) -> bool:
    """Whether a receiver chain already holds `.cpu()`/`.item()`/…: report the first only."""
    while True:
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS:
                return True
            node = func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False


def _printed_keys(call: cst.Call) -> set[str]:
    """Keys of tensors passed as such (not through `.item()`) to print/float/…."""
    keys: set[str] = set()
    for arg in call.args:
        value = arg.value
        if isinstance(value, (cst.FormattedString,)):
            for part in value.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    key = key_of(part.expression)
                    if key is not None:
                        keys.add(key)
            continue
        key = key_of(value)
        if key is not None:
            keys.add(key)
    return keys


class HostSyncInTrainingLoop(Rule):
    """
    ## What it does
    Flags `.item()`, `.cpu()`, `.numpy()` and `.tolist()` applied, on every
    step, to the loss or to values computed from the model's outputs inside a
    training loop (a loop that calls `.backward()` and an optimizer step), and
    `print(loss)`, `float(loss)`, `int(loss)`, `bool(loss)` of the loss
    itself (the tensor `.backward()` is called on).

    Only the hot loop counts: the loop that itself calls `.backward()` or the
    optimizer step. Calls under a schedule-like `if` in that loop
    (`if step % log_every == 0:`, `if i == len(loader) - 1:`,
    `if args.verbose:`), under a process guard (`if rank == 0:`,
    `if is_main_process():`) and in `except` handlers are not flagged, nor
    are values that do not come from the loss or the outputs (the batch
    itself, hyper-parameters). A call of a helper defined in the same file
    that runs the backward pass or the step counts as one. Files that never
    mention `cuda`, a `device` or an accelerator, and trainer classes that
    do not (when the file's top-level code does not either), are skipped:
    on the CPU these calls are cheap.

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
        self.top_on_device: bool | None = None

    def visit_Call(self, node: cst.Call) -> None:
        if self.model.here.loop is None:
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS:
            if (func.attr.value == "item" and node.args) or _has_sync_inside(func.value):
                return
            keys = value_keys(func.value, self.qualified_name, stop_at_host=True)
            self.calls.append((self.model.site(node), f".{func.attr.value}()", keys, False))
            return
        builtin = _BUILTINS.get(self.qualified_name(func) or "")
        if builtin is not None:
            self.calls.append((self.model.site(node), f"{builtin}()", _printed_keys(node), True))

    def leave_Module(self, node: cst.Module) -> None:
        tainted: dict[Loop, tuple[set[str], set[str]]] = {}
        for site, what, keys, loss_only in self.calls:
            hot = site.ctx.hot_loop()
            if hot is None or site.periodic_within(hot) or not self._on_device(hot.function):
                continue
            if hot not in tainted:
                tainted[hot] = _tainted(hot)
            outputs, losses = tainted[hot]
            if keys & (losses if loss_only else outputs):
                of = " of a tensor" if loss_only else ""
                self.report(site.node, message=(
                    f"`{what}`{of} in the training loop waits for the device on every step"))

    def _on_device(self, function: Function) -> bool:
        """Whether the file mentions a device; for a loop in a class (a trainer),
        whether that class or the file's top-level code does."""
        trainer = None
        while function is not None:
            if type(function.node) is cst.ClassDef:
                trainer = function
            function = function.parent
        if trainer is None:
            return _DEVICE_HINT.search(self.context.source) is not None
        module = trainer.parent
        while module.parent is not None:
            module = module.parent
        code = module.node.code_for_node
        if self.top_on_device is None:
            self.top_on_device = any(_DEVICE_HINT.search(code(s)) for s in module.node.body
                                     if not isinstance(s, (cst.FunctionDef, cst.ClassDef)))
        return self.top_on_device or bool(_DEVICE_HINT.search(code(trainer.node)))


def _tainted(hot: Loop) -> tuple[set[str], set[str]]:
    """Keys holding the loss or values computed from the outputs, and the
    keys of the loss itself (minus names later rebound to host values)."""
    assigns = assignments(hot.events, hot.function.resolve)
    losses = {k for loop in hot.walk() for site in loop.sites if site.kind == BACKWARD
              for k in loss_keys(site.node)}
    steps = hot.function.model.helpers(BACKWARD, per_call=True)
    for kind, node, _ in hot.events:  # `loss = train_step(batch)`: a helper's loss
        if kind == "small" and type(node) is cst.Assign and type(node.value) is cst.Call \
                and last_name(node.value.func) in steps:
            losses |= {k for target in node.targets for k in target_keys(target.target)}
    host_names = {k for a in assigns if a.host for k in a.targets}
    # names computed in the loop (not just the batch moved to the device)
    computed = {k for a in assigns if not a.move and not a.host for k in a.targets}
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if a.move and a.reads & computed and not a.targets <= computed:
                computed |= a.targets
                changed = True
    # names computed from the batch by tensor arithmetic alone (masks, noise
    # schedules, timesteps) are inputs too, not outputs
    inputs = {k for a in assigns for k in a.targets} - computed
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if a.targets <= inputs or not a.arithmetic:
                continue
            if all(_from_inputs(b, inputs, assigns) for b in assigns if b.targets & a.targets):
                inputs |= a.targets
                changed = True
    computed -= inputs
    # the outputs: what the loss is computed from directly, and what comes out of
    # the same call (`logits, loss = model(x)`); partial losses (`d_loss = (real_loss
    # + fake_loss) / 2`, names containing "loss") are followed back the same way
    seeds = set(losses)
    for a in assigns:
        if a.targets & losses and not a.host:
            seeds |= a.targets
    work = list(seeds)
    followed: set[str] = set()
    while work:
        key = work.pop()
        if key in followed:
            continue
        followed.add(key)
        for a in assigns:
            if key in a.targets and not a.host:
                for read in (a.reads & computed) - seeds:
                    seeds.add(read)
                    if _PARTIAL_LOSS.search(read) and not _NOT_A_LOSS.search(read):
                        work.append(read)
    # and everything computed from those
    tainted = set(seeds)
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if not a.host and a.reads & tainted and not a.targets <= tainted:
                tainted |= a.targets
                changed = True
    return tainted, losses - host_names


def _from_inputs(a: Assignment, inputs: set[str], assigns: list[Assignment]) -> bool:
    """An assignment of arithmetic on inputs and on names the loop never assigns."""
    assigned = {k for b in assigns for k in b.targets}
    if a.host:
        return False
    if a.move or a.fresh:
        return True
    return a.arithmetic and all(r in inputs or r not in assigned for r in a.reads | a.receivers)
