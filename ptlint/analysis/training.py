"""The vocabulary of training code, for the semantic model: what a call does
(backpropagates, steps an optimizer, clears gradients), what a value holds
(a module, a loss, an optimizer, an autocast context ...), and what a `with`
item or a decorator does to gradients and autocast.

Everything here is a pure function of a node and a `resolve` callable (the
model's qualified-name lookup for the scope the node is in).
"""
from __future__ import annotations

import re

import libcst as cst

from ptlint.analysis.dataflow import FACTORIES, Resolve, last_name, method_name
from ptlint.analysis.names import dotted
from ptlint.analysis.walk import descendants

# -- what a name holds -----------------------------------------------------------
MODULE, TENSOR, LOSS, LOSS_FN, STATE_DICT = "module", "tensor", "loss", "loss function", "state dict"
OPTIMIZER, SCHEDULER, SCALER, LOADER = "optimizer", "scheduler", "scaler", "data loader"
CONTAINER, INSTANCE = "container", "instance"  # an instance of some other class
AUTOCAST, AUTOCAST_OFF, AUTOCAST_MAKER = "autocast", "disabled autocast", "autocast maker"

# grad modes: gradients off (`no_grad`), on (`enable_grad`), or off at some times
OFF, ON, MAYBE = "off", "on", "maybe"

_OPTIMIZER_NAME = re.compile(r"optim|(?:^|_)opt(?!ion)", re.I)
_SCHEDULER_NAME = re.compile(r"sched", re.I)
_NAMED = {OPTIMIZER: _OPTIMIZER_NAME, SCHEDULER: _SCHEDULER_NAME,
          SCALER: re.compile(r"scaler", re.I)}
SCALERS = frozenset({
    "torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.cpu.amp.GradScaler", "torch.cpu.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.ShardedGradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
})
# gradient clipping: what PTL020 and PTL027 look for
CLIPS = frozenset({
    "torch.nn.utils.clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_",
    "torch.nn.utils.clip_grad_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm",
    "torch.nn.utils.clip_grads_with_norm_",
    "torch.nn.utils.clip_grad.clip_grads_with_norm_",
})
# autocast(...) callables whose first positional parameter is `enabled` ...
_ENABLED_FIRST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
                            "torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast"})
# ... and those that take (device_type, dtype, enabled, ...)
_DEVICE_FIRST = frozenset({"torch.autocast", "torch.amp.autocast",
                           "torch.amp.autocast_mode.autocast"})
F_LOSSES = frozenset({"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                      "kl_div"})  # `torch.nn.functional` losses that do not end in `_loss`
# A callee named like a loss function: `criterion(...)`, `self.loss_fn(...)`.
LOSS_NAME = re.compile(
    r"(criterion\w*|\w+_criterion|loss_fn\w*|\w+_loss_fn|loss_func(tion)?|lossfn)\Z")
_CONTAINERS = frozenset({"builtins.list", "builtins.dict", "builtins.set", "builtins.tuple"})
_CONTAINER_LITERALS = (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)
_KEEP_KIND = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train",
                        "eval", "requires_grad_", "share_memory"})


