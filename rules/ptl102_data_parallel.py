"""PTL102 data-parallel."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import libcst as cst

from ptlint.analysis.contexts import EXITS
from ptlint.analysis.dataflow import last_name, never_true, target_vars
from ptlint.analysis.names import dotted, is_named
from ptlint.analysis.statements import last_statement
from ptlint.analysis.training import OFF, grad_mode
from ptlint.analysis.walk import children, descendants
from ptlint.fixers.arguments import argument, keyword
from ptlint.fixers.expressions import as_receiver
from ptlint.rule import Rule, without_comments
from ptlint.model import Safety
from ptlint.rules._tests import TracksTests

_DATA_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                  "torch.nn.parallel.data_parallel.DataParallel")
# the functional form: `nn.parallel.data_parallel(module, inputs, device_ids)`
_FUNCTIONAL = ("torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel")
# what a test of "are we distributed?" mentions
_DISTRIBUTED = re.compile(r"(?i)distributed|ddp|world_size|is_initialized|get_world_size|"
                          r"local_rank|^dist_|_dist$")  # `args.dist_train`, `use_dist`
# containers of modules, with no `forward` of their own: a wrap of one never runs
_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict",
                         "torch.nn.modules.container.ModuleList",
                         "torch.nn.modules.container.ModuleDict"})
# the base of a LightningModule (`pl.LightningModule`, `LightningEpisodicModule`)
_LIGHTNING = re.compile(r"Lightning\w*Module$")
_TEST = "torch.distributed.is_available() and torch.distributed.is_initialized()"
# methods of a wrapped model that do not run it (the wrapper's own `train(mode)`, which
# sets a mode: it never reaches a `train` method of the model inside)
_NOT_RUNNING = frozenset({"eval", "train", "load_state_dict", "state_dict", "to", "cuda", "cpu", "half",
                          "float", "double", "bfloat16", "parameters", "named_parameters",
                          "buffers", "named_buffers", "modules", "named_modules", "children",
                          "requires_grad_"})
# methods that hand out a model's parameters (to an optimizer, say)
_PARAMETERS = frozenset({"parameters", "named_parameters"})
# `for name, part in model._modules.items()`, `for part in model.children()`: parts of `model`
_PARTS = frozenset({"children", "named_children", "modules", "named_modules"})
_HARMLESS = frozenset({"print", "len", "isinstance", "type", "id", "repr", "str"})
# functions named for evaluation: `validate(cfg, loader, model)`, `evaluate_accuracy(model)`
_EVALUATES = re.compile(r"(?i)(val|valid|validate|validation|eval|evaluate|evaluation|test|"
                        r"infer|inference|predict)(_|$)")
_TRAINS = re.compile(r"backward|optim|\.step\(")  # in a file without these, nothing is trained
# a subclass named for evaluation, or for a loss (which has no parameters for DDP to
# synchronise: it refuses one)
_NOT_TRAINED = re.compile(r"Eval|Test|Infer|Predict|Criterion|Loss")
# a gradient turned back on somewhere in the file
_UNFREEZES = re.compile(r"requires_grad\s*=\s*True|requires_grad_\(\s*(?:True)?\s*\)")
# a file run as a program
_SCRIPT = re.compile(r"__name__\s*==|parse_args\(|sys\.argv")
# methods that keep what they are given, for someone else to run (`models.append(m)`)
_KEEPS = re.compile(r"(?i)append|extend|insert|add|set|put|push|store|register|wrap|prepare|"
                    r"parallel|distribut|shard|compile|build|init|load|attach")
# imported functions named for training: `train_epoch(model, ...)`, `fit(...)`, `run(...)`
_TRAINING_NAME = re.compile(r"(?i)train|fit|learn|optim|tune|step|solve|update|run|main|loop|"
                            r"epoch|engine|distil")
_IMPORT_LINE = re.compile(r"(?m)^[ \t]*(?:import|from)[ \t].*$")
# where code may run after the code that follows it
_LATER = (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef)
_TRAIN_MODE = re.compile(r"\.train\((?!\s*(?:mode\s*=\s*)?False\s*\))")  # not `.train(False)`


@dataclass
class _Wrap:
    call: cst.Call  # the `DataParallel(...)` call
    replaced: cst.BaseExpression  # what the fix replaces: the call, or `call.to(device)`
    target: str | None  # the name or attribute it is assigned to
    owner: cst.CSTNode  # where that name lives: the function, the class (`self.x`), the module
    rebuildable: bool  # a module argument and no `*args`/`**kwargs`
    on_device: bool  # the model was moved to a device before the wrap, or by a chained move
    function: cst.CSTNode  # the function (or module) it is written in
    conditional: bool  # in a branch of an `if`
    block: cst.CSTNode | None = None  # the branch it is in, if that ends the program or returns


class DataParallel(TracksTests, Rule):
    """
    ## What it does
    Flags `torch.nn.DataParallel(...)` (through any import alias) and classes
    that subclass it; also its functional form,
    `nn.parallel.data_parallel(module, inputs, device_ids)`, which replicates
    the module to the GPUs on every call (reported without a fix, where the
    exceptions below that concern the call itself leave it: a fallback
    branch, one GPU, test code, code that never runs, a LightningModule).

    Not flagged:

    - `DataParallel` as the explicit fallback where no process group exists:
      in the `else`/`elif` of an `if` whose test asks whether the run is
      distributed (`dist.is_initialized()`, `args.distributed`,
      `args.dist_train`, `world_size > 1`, `args.local_rank != -1`, ...) or whose branch wraps in
      `DistributedDataParallel` (torch's, apex's or fairscale's), in an
      `if not <that>:` branch, and in
      `DistributedDataParallel(m) if dist.is_initialized() else DataParallel(m)`,
      and in an `if` of a function that also wraps the same model in
      `DistributedDataParallel` (`if n_gpu > 1: m = DataParallel(m)` beside
      `if args.local_rank != -1: m = DistributedDataParallel(m)`);
    - `DataParallel` where it is no choice: in the `else` of
      `if torch.cuda.is_available():` and the body of
      `if not torch.cuda.is_available():`, where it runs the model as it is
      on the CPU, and under
      `if isinstance(m, DataParallel):`, which keeps the wrapper a model
      already has (the wrap that chose it is reported);
    - a model only used for inference: the file neither calls `backward` nor
      mentions an optimizer or `.step(` (imports and comments aside; an
      optimizer bound to a name never read again counts for nothing), the
      wrapped model is only run under `torch.no_grad()` /
      `torch.inference_mode()` (a block or a decorated function) or handed to
      functions that evaluate it (named for evaluation: `validate(...)`,
      `evaluate_...`, `test_...`, `predict(...)`; functions of the file
      that train nothing and put that argument in `.eval()` or only call it
      under `no_grad`: `get_logits(model, loader)`; or functions the file imports by name,
      not named for training, which get no optimizer from a file without one:
      `fill_memory_bank(loader, model, bank)`, and, there, methods of other
      objects named neither for training nor for keeping what they get:
      `layer.bounds(network=model)`) and is not returned, or it is put in
      `.eval()` (also by such a function of the file, chained to the wrap,
      `DataParallel(m).eval()`, or inside it, `DataParallel(m.eval())`, or on
      the model whose parts are wrapped in `for k, part in m._modules.items()`
      or `for part in m.children()`, or on `m` of
      `m.features = DataParallel(m.features)`) and nothing in the file calls
      `.train(` (but `.train(False)`, which is eval mode);
    - a wrapped model that only loads a checkpoint: a name of its own whose
      `load_state_dict(...)` is called and that is never called, handed on,
      returned or assigned to another (a reference model wrapped only so that
      a checkpoint saved from a wrapped model, with `module.` keys, loads),
      also when it is unwrapped right after (`model = model.module`: the
      uses after that are of the model itself);
    - a wrapper that never runs: a name of its own used through its `.module`
      (`donor.module.load_state_dict(...)`, `net.decoder = donor.module.decoder`,
      `torch.save(net.module.state_dict(), path)`, `net.module.head = nn.Identity()`)
      and otherwise only in ways
      that do not run it (`.eval()`, `.to(device)`, `.state_dict()`,
      `print(net)`, `net` alone on a notebook's line), never called, handed on,
      returned or assigned to another; and a wrap of a `ModuleList` or
      `ModuleDict`, which has no `forward` to run;
    - a wrap in a branch that ends the program (`sys.exit(...)`) or returns:
      only the branch's own uses count (`if args.test_only: net =
      DataParallel(net); test(net); sys.exit(0)` before the training code);
      and in any case a use of the name before the wrap, outside a loop or a
      function, sees the model itself (`wrapper = model` before `model =
      DataParallel(model)`);
    - in a program (a `__main__` guard, `parse_args()`, `sys.argv`) that
      trains nothing and never calls `.train(`: a wrapped model
      under a name of its own that is never returned nor handed to a callable
      named for training (`train(model)`, `Trainer(model)`), whatever else it
      meets (a checkpoint registry, `copy.deepcopy`, an evaluator); and a
      subclass named for evaluation or for a loss (`MultiEvalModule`,
      `DataParallelCriterion`: DDP refuses a module without parameters);
    - a wrap inside a LightningModule (a class whose base is named
      `LightningModule` or `Lightning...Module`): Lightning's `Trainer`
      distributes the model (`strategy="ddp"`), and a
      `DistributedDataParallel` inside would nest in its own;
    - a model not trained in a file that trains: the function that wraps it
      puts it in `.eval()`, neither trains (no `backward`, optimizer, `.step(`
      or `.train(` in it) nor returns or stores the model; or the wrapped
      model is only run under `torch.no_grad()` / `torch.inference_mode()`
      or handed to functions that evaluate it (its own `.train()` or
      `.eval()` only sets a mode), is not returned, and its
      `.parameters()` go nowhere but a `for` loop (a frozen backbone, a
      teacher): `DistributedDataParallel` is a training wrapper, and refuses
      a model none of whose parameters requires grad; so is a model put in
      `.eval()` after its wrap and move (`DataParallel(m).to(d).eval()`);
    - a model whose every parameter was frozen before the wrap (`for p in
      m.parameters(): p.requires_grad = False`, `m.requires_grad_(False)`; a
      moving average of the generator), in a file that never turns a gradient
      back on (`requires_grad = True`, `requires_grad_()`);
    - test code (test files, and `test*` functions and `Test*` classes in a
      file that uses pytest or unittest), where `DataParallel` support itself
      is what is tested;
    - code that never runs: the body of `if parallel:` where `parallel` is
      bound once, to `False` (or `None`, `0`), and used only in `if` tests;
    - a wrap over one GPU, where `DataParallel` runs the model as it is:
      `device_ids=[0]` (one device), or a file whose only setting of
      `CUDA_VISIBLE_DEVICES` makes one device visible
      (`os.environ["CUDA_VISIBLE_DEVICES"] = "0"`).

    ## Why is this bad?
    `DataParallel` runs a single process: it copies the whole model to every
    GPU on every forward pass, gathers all outputs on the first GPU and is
    bound by the GIL. It is slower than `DistributedDataParallel` even on one
    machine, and PyTorch recommends `DistributedDataParallel` instead.

    ## Example
    ```python
    import torch.nn as nn
    model = nn.DataParallel(model)
    ```

    Use instead:
    ```python
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(model) if torch.distributed.is_available() and torch.distributed.is_initialized() else nn.DataParallel(model)
    ```
    and launch the script with `torchrun --nproc_per_node=<gpus> script.py`,
    calling `torch.distributed.init_process_group()` at start-up, placing
    each process's model on `cuda:<LOCAL_RANK>` before the wrap and giving
    each process its share of the data (`DistributedSampler`).

    ## Fix safety
    Unsafe. The fix wraps the model in `DistributedDataParallel` when a
    process group is initialised and keeps the original `DataParallel` call,
    unchanged, otherwise:

    - started with plain `python`, the script runs exactly as before, on
      every GPU `DataParallel` used: the fix never makes a run use fewer
      devices;
    - checkpoints stay readable both ways: `DistributedDataParallel` also
      keeps the model as `.module`, so saved state dicts keep their
      `module.` prefix and a checkpoint written before the fix loads after
      it, in either launch mode;
    - `DistributedDataParallel` must wrap a model already on its device. A
      device move chained to the wrap moves the model first
      (`DataParallel(m).to(device)` becomes
      `DistributedDataParallel(m.to(device)) if ... else DataParallel(m).to(device)`);
      a model moved before the wrap in the same function (`m.cuda()`,
      `m = Net().to(device)`, `DataParallel(m.cuda())`) is wrapped as it is;
      a model moved only after the wrap, or whose device this function does
      not show (a parameter, a model built elsewhere), is reported without a
      fix: move it to its device before wrapping it;
    - what changes: a script that initialises a process group (launched
      with `torchrun`) now trains with `DistributedDataParallel`, which
      averages gradients across processes, expects every process to run the
      same number of steps and uses only the model's own device
      (`device_ids` and `output_device` are not passed to it); code that
      tests `isinstance(model, nn.DataParallel)` (to save `model.module`)
      takes its other branch there, and writes the `module.` prefix.

    No fix is offered in notebooks (a kernel cannot be launched with
    `torchrun`) and for calls with `**kwargs`.

    ## References
    - [DataParallel vs DistributedDataParallel](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html)
    - [CUDA semantics: use DistributedDataParallel instead of DataParallel](https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead)
    """

    code = "PTL102"
    message = "`DataParallel` is slower than `DistributedDataParallel`, even on one machine"
    fix_title = ("Use `DistributedDataParallel` when a process group is initialised, "
                 "`DataParallel` otherwise")
    fix_safety = Safety.UNSAFE
    tags = ("performance",)
    requires_text = ("DataParallel", "data_parallel")
    test_names_need_a_framework = True  # `test_step(model)` is an evaluation step

    def __init__(self, context) -> None:
        super().__init__(context)
        self.assigned: dict[int, str | None] = {}  # id(value) -> the target's name
        self.moves: dict[int, cst.Call] = {}  # id(call) -> `call.to(...)` / `call.cuda(...)`
        self.fallback = 0  # depth of branches taken only without a process group
        self.branches: list[bool] = []  # for each branch entered: is it one of those
        self.tests: list[cst.BaseExpression | None] = []  # and the test that enters it
        self.ending: list[tuple[int, cst.CSTNode] | None] = []  # see `_ending`
        self.wraps: list[_Wrap] = []
        self.functional: list[cst.Call] = []  # `nn.parallel.data_parallel(...)` calls
        self.owners: list[cst.CSTNode] = []  # module, then the enclosing classes and functions
        self.on_device: set[tuple[int, str]] = set()  # (owner, name) moved to a device so far
        self.notebook = context.path.endswith(".ipynb")  # no fix there
        # (a file that never names the class cannot wrap in it: branches need no search)
        self.names_ddp = "DistributedDataParallel" in context.source
        self.evaluated: set[str] = set()  # names put in `.eval()`
        self.evaluated_wraps: set[int] = set()  # `DataParallel(m).eval()`: id of the wrap
        self.evaluated_in: set[tuple[int, str]] = set()  # (owner, name) put in `.eval()` there
        self.ddp_wraps: set[tuple[int, str]] = set()  # (function, name) wrapped in DDP there
        self.parts: dict[tuple[int, str], str] = {}  # (owner, loop variable) -> the model it is of
        self.handed: list[tuple[str, cst.Call]] = []  # calls of named functions: (name, call)
        self.evaluators: dict[str, set[int | str]] = {}  # see `_evaluators`
        self.lent: set[str] | None = None  # see `_lent_to`; None: the file trains
        self.containers: set[tuple[int, str]] = set()  # (owner, name) bound to a ModuleList
        self.put_in_eval: dict[int, cst.Call] = {}  # id(wrap) -> `.eval()` chained to it
        # (owner, name) whose parameters were all frozen so far (see `_freezes`); none
        # when the file turns a gradient back on
        self.frozen: set[tuple[int, str]] = set()
        self.unfreezes = _UNFREEZES.search(context.source) is not None
        self.lightning: set[int] = set()  # ids of the LightningModule classes of the file
        self._by_owner: dict[int, list[tuple[str, str, bool, bool]]] = {}  # `_owner_uses`
        self._never: dict[int, set[str]] = {}  # `_never_run`, by owner

    def visit_Module(self, node: cst.Module) -> None:
        self.owners.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.owners.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(original_node)
        self.owners.pop()

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        super().leave_ClassDef(original_node)
        self.owners.pop()

    def _owner(self, target: str | None) -> cst.CSTNode:
        """Where `target` lives: `self.x` in the class, a name in the function."""
        if target is not None and target.startswith("self."):
            classes = [o for o in self.owners if isinstance(o, cst.ClassDef)]
            if classes:
                return classes[-1]
        return self.owners[-1]

    # -- where a process group cannot exist ---------------------------------------
    def _distributed(self, test: cst.BaseExpression, branch: cst.CSTNode) -> bool:
        """Whether `test` asks about a process group, or `branch` wraps in DDP."""
        for node in descendants(test):
            name = last_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
            if name is not None and _DISTRIBUTED.search(name):
                return True
        return self.names_ddp and any(
            isinstance(n, cst.Call) and self._ddp(n.func) for n in descendants(branch))

    def _ddp(self, func: cst.BaseExpression) -> bool:
        """`DistributedDataParallel` of torch, apex or fairscale, under any alias."""
        return (self.qualified_name(func) or "").rpartition(".")[2] == "DistributedDataParallel"

    def _cuda(self, test: cst.BaseExpression) -> bool:
        """Whether `test` is `torch.cuda.is_available()`."""
        return isinstance(test, cst.Call) and self.is_name(test.func, "torch.cuda.is_available")

    def _negated(self, test: cst.BaseExpression) -> bool:
        return (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
                and (self._cuda(test.expression)
                     or self._distributed(test.expression, cst.Pass())))

    def _wrapped_already(self, test: cst.BaseExpression) -> bool:
        """`isinstance(m, DataParallel)` (or a tuple of classes holding it)."""
        if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name)
                and test.func.value == "isinstance" and len(test.args) == 2):
            return False
        classes = test.args[1].value
        items = ([e.value for e in classes.elements] if isinstance(classes, cst.Tuple)
                 else [classes])
        return any(self.qualified_name(c) in _DATA_PARALLEL for c in items)

    def _enter_branch(self, node: cst.If | cst.IfExp, orelse: bool) -> None:
        """A branch where `DataParallel` is no choice: the `else` of a distributed
        test (or of a branch that wraps in DDP) or of `torch.cuda.is_available()`,
        the body of a negated one, the body of `isinstance(m, DataParallel)`."""
        if orelse:
            taken = self._cuda(node.test) or self._distributed(node.test, node.body)
        else:
            taken = self._negated(node.test) or self._wrapped_already(node.test)
        self.branches.append(taken)
        self.fallback += taken
        self.tests.append(None if orelse else node.test)

    def _leave_branch(self) -> None:
        self.fallback -= self.branches.pop()
        self.tests.pop()

    def visit_If_body(self, node: cst.If) -> None:
        self._enter_branch(node, orelse=False)
        self.ending.append(self._ending(node.body))

    def leave_If_body(self, node: cst.If) -> None:
        self._leave_branch()
        self.ending.pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self._enter_branch(node, orelse=True)
        self.ending.append(self._ending(node.orelse.body) if isinstance(node.orelse, cst.Else)
                           else None)

    def leave_If_orelse(self, node: cst.If) -> None:
        self._leave_branch()
        self.ending.pop()

    def _ending(self, block: cst.BaseSuite) -> tuple[int, cst.CSTNode] | None:
        """(the depth of `owners`, `block`) when the branch `block` ends by leaving
        the program (`sys.exit(...)`, `exit()`, `raise SystemExit`) or by `return`:
        the code after the `if` never sees what the branch binds (`if args.test_only:
        net = DataParallel(net); evaluate(net); sys.exit(0)`)."""
        if not isinstance(block, cst.IndentedBlock) or not block.body:
            return None
        small = last_statement(block)
        if isinstance(small, cst.Return):
            return len(self.owners), block
        if isinstance(small, cst.Raise) and small.exc is not None:
            raised = small.exc.func if isinstance(small.exc, cst.Call) else small.exc
            return (len(self.owners), block) if last_name(raised) == "SystemExit" else None
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and (
                self.qualified_name(small.value.func) or "").removeprefix("builtins.") in EXITS:
            return len(self.owners), block
        return None

    def visit_IfExp_body(self, node: cst.IfExp) -> None:
        self._enter_branch(node, orelse=False)

    def leave_IfExp_body(self, node: cst.IfExp) -> None:
        self._leave_branch()

    def visit_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._enter_branch(node, orelse=True)

    def leave_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._leave_branch()

    # -- the wraps ----------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        target = dotted(node.targets[0].target) if len(node.targets) == 1 else None
        self.assigned[id(node.value)] = target
        if target is not None and self._container(node.value):
            self.containers.add((id(self._owner(target)), target))

    def _container(self, expr: cst.BaseExpression) -> bool:
        """`nn.ModuleList(...)`, `nn.ModuleDict(...)`."""
        return isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)) \
            and self.qualified_name(expr.func) in _CONTAINERS

    def leave_Assign(self, original_node: cst.Assign) -> None:
        # after the value: in `m = DataParallel(m).eval().to(device)` the wrapped `m`
        # is not on a device yet
        target = self.assigned.get(id(original_node.value))
        if target is not None and _moved(original_node.value):  # `model = Net().to(device)`
            self.on_device.add((id(self._owner(target)), target))

    def visit_For(self, node: cst.For) -> None:
        """`for key, part in model._modules.items()`, `for part in model.children()`:
        wrapping `part` wraps a part of `model`. `for p in model.parameters():
        p.requires_grad = False` freezes `model`."""
        frozen = _freezes(node)
        if frozen is not None:
            self.frozen.add((id(self._owner(frozen)), frozen))
        iterated = node.iter
        if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute)):
            return
        method, whole = iterated.func.attr.value, iterated.func.value
        if method in ("items", "values") and isinstance(whole, cst.Attribute) and \
                whole.attr.value == "_modules":
            whole = whole.value
        elif method not in _PARTS:
            return
        name = dotted(whole)
        if name is not None:
            for part in target_vars(node.target):
                self.parts[(id(self.owners[-1]), part)] = name

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:  # a whole value: the fix needs no parentheses there
            self.assigned[id(node.value)] = None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        super().visit_ClassDef(node)
        self.owners.append(node)
        if any(_LIGHTNING.search(dotted(base.value) or "") for base in node.bases):
            self.lightning.add(id(node))
        if self.in_test or _NOT_TRAINED.search(node.name.value):
            return  # `MultiEvalModule(DataParallel)`, `DataParallelCriterion(DataParallel)`
        for base in node.bases:
            if self.qualified_name(base.value) in _DATA_PARALLEL:
                self.report(base.value, message=(
                    f"`{node.name.value}` subclasses `DataParallel`, which is slower than "
                    "`DistributedDataParallel`, even on one machine"))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "eval" and not node.args:
            evaluated = dotted(func.value)
            self.evaluated.add(evaluated or "")  # "": no name, matches no wrap
            if evaluated is not None:
                self.evaluated_in.add((id(self._owner(evaluated)), evaluated))
            inner = func.value  # `DataParallel(m).eval()`, `DataParallel(m).cuda().eval()`
            while _is_move(inner):
                inner = inner.func.value
            self.evaluated_wraps.add(id(inner))
            self.put_in_eval[id(inner)] = node
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and len(
                node.args) == 1 and is_named(node.args[0].value, "False") and dotted(
                func.value) is not None:
            frozen = dotted(func.value)  # `model.requires_grad_(False)`
            self.frozen.add((id(self._owner(frozen)), frozen))
        if _is_move(node):
            assert isinstance(func, cst.Attribute)
            if isinstance(func.value, cst.Call):
                self.moves[id(func.value)] = node
            moved = dotted(func.value)
            if moved is not None:  # `model.cuda()`
                self.on_device.add((id(self._owner(moved)), moved))
        if isinstance(func, (cst.Name, cst.Attribute)) and node.args:
            self.handed.append((last_name(func), node))
        if isinstance(func, (cst.Call, cst.Subscript)) or self.in_test or self.fallback:
            return
        qualified = self.qualified_name(func)
        if node.args and self._ddp(func):
            self.ddp_wraps.add((id(self.owners[-1]), dotted(node.args[0].value)))
        if qualified not in _DATA_PARALLEL + _FUNCTIONAL or any(
                test is not None and never_true(test, self.owners[-1]) for test in self.tests):
            return  # (the body of `if parallel:` after `parallel = False` never runs)
        if any(id(owner) in self.lightning for owner in self.owners):
            return  # Lightning's `Trainer` distributes a LightningModule
        if node.args and (self._container(node.args[0].value) or (
                id(self._owner(dotted(node.args[0].value))), dotted(node.args[0].value))
                in self.containers):
            return  # a `ModuleList` has no `forward`: the wrap never runs
        devices = argument(node, "device_ids", 2) if qualified in _FUNCTIONAL else keyword(
            node, "device_ids")
        if devices is not None and isinstance(devices.value, (cst.List, cst.Tuple)) \
                and len(devices.value.elements) == 1:
            return  # `DataParallel(m, device_ids=[0])`: one GPU, the model runs as it is
        if qualified in _FUNCTIONAL:
            self.functional.append(node)
            return
        replaced = self.moves.get(id(node), node)
        rebuildable = bool(node.args) and not any(a.star for a in node.args) and (
            node.args[0].keyword is None or node.args[0].keyword.value == "module")
        on_device = replaced is not node  # `DataParallel(m).to(device)`
        if rebuildable and not on_device:  # moved before the wrap?
            module = node.args[0].value
            name = dotted(module)
            on_device = _moved(module) or name is not None and (
                id(self._owner(name)), name) in self.on_device
        target = self.assigned.get(id(replaced))
        if target is None and id(node) in self.put_in_eval:  # `m = DataParallel(m).to(d).eval()`
            target = self.assigned.get(id(self.put_in_eval[id(node)]))
        if rebuildable and not self.unfreezes and (id(self._owner(dotted(
                node.args[0].value))), dotted(node.args[0].value)) in self.frozen:
            return  # every parameter frozen: DDP refuses the model, and it trains nothing
        if rebuildable and _evaluated(node.args[0].value):
            self.evaluated_wraps.add(id(node))  # `DataParallel(m.eval())`
        owner = self._owner(target)
        # the innermost branch of this function that ends; a `return` ends it only
        # for the function's own names
        block = next((b for b in reversed(self.ending) if b is not None), None)
        if block is not None and (block[0] != len(self.owners) or owner is not self.owners[-1]
                                  and isinstance(last_statement(block[1]), cst.Return)):
            block = None
        self.wraps.append(_Wrap(node, replaced, target, owner, rebuildable,
                                on_device, self.owners[-1], bool(self.branches),
                                block[1] if block is not None else None))

    def leave_Module(self, original_node: cst.Module) -> None:
        if _one_visible_device(self.context.source):
            return
        for call in self.functional:
            self.report(call, message=(
                "`data_parallel(...)` replicates the module to every GPU on each call: "
                "slower than `DistributedDataParallel`, even on one machine"))
        if not self.wraps:
            return
        self.evaluators = _evaluators(original_node, self._no_grad)
        for callee, call in self.handed:  # `get_logits(model, loader)`: puts `model` in eval
            slots = self.evaluators.get(callee)
            if slots:
                self.evaluated.update(dotted(arg.value) or "" for arg in _handed(call, slots))
        trains = _trains(self.context.source)
        if not trains:
            self.lent = _lent_to(original_node, self.evaluators)
        inference = self._inference_wraps(trains)
        # a program that trains nothing (no `.train(` either)
        script = not trains and not _TRAIN_MODE.search(self.context.source) and (
            _SCRIPT.search(self.context.source) is not None)
        # an evaluation script: the model is put in eval mode and never trained
        evaluated = set() if trains or _TRAIN_MODE.search(self.context.source) else self.evaluated
        for wrap in self.wraps:
            whole = self.parts.get((id(wrap.function), _wrapped(wrap) or ""))  # a part of it
            root = (_wrapped(wrap) or "").split(".")[0] or None  # `model` of `model.features`
            if (id(wrap.owner), wrap.target) in inference or evaluated & {
                    wrap.target, _wrapped(wrap), whole, root if root != "self" else None}:
                continue
            if evaluated is self.evaluated and id(wrap.call) in self.evaluated_wraps:
                continue
            if trains and self._evaluated_here(wrap):
                continue
            if wrap.conditional and (id(wrap.function), _wrapped(wrap)) in self.ddp_wraps:
                continue  # the function offers DDP too: this is its other branch
            if self._never_run(wrap):
                continue
            if wrap.block is not None and wrap.target in self._inference_only(wrap.block, trains):
                continue  # in a branch that ends: only its own uses count
            if script and self._kept_here(wrap):
                continue
            if not self._fixable(wrap):
                self.report(wrap.call)
                continue
            self.report(wrap.call, edits=[(wrap.replaced, self._fixed(wrap))],
                        imports=("import torch",
                                 "from torch.nn.parallel import DistributedDataParallel"))

    def _kept_here(self, wrap: _Wrap) -> bool:
        """In a program that trains nothing: the wrapped model is a name of its own,
        never returned, nor handed to a callable named for training (`train(model)`,
        `Trainer(model)`): nothing can train it (`generator = DataParallel(g)`, then
        registered with a checkpoint loader, copied, handed to an `Evaluator`)."""
        if wrap.target is None or "." in wrap.target:
            return False
        if any(name == wrap.target and returned for name, _, _, returned in
               self._owner_uses(wrap.owner)):
            return False
        for node in descendants(wrap.owner):
            if type(node) is cst.Call and _TRAINING_NAME.search(
                    last_name(node.func) if isinstance(node.func, (cst.Name, cst.Attribute))
                    else "") and any(dotted(a.value) == wrap.target for a in node.args):
                return False
        return True

    def _never_run(self, wrap: _Wrap) -> bool:
        """A name of its own used through its `.module` (`donor.module.load_state_dict(...)`,
        `net.decoder = donor.module.decoder`, `torch.save(net.module.state_dict(), p)`) and
        otherwise only in ways that do not run the wrapper: never called, handed on,
        returned or aliased."""
        if wrap.target is None or "." in wrap.target:
            return False
        never = self._never.get(id(wrap.owner))
        if never is None:  # once per owner: the names some use through `.module`, less
            never = self._never[id(wrap.owner)] = set()  # those some use runs the wrapper of
            running = set()
            for name, use, _, returned in self._owner_uses(wrap.owner):
                if use in ("unwrapped", "module-inert"):
                    never.add(name)
                if use in _RUNS or returned and use not in ("unwrapped", "inert", "module-inert"):
                    running.add(name)
            never -= running
        return wrap.target in never

    def _owner_uses(self, owner: cst.CSTNode) -> list[tuple[str, str, bool, bool]]:
        """The uses of every name `owner`'s wraps are assigned to, found in one walk
        of it (see `_uses`; the wraps themselves, which read the unwrapped model,
        left out)."""
        found = self._by_owner.get(id(owner))
        if found is None:  # (`owner` may be a branch that ends: see `_Wrap.block`)
            wraps = [w for w in self.wraps if (w.owner is owner or w.block is owner)
                     and w.target is not None]
            # a wrap in a branch that ends wraps nothing the code after the branch sees
            found = self._by_owner[id(owner)] = self._uses(
                owner, {w.target for w in wraps},
                {id(w.replaced): w.target if w.block in (None, owner) else None for w in wraps})
        return found

    def _fixable(self, wrap: _Wrap) -> bool:
        """A script (a notebook kernel cannot be launched with torchrun), a call that can
        be rebuilt, and a model on its device when DDP wraps it."""
        return not self.notebook and wrap.rebuildable and wrap.on_device

    def _fixed(self, wrap: _Wrap) -> cst.BaseExpression:
        """`DistributedDataParallel(m) if <process group> else <the original>`; a device
        move chained to the wrap moves `m` before DDP wraps it."""
        module = wrap.call.args[0].value
        if wrap.replaced is not wrap.call:  # `DataParallel(m).to(device)`
            move = wrap.replaced
            assert isinstance(move, cst.Call) and isinstance(move.func, cst.Attribute)
            module = move.with_changes(func=move.func.with_changes(value=as_receiver(module)),
                                       lpar=[], rpar=[])
        args = [cst.Arg(module)]
        dim = keyword(wrap.call, "dim")
        if dim is not None:
            args = [cst.Arg(module, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    dim.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        ddp = cst.Call(func=cst.Name("DistributedDataParallel"), args=args)
        original = wrap.replaced.with_changes(lpar=[], rpar=[])
        replacement = cst.IfExp(test=cst.parse_expression(_TEST), body=ddp, orelse=original)
        if id(wrap.replaced) not in self.assigned:  # inside a larger expression
            replacement = replacement.with_changes(lpar=[cst.LeftParen()],
                                                   rpar=[cst.RightParen()])
        return replacement

    # -- a model only used for inference --------------------------------------------
    def _inference_wraps(self, trains: bool) -> set[tuple[int, str]]:
        """(owner, target) of the wraps whose model is only used for inference; in
        a file that `trains`, also never handing out its parameters."""
        owners = {id(wrap.owner): wrap.owner for wrap in self.wraps if wrap.target is not None}
        return {(key, t) for key, owner in owners.items()
                for t in self._inference_only(owner, trains)}

    def _evaluated_here(self, wrap: _Wrap) -> bool:
        """In a file that also trains: the wrap's function puts the model in
        `.eval()`, trains nothing itself, and neither returns nor stores it."""
        owner, target = wrap.owner, wrap.target
        if not (isinstance(owner, cst.FunctionDef) and target is not None and (
                (id(owner), target) in self.evaluated_in or id(wrap.call) in self.evaluated_wraps)):
            return False
        code = cst.Module([]).code_for_node(owner)
        if _TRAINS.search(code) or _TRAIN_MODE.search(code):
            return False
        uses = self._uses(owner, {target}, {id(wrap.replaced): target})
        return not any(use == "alias" or returned and use != "called"
                       for _, use, _, returned in uses)

    def _no_grad(self, expr: cst.BaseExpression) -> bool:
        """`torch.no_grad()`, `torch.inference_mode()`, `set_grad_enabled(False)`, a
        project's own `no_grad`-named wrapper; as a `with` item or a decorator."""
        return grad_mode(expr, self.qualified_name) == OFF

    def _inference_only(self, owner: cst.CSTNode, trains: bool) -> set[str]:
        """The targets (wrapped models) of `owner` that are run under `no_grad` and
        whose every other use leaves them unrun (`.eval()`, `.load_state_dict()`,
        `print`), never returned; where the file `trains`, whose parameters are
        never handed out either (a frozen backbone: DDP refuses a model without a
        parameter that requires grad, and has nothing to do for one under
        `no_grad`)."""
        run: set[str] = set()
        trained: set[str] = set()
        loaded: set[str] = set()
        for name, use, no_grad, returned in self._owner_uses(owner):
            if use == "loaded":
                loaded.add(name)
            if returned and use != "called" or use == "alias" or (
                    use in ("called", "passed", "unwrapped") and not no_grad) or (
                    trains and use == "parameters"):
                trained.add(name)
            elif use in ("called", "passed", "unwrapped", "evaluated"):
                run.add(name)
        # a name of its own that loads a state dict and is never run, handed on or
        # returned: the wrap serves only to load a checkpoint saved from a wrapped
        # model (`module.` keys)
        unrun = {t for t in loaded if "." not in t} - run - trained
        return run - trained | unrun

    def _uses(self, owner: cst.CSTNode, targets: set[str],
              skip: dict[int, str]) -> list[tuple[str, str, bool, bool]]:
        """Each use of the targets in `owner` (one walk for all of them): (the
        name, how it is used (see `_use`), under `no_grad`, inside a return).
        `skip`: the wraps, by id, and the name each is assigned to (None: a
        wrap in a branch that ends); a use of that name before the first of
        them, outside loops and functions that may run later, sees the model
        before it is wrapped, and is left out."""
        uses: list[tuple[str, str, bool, bool]] = []
        reached: set[str] = set()  # the names whose first wrap the walk has passed
        unwrapped: set[str] = set()  # names rebound to their own `.module`: no wrapper after
        # (node, its parent's entry, gradients off, inside a return)
        Item = tuple[cst.CSTNode, "Item | None", bool, bool]
        stack: list[Item] = [(owner, None, False, False)]
        while stack:
            item = stack.pop()
            node, up, no_grad, returned = item
            if id(node) in skip:
                if skip[id(node)] is not None:
                    reached.add(skip[id(node)])
                continue
            if node is not owner and isinstance(node, (cst.FunctionDef, cst.Lambda)):
                shadowed = _parameters(node) & targets
                if shadowed == targets:
                    continue  # another function's own variables
            name = dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
            if up is not None and (isinstance(up[0], cst.Attribute) and up[0].attr is node
                                   or isinstance(up[0], cst.Arg) and up[0].keyword is node):
                continue  # `network` of `self.network` or `f(network=n)` is no use of `network`
            rebound = _unwraps(node)
            if rebound in targets:  # `model = model.module`: from here on, the model itself
                uses.append((rebound, "unwrapped", no_grad, returned))
                unwrapped.add(rebound)
                continue
            if name in unwrapped:
                continue
            if name in targets:
                if name in reached or _may_run_later(up, owner):
                    uses.append((name, _use(node, up, self.evaluators, self.lent),
                                 no_grad, returned))
                continue
            inner = no_grad
            if isinstance(node, cst.With) and any(self._no_grad(i.item) for i in node.items):
                inner = True
            elif isinstance(node, cst.FunctionDef):
                inner = any(self._no_grad(d.decorator) for d in node.decorators)
            elif isinstance(node, cst.Lambda):
                inner = False
            inside = returned or isinstance(node, (cst.Return, cst.Yield))
            stack.extend((child, item, inner, inside) for child in reversed(children(node)))
        return uses


# the uses that run the wrapper (see `_use`)
_RUNS = frozenset({"called", "passed", "evaluated", "alias"})
_STEPS = re.compile(r"backward|\.step\(")
_OPTIMIZER_BOUND = re.compile(r"[ \t]*([A-Za-z_][\w.]*)[ \t]*=[^=]")


_VISIBLE = re.compile(r"CUDA_VISIBLE_DEVICES")
_ONE_VISIBLE = re.compile(r"""CUDA_VISIBLE_DEVICES['"]\s*\]\s*=\s*(['"])\s*\d+\s*\1""")


def _one_visible_device(source: str) -> bool:
    """The file makes one GPU visible, and sets `CUDA_VISIBLE_DEVICES` no other way:
    `os.environ["CUDA_VISIBLE_DEVICES"] = "0"`."""
    if "CUDA_VISIBLE_DEVICES" not in source:
        return False
    code = without_comments(source)
    settings = len(_VISIBLE.findall(code))
    return settings > 0 and settings == len(_ONE_VISIBLE.findall(code))


def _trains(source: str) -> bool:
    """Whether the file trains: it calls `backward` or `.step(`, or makes an
    optimizer it uses (imports and comments aside: `import torch.optim` trains
    nothing, nor does an optimizer bound to a name never read again)."""
    if not _TRAINS.search(source):
        return False
    code = without_comments(_IMPORT_LINE.sub("", source))
    if _STEPS.search(code):
        return True
    for line in code.splitlines():
        if "optim" not in line:
            continue
        bound = _OPTIMIZER_BOUND.match(line)
        if bound is None or len(re.findall(rf"(?<![\w.]){re.escape(bound[1])}\b", code)) > 1:
            return True
    return False


def _wrapped(wrap: _Wrap) -> str | None:
    """The name of the module a wrap wraps: `m` in `DataParallel(m)`."""
    return dotted(wrap.call.args[0].value) if wrap.call.args else None


def _is_move(expr: cst.BaseExpression) -> bool:
    """`x.to(...)` or `x.cuda(...)`."""
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("to", "cuda"))


def _evaluated(expr: cst.BaseExpression) -> bool:
    """`m.eval()`, `Net().eval().to(device)`: a chain that puts the model in eval mode."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value == "eval" and not expr.args:
            return True
        if not _is_move(expr):
            return False
        expr = expr.func.value
    return False


def _moved(expr: cst.BaseExpression) -> bool:
    """`x.to(device)`, `Net().cuda()`, `x.to(device).eval()`: a chain with a device move."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if _is_move(expr):
            return True
        expr = expr.func.value
    return False


def _unwraps(node: cst.CSTNode) -> str | None:
    """`model` for `model = model.module` (a plain name rebound to its own `.module`)."""
    if type(node) is not cst.Assign or len(node.targets) != 1:
        return None
    target, value = node.targets[0].target, node.value
    if type(target) is cst.Name and type(value) is cst.Attribute and value.attr.value == "module" \
            and type(value.value) is cst.Name and value.value.value == target.value:
        return target.value
    return None


def _parameters(node: cst.FunctionDef | cst.Lambda) -> set[str]:
    params = node.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def _evaluators(module: cst.Module,
                no_grad: Callable[[cst.BaseExpression], bool]) -> dict[str, set[int | str]]:
    """The functions of the file that train nothing and put a model they are given
    in `.eval()`, or only call it under `no_grad` (`with torch.no_grad(): out =
    net(x)`): name -> the positions and names of those parameters (`self` not
    counted). A name defined more than once: what every definition evaluates."""
    found: dict[str, set[int | str]] = {}
    for node in descendants(module):
        if type(node) is not cst.FunctionDef:
            continue
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        names = params + [p.name.value for p in node.params.kwonly_params]
        code = cst.Module([]).code_for_node(node.body)
        evaluated = set() if _TRAINS.search(code) or _TRAIN_MODE.search(code) else {
            name for name in names if re.search(rf"(?<![\w.]){re.escape(name)}\.eval\(\)", code)
        } | _only_run_without_grad(node, set(names), no_grad)
        slots = evaluated | {i for i, name in enumerate(params) if name in evaluated}
        name = node.name.value
        found[name] = found[name] & slots if name in found else slots
    return found


def _only_run_without_grad(function: cst.FunctionDef, names: set[str],
                           no_grad: Callable[[cst.BaseExpression], bool]) -> set[str]:
    """The `names` that `function` only calls, each time under `no_grad` (a block,
    or the function's decorator), and uses in no other way."""
    called: set[str] = set()
    other: set[str] = set()
    stack = [(function.body, any(no_grad(d.decorator) for d in function.decorators))]
    while stack:
        node, off = stack.pop()
        if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value in names:
            (called if off else other).add(node.func.value)
            stack.extend((arg, off) for arg in node.args)
            continue
        if type(node) is cst.Name and node.value in names:
            other.add(node.value)
        elif isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            other.update(names)  # run later, under whatever mode then: not followed
            continue
        if type(node) is cst.Attribute:
            stack.append((node.value, off))  # `x.attr`: not a use of a name `attr`
            continue
        if type(node) is cst.With and any(no_grad(item.item) for item in node.items):
            off = True
        stack.extend((child, off) for child in children(node))
    return called - other


def _lent_to(module: cst.Module, defined: dict) -> set[str]:
    """In a file that trains nothing: the functions it imports by name
    (`from utils import fill_memory_bank`), not named for training nor defined
    in the file. A model handed to one is evaluated there: it gets no optimizer."""
    found: set[str] = set()
    for statement in module.body:
        for small in statement.body if type(statement) is cst.SimpleStatementLine else ():
            if type(small) is cst.ImportFrom and not isinstance(small.names, cst.ImportStar):
                found.update(dotted(a.asname.name if a.asname else a.name) or "" for a in small.names)
    return {name for name in found if not _TRAINING_NAME.search(name)} - set(defined)


def _handed(call: cst.Call, slots: set[int | str]) -> list[cst.Arg]:
    """The arguments of `call` that land in the parameters `slots`."""
    handed = []
    for i, arg in enumerate(call.args):
        if arg.star:
            break
        if (arg.keyword.value if arg.keyword is not None else i) in slots:
            handed.append(arg)
    return handed


def _freezes(loop: cst.For) -> str | None:
    """`model` of `for p in model.parameters(): p.requires_grad = False` (the
    whole body, or its first statement)."""
    it = loop.iter
    if not (type(it) is cst.Call and type(it.func) is cst.Attribute and not it.args
            and it.func.attr.value == "parameters" and type(loop.target) is cst.Name):
        return None
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else [loop.body]
    first = body[0] if body else None
    small = first.body[0] if isinstance(first, (cst.SimpleStatementLine,
                                                cst.SimpleStatementSuite)) else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and is_named(small.value, "False"):
        target = small.targets[0].target
        if dotted(target) == f"{loop.target.value}.requires_grad":
            return dotted(it.func.value)
    return None


def _may_run_later(up, owner: cst.CSTNode) -> bool:
    """Whether a node whose parent's walk entry is `up` is inside a loop or a
    function (below `owner`): it may run after code that comes later."""
    while up is not None and up[0] is not owner:
        if isinstance(up[0], _LATER):
            return True
        up = up[1]
    return False


def _use(node: cst.CSTNode, up, evaluators: dict[str, set[int | str]],
         lent: set[str] | None) -> str:
    """How an occurrence of the wrapped model uses it: "bound" (an assignment target, a
    parameter), "alias" (assigned to another name), "loaded" (`model.load_state_dict(...)`),
    "inert" (`.eval()`, `print(model)`, `model` alone on a line,
    `for p in model.parameters()`), "module-inert" (the same through `.module`:
    `model.module.state_dict()`, or a part set there: `model.module.head = ...`), "parameters" (`model.parameters()` handed on),
    "read" (an attribute read: `model.output_dim`), "unwrapped" (a use through its
    `.module`: `model.module.encoder(x)`), "called" (`model(x)`),
    "evaluated" (an argument of a function named for evaluation, `validate(loader, model)`,
    of one of the file's `evaluators` that puts it in `.eval()`, or, in a file that trains
    nothing (`lent` not None), of a function `lent` the model or of a method named
    neither for training nor for keeping it: `layer.bounds(network=model)`)
    or "passed" (anything else: an argument, an operand, a part run: `model.encoder(x)`).
    `up`: the walk's entry of the node's parent (node, its parent's entry, ...)."""
    chain: list[cst.CSTNode] = []  # parent first, a few levels up
    while up is not None and len(chain) < 8:
        chain.append(up[0])
        up = up[1]
    parent = chain[0] if chain else None
    if isinstance(parent, (cst.AssignTarget, cst.Param)):
        return "bound"
    if isinstance(parent, cst.Assign):
        return "alias"
    if isinstance(parent, cst.Call) and parent.func is node:
        return "called"
    if isinstance(parent, cst.Expr):
        return "inert"  # `model` alone on a line: a notebook shows it
    i = 0  # the attributes read off it: `model.module.encoder.eval`
    while i < len(chain) and isinstance(chain[i], cst.Attribute):
        i += 1
    if i:
        last, after = chain[i - 1].attr.value, chain[i] if i < len(chain) else None
        if isinstance(after, cst.AssignTarget):  # `model.module.head = Identity()`: a store
            return "module-inert" if chain[0].attr.value == "module" else "read"
        if isinstance(after, cst.Call) and after.func is chain[i - 1]:
            if last in _PARAMETERS:
                iterated = i + 1 < len(chain) and isinstance(chain[i + 1], cst.For) and \
                    chain[i + 1].iter is after
                return "inert" if iterated else "parameters"
            if last == "load_state_dict" and i == 1:
                return "loaded"  # `model.load_state_dict(...)`: through the wrapper's keys
            if last in _NOT_RUNNING:  # (through `.module`: a sign the wrapper is not run)
                return "module-inert" if chain[0].attr.value == "module" else "inert"
        elif not any(a.attr.value == "module" for a in chain[:i]):
            return "read"
        if chain[0].attr.value == "module":
            return "unwrapped"  # `model.module.encoder(x)`: the wrapper does not run
    callee = last_name(chain[1].func) if isinstance(parent, cst.Arg) and len(chain) > 1 \
        and isinstance(chain[1], cst.Call) else None
    if callee in _HARMLESS:
        return "inert"
    if callee is not None and (_EVALUATES.match(callee) or lent is not None and (
            callee in lent and isinstance(chain[1].func, cst.Name)
            or isinstance(chain[1].func, cst.Attribute) and not _TRAINING_NAME.search(callee)
            and not _KEEPS.search(callee)) or any(
            arg is parent for arg in _handed(chain[1], evaluators.get(callee, set())))):
        return "evaluated"
    return "passed"