def value_kind(value: cst.BaseExpression, resolve: Resolve, classes: dict) -> str | None:
    """What `value` evaluates to, where it is known; `classes` maps the names of
    the classes defined in the file to their kind (`MODULE`, `CONTAINER`, `INSTANCE`)."""
    while method_name(value) in _KEEP_KIND:
        value = value.func.value  # `nn.MSELoss().to(device)`, `Net().cuda()`
    if type(value) in _CONTAINER_LITERALS:
        return CONTAINER
    if type(value) is cst.IfExp:
        kinds = {value_kind(value.body, resolve, classes), value_kind(value.orelse, resolve, classes)}
        return AUTOCAST if kinds & {AUTOCAST, AUTOCAST_OFF} else None
    if type(value) is not cst.Call:
        return None
    func = value.func
    if type(func) not in (cst.Name, cst.Attribute):
        return LOSS if type(func) is cst.Call and value_kind(func, resolve, classes) == LOSS_FN \
            else None  # nn.MSELoss()(a, b)
    name = resolve(func) or ""
    last = last_name(func)
    if name in _ENABLED_FIRST or name in _DEVICE_FIRST:
        return AUTOCAST_OFF if autocast_enabled(value, name) is False else AUTOCAST
    if name == "functools.partial" and value.args:
        inner = resolve(value.args[0].value) or ""
        return AUTOCAST_MAKER if inner in _ENABLED_FIRST or inner in _DEVICE_FIRST else None
    if name.startswith("torch.optim.lr_scheduler.") or (
            _SCHEDULER_NAME.search(last) and not _OPTIMIZER_NAME.search(last)):
        return SCHEDULER  # `get_cosine_schedule_with_warmup(...)`, not `ScheduledOptim(...)`
    if name.startswith("torch.optim.") and not name.startswith("torch.optim.swa_utils"):
        return OPTIMIZER
    if name in SCALERS:
        return SCALER
    if name in ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"):
        return LOADER
    if name.startswith("torch.nn.functional."):
        return LOSS if last.endswith("_loss") or last in F_LOSSES else None
    if name.startswith("torch.nn.") and last[:1].isupper():
        return LOSS_FN if last.endswith("Loss") else MODULE
    if name.startswith("torchvision.models."):
        return MODULE
    if name.startswith("torch.") and last in FACTORIES:
        return TENSOR
    if name in _CONTAINERS or name.startswith("collections."):
        return CONTAINER
    if type(func) is cst.Attribute and last == "state_dict":
        return STATE_DICT
    if not name and type(func) is cst.Name and func.value in classes:
        return classes[func.value]
    if last[:1].isupper() and not name.startswith(("builtins.", "typing.", "torch.", "queue.",
                                                   "multiprocessing.", "numpy.")):
        return INSTANCE  # a class call: `AverageMeter()`, `utils.Logger(...)`
    return None


def class_kind(node: cst.ClassDef, resolve: Resolve, classes: dict) -> str:
    """`MODULE` for a subclass of `nn.Module` (or of a module class of the file),
    `CONTAINER` for a subclass of a builtin or `collections` container, else `INSTANCE`."""
    for base in node.bases:
        name = resolve(base.value) or ""
        if name in _CONTAINERS or name.startswith("collections."):
            return CONTAINER
        if name.startswith("torch.nn.") or name.endswith(("LightningModule", ".Module")):
            return MODULE
        if type(base.value) is cst.Name and classes.get(base.value.value) in (MODULE, CONTAINER):
            return classes[base.value.value]
    return INSTANCE


def autocast_enabled(call: cst.Call, name: str) -> bool | None:
    """An autocast call's literal `enabled=`: True when absent, None when not a literal."""
    at = 0 if name in _ENABLED_FIRST else 2
    positional = [a for a in call.args if a.keyword is None and not a.star]
    enabled = next((a.value for a in call.args
                    if a.keyword is not None and a.keyword.value == "enabled"), None)
    if enabled is None and len(positional) > at:
        enabled = positional[at].value
    if enabled is None:
        return True
    if type(enabled) is cst.Name and enabled.value in ("True", "False"):
        return enabled.value == "True"
    return None


# -- gradients ------------------------------------------------------------------
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
                      "torch.autograd.grad_mode.no_grad", "torch.autograd.inference_mode",
                      "torch.autograd.grad_mode.inference_mode"})
_SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                       "torch.autograd.grad_mode.set_grad_enabled"})
_ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad",
                          "torch.autograd.grad_mode.enable_grad"})


def grad_mode(expr: cst.BaseExpression, resolve: Resolve) -> str | None:
    """What a `with` item or a decorator does to gradients: `OFF` for
    `torch.no_grad()`, `torch.inference_mode()`, `set_grad_enabled(False)` and a
    project's own wrapper named like them (`@smart_inference_mode()`) or told to
    turn gradients off (`with eval_mode(model, no_grad=True)`); `ON` for
    `enable_grad()`, `set_grad_enabled(True)`; `MAYBE` for `set_grad_enabled(<condition>)`."""
    call = expr if type(expr) is cst.Call else None
    func = call.func if call is not None else expr
    last = last_name(func)
    if not last:
        return None
    if call is not None and any(
            a.keyword is not None and a.keyword.value in ("no_grad", "inference_mode")
            and type(a.value) is cst.Name and a.value.value == "True" for a in call.args) and not (
            resolve(func) or "").startswith("torch."):
        return OFF
    first = call.args[0].value if call is not None and call.args else None
    literal = first.value if type(first) is cst.Name and first.value in ("True", "False") else None
    if "no_grad" in last or "inference_mode" in last:
        name = resolve(func) or ""
        if name.startswith("torch.") and name not in _NO_GRAD:
            return None
        return None if literal == "False" else OFF  # `inference_mode(False)`
    if last == "enable_grad" and resolve(func) in _ENABLE_GRAD:
        return ON
    if last == "set_grad_enabled" and resolve(func) in _SET_GRAD and call is not None and call.args:
        return MAYBE if literal is None else (ON if literal == "True" else OFF)
    return None


# -- calls ------------------------------------------------------------------------
_CLEARING_NAME = re.compile(r"(?:zero|clear|reset)_?grad", re.I)


def on_grad(node: cst.CSTNode | None) -> bool:
    """Whether `node` is `<x>.grad` or reaches through it (`p.grad.data`, `p.grad[0]`)."""
    while type(node) in (cst.Attribute, cst.Subscript):
        if type(node) is cst.Attribute and node.attr.value == "grad":
            return True
        node = node.value
    return False


def clears_gradients(node: cst.CSTNode) -> bool:
    """`opt.zero_grad()`, `model.zero_grad()`, `zero_grad(model)`, `p.grad.zero_()`,
    `p.grad.data.fill_(0)`, `p.grad = None`, `del p.grad`."""
    if type(node) is not cst.Call:
        return type(node) is not cst.AugAssign
    name = last_name(node.func)
    return bool(_CLEARING_NAME.search(name)) or (
        name in ("zero_", "fill_") and on_grad(node.func.value))


def named_like(node: cst.BaseExpression, kind: str) -> bool:
    """Whether the last name in `node` reads like an `OPTIMIZER`, a `SCHEDULER`
    or a `SCALER` (`self.opt_G`, `lr_scheduler`, `grad_scaler`)."""
    return bool(_NAMED[kind].search(terminal(node)))


def terminal(node: cst.BaseExpression | None) -> str:
    """The last name in a reference: `self.optimizer` -> "optimizer",
    `opts[0]` -> "opts", `self.optimizers()` -> "optimizers"."""
    while type(node) in (cst.Subscript, cst.Call):
        node = node.value if type(node) is cst.Subscript else node.func
    return last_name(node) if node is not None else ""


def scaled_backward(call: cst.Call) -> str | None:
    """`S` for `S.scale(loss).backward(...)`."""
    inner = call.func.value if type(call.func) is cst.Attribute else None
    return dotted(inner.func.value) if method_name(inner) == "scale" else None


def schedule_test(test: cst.BaseExpression) -> bool:
    """Whether an `if` test looks like "only on some steps, or on one process":
    a `%`, an `==`/`!=`, or a logging-ish or process-ish name (`log_interval`,
    `verbose`, `rank`, `is_main_process`). Not a bare `i % k`, which is true on
    every step but one in `k`."""
    if type(test) is cst.BinaryOperation and type(test.operator) is cst.Modulo:
        return False
    return any(
        type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo
        or type(node) is cst.Comparison and any(
            type(c.operator) in (cst.Equal, cst.NotEqual) for c in node.comparisons)
        or type(node) is cst.Name and _SCHEDULE_NAME.search(node.value) is not None
        for node in descendants(test))


_SCHEDULE_NAME = re.compile(
    r"log|print|verbose|display|report|interval|freq|every|debug|writer|tensorboard|wandb|"
    r"visual|vis_|plot|sample|save|eval|val|test|rank|master|main_process|is_main", re.I)
