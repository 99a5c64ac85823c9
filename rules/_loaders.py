"""What a file does with its `DataLoader`s, for PTL113 and PTL132 (not a rule).

`LoaderRule` collects, during the traversal, every `DataLoader(...)` call and
how the loader is used afterwards:

- "iterated": a `for` loop (or a comprehension) goes over it, also through
  `enumerate`, `zip`, `tqdm`, or a loop takes its batches with `next(batches)`
  after `batches = iter(loader)`;
- "moved": such a loop moves what it yields to a device (`.cuda()`,
  `.to(device)`, `.type(torch.cuda.FloatTensor)`);
- "passed": it is returned, stored in an attribute or passed to a function
  (which may iterate it);
- "inspected": only looked at: `next(iter(loader))`, `len(loader)`,
  `print(loader)`, a loop that ends in `break` (one batch), or in a break
  after a few batches (see `_first_batch_only`).

and `skipped(loader)` tells the loaders no data-loading advice applies to: an
index batcher or values already in memory (`DataLoader(range(n), ...)`, a
list display or comprehension, `list(zip(...))`, a torch tensor such as
`torch.from_numpy(a).float()`, slices and sums of those, also through a
variable bound to one), the whole dataset in
one batch (`batch_size=len(dataset)`), a dataset made on a device
(`Cls(root, device=device)`, a `TensorDataset` of a tensor moved there, also inside
`ConcatDataset`/`Subset`, unpacked from such a
call or an attribute of its result: workers cannot use CUDA, and pinning refuses CUDA
tensors), and a loader never iterated nor passed on.
Loaders are named by their variable (`loader`, `self.loader`), per function; a
plain name bound to a second `DataLoader(...)` is a new loader from there on
(uses after the rebinding are the new one's). A loader's dataset is a
`TensorDataset` (torch's or a project's class of that name) when it is built in
place, bound to a variable, made by a function of the file every return of which
gives one, or comes through a parameter of a function every call of which in the
file passes one or what such a function makes;
it is held in memory like one when it is an instance of a class of the file
whose `__getitem__` only indexes and converts attributes that no other method
built lazily (a hand-written `TensorDataset`; see `memory_class`).
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ptlint.analysis.dataflow import last_name, target_vars
from ptlint.analysis.names import dotted
from ptlint.analysis.statements import last_statement
from ptlint.analysis.walk import descendants
from ptlint.fixers.arguments import argument, keyword
from ptlint.rule import Rule
from ptlint.rules._tests import TracksTests

LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_BATCH_SIZE_INDEX = 1
# datasets made of other datasets: `ConcatDataset([a, b])`, `Subset(a, indices)`
_COMBINING = frozenset({"ConcatDataset", "Subset", "ChainDataset", "random_split"})
# datasets that are parts of another: `Subset(d, indices)`, `random_split(d, sizes)`
_PARTS = frozenset({"Subset", "random_split"})
# functions that look at a loader without loading from it, or only wrap it for a loop
_INSPECTING = frozenset({"iter", "next", "len", "print", "isinstance", "type", "id", "repr",
                         "str", "hasattr", "getattr"})
_WRAPPING = frozenset({"enumerate", "zip", "tqdm", "trange", "iter"})
# what a `__getitem__` of an in-memory dataset may call: conversions, views and
# containers (anything else may read a file, decode or augment: workers help there)
_CHEAP_CALLS = frozenset({
    "len", "int", "float", "bool", "tuple", "list", "dict", "range", "zip", "min", "max",
    "abs", "isinstance", "slice", "round", "long", "double", "half", "type", "view",
    "reshape", "unsqueeze", "squeeze", "clone", "flip", "permute", "transpose", "t",
    "contiguous", "astype", "copy", "tolist", "item", "numpy", "get", "detach", "to", "size",
    "dim", "numel", "items", "keys", "values"})
# libraries whose objects read from disk when indexed
_LAZY_MODULES = frozenset({"h5py", "zarr", "lmdb", "tables", "webdataset", "datasets", "pyarrow"})
# NumPy and torch functions that read files (any other is computation in memory)
_READERS = frozenset({"load", "loadtxt", "genfromtxt", "fromfile", "memmap", "from_file",
                      "read_image", "decode_image", "decode_jpeg", "read_file"})

Key = tuple[int, str]  # (function id or 0, variable)


@dataclass
class Loader:
    call: cst.Call
    key: Key | None  # the variable it is bound to; None when used in place
    context: str | None = None  # for a loader used in place: "iterated", "passed", "inspected"
    loop: cst.For | None = None  # the loop iterating it in place
    index_batcher: bool = False
    tensor_dataset: bool = False  # `TensorDataset(...)`: tensors already in memory
    one_batch: bool = False
    in_test: bool = False
    dataset_param: tuple[str, str, int] | None = None  # (function, parameter, position)
    dataset_class: str | None = None  # `DataLoader(Cls(...))`, also through a variable
    on_device: bool = False  # its dataset is made on a device: `Cls(..., device=device)`


@dataclass
class _Loop:
    keys: set[Key]  # loaders it iterates
    batch: set[str]  # names holding what it yields
    node: cst.For | None = None
    moves: bool = False


def _names(target: cst.BaseExpression) -> set[str]:
    """The plain names an assignment or loop target binds."""
    return set(target_vars(target, lambda n: n.value if isinstance(n, cst.Name) else None))


def root(node: cst.BaseExpression) -> str | None:
    """`batch` for `batch`, `batch[0]`, `batch["x"].float()`, `batch.x`."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            break
    return node.value if isinstance(node, cst.Name) else None


def _wrapped(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a loop iterates: `loader`, `enumerate(loader)`, `tqdm(self.loader)`, `zip(a, b)`."""
    if isinstance(node, cst.Call) and last_name(node.func) in _WRAPPING:
        out: list[cst.BaseExpression] = []
        for arg in node.args:
            if arg.keyword is None:
                out += _wrapped(arg.value)
        return out
    return [node]


def _in_memory(value: cst.BaseExpression, resolve, known) -> bool:
    """Indices or values already in memory: `range(n)`, a list or tuple display or
    comprehension, `list(...)`/`tuple(...)` (materialised), a torch tensor
    (`torch.randperm(n)`, `torch.from_numpy(a).float()`), slices and sums of those,
    and names `known` to hold one."""
    if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
        return True
    if isinstance(value, cst.Subscript):
        return _in_memory(value.value, resolve, known)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        return _in_memory(value.left, resolve, known) and _in_memory(value.right, resolve, known)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return _in_memory(value.left, resolve, known) or _in_memory(value.right, resolve, known)
    if isinstance(value, (cst.Name, cst.Attribute)):
        name = dotted(value)
        return name is not None and known(name)
    if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
        qualified = resolve(value.func) or ""
        if qualified in ("builtins.range", "builtins.list", "builtins.tuple"):
            return True
        if qualified.startswith("torch.") and not qualified.startswith("torch.utils."):
            return True  # a tensor
        if isinstance(value.func, cst.Attribute) and not qualified:
            return _in_memory(value.func.value, resolve, known)  # `data.float()`
    return False


def _one_batch(call: cst.Call) -> bool:
    """`batch_size=len(data)`, `x.shape[0]`, `x.size(0)`: the whole dataset in one batch."""
    size = argument(call, "batch_size", _BATCH_SIZE_INDEX)
    if size is None:
        return False
    value = size.value
    if isinstance(value, cst.Call):
        return last_name(value.func) == "len" or (
            last_name(value.func) == "size" and len(value.args) == 1)
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Attribute):
        return value.value.attr.value == "shape"
    return False


class LoaderRule(TracksTests, Rule):
    """A rule judging `DataLoader(...)` calls by how the file uses them; subclasses
    implement `check(loader)`, called for each loader once the module is visited."""

    test_names_need_a_framework = True  # `test(model, loader)` is an evaluation step

    def __init__(self, context) -> None:
        super().__init__(context)
        self.loaders: list[Loader] = []
        self.uses: dict[Key, set[str]] = {}
        self.any_moved = False  # some loop in the file moves its batches to a device
        self._assigned: dict[int, Key] = {}  # id(value) -> the variable it is bound to
        self._in_place: dict[int, str] = {}  # id(loader call) -> how it is used in place
        self._loop_of: dict[int, cst.For] = {}  # id(loader call) -> the loop iterating it
        self._loops: list[_Loop] = []
        self._whiles = 0  # `while` loops around the node visited
        self._taken: dict[Key, Key] = {}  # `x, y = next(batches)`: x, y -> batches
        self._moved_loops: set[int] = set()
        self._scopes: list[tuple[int, set[str]]] = [(0, set())]  # function id, names bound in it
        self._cuda_types: set[str] = set()  # `Tensor = torch.cuda.FloatTensor if cuda else ...`
        self._aliases: dict[Key, Key] = {}  # `pbar = tqdm(loader)`: pbar -> loader
        self._targets: set[int] = set()  # tuples and lists that store nothing: targets, displays
        self._tensor_datasets: set[Key] = set()  # variables bound to a `TensorDataset(...)`
        self._in_memory: set[Key] = set()  # variables bound to `range(n)`, a list display
        self._placed_names: set[Key] = set()  # variables bound to a dataset made on a device
        self._generation: dict[Key, int] = {}  # how many loaders a plain name was bound to
        self._functions: list[tuple[str, list[str]]] = []  # enclosing functions, parameters
        self._defined: dict[str, int] = {}  # function name -> how many definitions
        self._returns: dict[str, list[bool]] = {}  # function name -> each return a TensorDataset
        # function name -> per call: {position or keyword: what is passed there}
        self._calls: dict[str, list[dict[int | str, bool | str | None] | None]] = {}
        self._instances: dict[Key, str] = {}  # variable -> the class of the file it holds
        self.classes: dict[str, list[cst.ClassDef]] = {}  # the classes of the file
        self._frames: list[cst.ClassDef | cst.FunctionDef] = []  # the enclosing definitions
        self._not_in_memory: set[str] = set()  # classes whose methods may read on indexing

    # -- scopes --------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        super().visit_ClassDef(node)
        self.classes.setdefault(node.name.value, []).append(node)
        self._frames.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        super().leave_ClassDef(original_node)
        self._frames.pop()

    def _method(self) -> tuple[str, str] | None:
        """(class, method) when the walk is in a method of a class (or a function
        nested in one)."""
        for i in range(len(self._frames) - 1, -1, -1):
            if isinstance(self._frames[i], cst.ClassDef):
                if i + 1 < len(self._frames):
                    method = self._frames[i + 1]
                    return self._frames[i].name.value, method.name.value
                return None
        return None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        params = node.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        names = {*positional, *(p.name.value for p in params.kwonly_params)}
        self._scopes.append((id(node), names))
        self._functions.append((node.name.value, positional))
        self._frames.append(node)
        self._defined[node.name.value] = self._defined.get(node.name.value, 0) + 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(original_node)
        self._scopes.pop()
        self._functions.pop()
        self._frames.pop()

    def key(self, name: str, *, binding: bool = False) -> Key:
        """Which function's `name` this is: the current one's if bound there;
        `self.x` is one variable for the whole file. A plain name rebound to a
        new loader is another variable from there on."""
        base = name.split(".", 1)[0]
        if base == "self":
            return 0, name
        scope, names = self._scopes[-1]
        if binding:
            names.add(base)
        key = (scope, name) if base in names else (0, name)
        generation = self._generation.get(key, 0)
        return (key[0], f"{name}#{generation}") if generation > 1 else key

    def _rebinds(self, name: str) -> None:
        """`loader = DataLoader(...)` once more: a new loader under the same name."""
        if name.split(".", 1)[0] != "self":
            scope, names = self._scopes[-1]
            names.add(name.split(".", 1)[0])
            key = (scope, name)
            self._generation[key] = self._generation.get(key, 0) + 1

    def _use(self, node: cst.BaseExpression, how: str) -> None:
        name = dotted(node)
        if name is not None:
            self.uses.setdefault(self.key(name), set()).add(how)
        elif isinstance(node, cst.Call):
            self._in_place.setdefault(id(node), how)

    # -- bindings and uses -------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        self._targets.update(id(t.target) for t in node.targets)
        name = dotted(node.targets[0].target) if len(node.targets) == 1 else None
        if name is not None:
            if isinstance(node.value, cst.Call) and self.qualified_name(node.value.func) in LOADERS:
                self._rebinds(name)
            self._assigned[id(node.value)] = self.key(name, binding=True)
            batches = _argument_of(node.value, "iter")
            if isinstance(batches, cst.Call):  # `batches = iter(DataLoader(...))`: the loader's name
                self._assigned[id(batches)] = self.key(name)
            if "torch.cuda." in cst.Module([]).code_for_node(node.value):
                self._cuda_types.add(name)
            if name.startswith("self.") and dotted(node.value) is not None:
                self._use(node.value, "passed")  # `self.loader = loader`
            if isinstance(node.value, cst.Call) and last_name(node.value.func) in _WRAPPING:
                self._alias(name, node.value)
            if self._is_tensor_dataset(node.value):
                self._tensor_datasets.add(self.key(name))
            made = self._dataset_class(node.value)  # `Cls(...)`, `partial(Cls, ...)`
            if made is not None:
                self._instances[self.key(name)] = made
            (self._placed_names.add if self._placed(node.value)
             else self._placed_names.discard)(self.key(name))
            if _in_memory(node.value, self.qualified_name, self._holds_in_memory):
                self._in_memory.add(self.key(name))
            else:
                self._in_memory.discard(self.key(name))
        elif len(node.targets) == 1 and self._placed(node.value):  # `a, b = tasks(device=d)`
            for part in _names(node.targets[0].target):
                self._placed_names.add(self.key(part, binding=True))
        elif len(node.targets) == 1 and isinstance(node.value, cst.Call) and last_name(
                node.value.func) == "random_split":  # `train, val = random_split(ds, sizes)`
            made = self._dataset_class(node.value)
            for part in _names(node.targets[0].target):
                if self._is_tensor_dataset(node.value):
                    self._tensor_datasets.add(self.key(part, binding=True))
                if made is not None:
                    self._instances[self.key(part, binding=True)] = made
        if self._loops:  # `inputs, labels = batch`: still the batch
            batch = self._loops[-1].batch
            if root(node.value) in batch:
                for target in node.targets:
                    batch.update(_names(target.target))
        taken = _taken_from(node.value)
        if taken is not None and (self._loops or self._whiles):
            for target in node.targets:
                for part in _names(target.target):
                    self._taken[self._scopes[-1][0], part] = self.key(taken)

    def _alias(self, name: str, wrapper: cst.Call) -> None:
        """`pbar = tqdm(loader)`: iterating `pbar` iterates `loader`."""
        inner = [dotted(n) for n in _wrapped(wrapper)]
        if len(inner) == 1 and inner[0] is not None:
            self._aliases[self.key(name)] = self.key(inner[0])

    def visit_Return(self, node: cst.Return) -> None:
        if self._functions:
            self._returns.setdefault(self._functions[-1][0], []).append(
                node.value is not None and self._is_tensor_dataset(node.value))
        if node.value is not None:
            for value in _names_or_calls(node.value):
                self._use(value, "passed")

    def visit_Expr(self, node: cst.Expr) -> None:
        self._targets.add(id(node.value))  # `train_loader, test_loader` shown in a notebook

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        self._targets.add(id(node.expression))  # f"{train_loader, test_loader}"

    def _stored(self, node: cst.List | cst.Tuple | cst.Set) -> None:
        if id(node) not in self._targets:  # `[train_loader, test_loader]`
            for element in node.elements:
                self._use(element.value, "passed")

    def visit_List(self, node: cst.List) -> None:
        self._stored(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._stored(node)

    def visit_Set(self, node: cst.Set) -> None:
        self._stored(node)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._use(node.value, "passed")

    def visit_For(self, node: cst.For) -> None:
        self._targets.add(id(node.target))
        keys: set[Key] = set()
        once = _first_batch_only(node)  # `for x, y in loader: ...; break`: a look at one batch
        for item in _wrapped(node.iter):
            name = dotted(item)
            if name is not None:
                key = self.key(name)
                if not once:
                    keys.add(key)
                self.uses.setdefault(key, set()).add("inspected" if once else "iterated")
            elif isinstance(item, cst.Call):
                self._in_place.setdefault(id(item), "inspected" if once else "iterated")
                self._loop_of[id(item)] = node
        self._loops.append(_Loop(keys, _names(node.target), node))

    def leave_For(self, original_node: cst.For) -> None:
        loop = self._loops.pop()
        if loop.moves:
            self.any_moved = True
            self._moved_loops.add(id(original_node))
            for key in loop.keys:
                self.uses.setdefault(key, set()).add("moved")

    def visit_While(self, node: cst.While) -> None:
        self._whiles += 1

    def leave_While(self, original_node: cst.While) -> None:
        self._whiles -= 1

    def visit_CompFor(self, node: cst.CompFor) -> None:
        for item in _wrapped(node.iter):
            self._use(item, "iterated")

    def _comprehension(self, node: cst.BaseComp | cst.DictComp) -> None:
        """`tuple(t.to(device) for t in batch)`, `{k: v.cuda() for k, v in batch.items()}`
        in a loop: what the comprehension goes over is still the batch (its parts
        are seen before its `for`)."""
        if not self._loops:
            return
        batch = self._loops[-1].batch
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            if root(comp.iter) in batch:
                batch.update(_names(comp.target))
            comp = comp.inner_for_in

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comprehension(node)

    def _moves_to_device(self, node: cst.Call) -> bool:
        func = node.func
        assert isinstance(func, cst.Attribute)
        method = func.attr.value
        if method == "cuda":
            return True
        if method == "to":
            return (bool(node.args) and _device_like(node.args[0].value)) \
                or keyword(node, "device") is not None
        if method == "type" and node.args:
            arg = node.args[0].value
            return dotted(arg) in self._cuda_types or ".cuda." in cst.Module([]).code_for_node(arg)
        return False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = self._method() if self._frames else None
        if method is not None and method[0] not in self._not_in_memory:
            fine = self._cheap(node) if method[1] == "__getitem__" else not self._lazy(node)
            if not fine:
                self._not_in_memory.add(method[0])
        if isinstance(func, cst.Attribute) and (self._loops or self._whiles) and \
                self._moves_to_device(node):
            batch_root = root(func.value)
            for loop in self._loops:
                if batch_root in loop.batch:
                    loop.moves = True
            # `next(batches).to(device)`, `x.to(device)` after `x, y = next(batches)`
            taken = _taken_from(func.value)
            key = self.key(taken) if taken is not None else self._taken.get(
                (self._scopes[-1][0], batch_root or ""))
            if key is not None:
                self.uses.setdefault(key, set()).add("moved")
                self.any_moved = True
        if isinstance(func, (cst.Name, cst.Attribute)) and self.qualified_name(func) in LOADERS:
            self._loader(node)
            return
        if isinstance(func, cst.Name):
            self._calls.setdefault(func.value, []).append(self._passes_tensor_datasets(node))
        name = last_name(func)
        how = "inspected" if name in _INSPECTING else None if name in _WRAPPING else "passed"
        if name == "next" and (self._loops or self._whiles):
            how = "iterated"  # `x, y = next(batches)` in a loop: a batch per step
        if how is not None:
            for arg in node.args:
                self._use(arg.value, how)

    def _is_tensor_dataset(self, node: cst.BaseExpression) -> bool:
        """`TensorDataset(...)` (torch's, or a project's own class of that name), a
        `Subset`, `random_split` part or `ConcatDataset` of such, or a variable bound
        to one."""
        if isinstance(node, cst.Call):
            made = (self.qualified_name(node.func) or last_name(node.func)).rpartition(".")[2]
            parts = node.args[0].value if node.args else None
            if made in _PARTS:  # a part of one, or its parts
                return parts is not None and self._is_tensor_dataset(parts)
            if made == "ConcatDataset" and isinstance(parts, (cst.List, cst.Tuple)):
                return bool(parts.elements) and all(
                    self._is_tensor_dataset(e.value) for e in parts.elements)
            return made == "TensorDataset"
        if isinstance(node, cst.Subscript):  # `random_split(dataset, sizes)[0]`
            return self._is_tensor_dataset(node.value)
        name = dotted(node)
        return name is not None and self.key(name) in self._tensor_datasets

    def _index_batcher(self, dataset: cst.Arg | None) -> bool:
        """`DataLoader(range(n), ...)`, `DataLoader(indices, ...)` after `indices =
        [...]`: it batches indices or values already in memory."""
        if dataset is None:
            return False
        return _in_memory(dataset.value, self.qualified_name, self._holds_in_memory)

    def _holds_in_memory(self, name: str) -> bool:
        return self.key(name) in self._in_memory

    def _passes_tensor_datasets(self, call: cst.Call) -> dict[int | str, bool | str | None] | None:
        """For a call `f(...)`: which arguments are `TensorDataset`s (True), or which
        function or class of the file made them (its name, judged at the end: see
        `_made_in_memory`); None when `*args` or `**kwargs` hide where they go."""
        if any(a.star for a in call.args):
            return None
        out: dict[int | str, bool | str | None] = {}
        for i, arg in enumerate(call.args):
            where = arg.keyword.value if arg.keyword is not None else i
            out[where] = self._is_tensor_dataset(arg.value) or self._dataset_class(arg.value)
        return out

    def _dataset_param(self, dataset: cst.BaseExpression) -> tuple[str, str, int] | None:
        """`(function, parameter, position)` when the dataset is a parameter of the
        function the loader is built in (and not rebound there)."""
        if not (isinstance(dataset, cst.Name) and self._functions):
            return None
        function, positional = self._functions[-1]
        if dataset.value not in positional or self.key(dataset.value) in self._tensor_datasets:
            return None
        return function, dataset.value, positional.index(dataset.value)

    def _through_parameter(self, loader: Loader) -> bool:
        """Every call of the loader's function in the file passes a `TensorDataset`
        for the dataset parameter (and there is at least one, and one definition)."""
        if loader.dataset_param is None:
            return False
        function, parameter, position = loader.dataset_param
        calls = self._calls.get(function, [])
        if self._defined.get(function) != 1 or not calls:
            return False
        return all(c is not None and self._made_in_memory(c.get(parameter, c.get(position)))
                   for c in calls)

    def _made_in_memory(self, made: bool | str | None) -> bool:
        """A `TensorDataset` (True), or the name of a class or function of the file
        that makes one (see `memory_class`, `_makes_tensor_datasets`)."""
        return made is True or isinstance(made, str) and (
            self.memory_class(made) or self._makes_tensor_datasets(made))

    def _loader(self, node: cst.Call) -> None:
        key = self._assigned.get(id(node))
        dataset = argument(node, "dataset", 0)
        self.loaders.append(Loader(
            node, key, None if key is not None else self._in_place.get(id(node), "passed"),
            self._loop_of.get(id(node)), self._index_batcher(dataset),
            dataset is not None and self._is_tensor_dataset(dataset.value),
            _one_batch(node), self.in_test,
            self._dataset_param(dataset.value) if dataset is not None else None,
            self._dataset_class(dataset.value) if dataset is not None else None,
            dataset is not None and self._placed(dataset.value)))

    def _placed(self, dataset: cst.BaseExpression) -> bool:
        """A dataset made on a device (`Cls(root, device=device)`: its tensors live
        there, or a `TensorDataset` of a tensor moved there), also inside
        `ConcatDataset([...])` or `Subset(d, indices)`, a
        variable bound to one (also unpacked: `a, b = tasksets(device=device)`), or
        an attribute of one (`a.dataset`)."""
        if isinstance(dataset, (cst.Name, cst.Attribute)):
            name = dotted(dataset)  # (`tasks.dataset` of a `tasks` made on a device too)
            return name is not None and (self.key(name) in self._placed_names or (
                isinstance(dataset, cst.Attribute) and self._placed(dataset.value)))
        if not isinstance(dataset, cst.Call):
            return False
        device = keyword(dataset, "device")
        if device is not None and _device_like(device.value):
            return True
        if isinstance(dataset.func, cst.Attribute) and self._moves_to_device(dataset):
            return True  # a tensor put there: `x.to(device)`, `x.cuda()`
        parts = [a.value for a in dataset.args if a.keyword is None]
        if last_name(dataset.func) in _COMBINING:
            parts = [e.value for p in parts for e in p.elements] if parts and isinstance(
                parts[0], (cst.List, cst.Tuple)) else parts[:1]
        elif not self._is_tensor_dataset(dataset):  # `TensorDataset(x.cuda(), y)`
            return False
        return any(self._placed(part) for part in parts)

    def _dataset_class(self, dataset: cst.BaseExpression) -> str | None:
        """The class `Cls` of the file (by name) that `dataset` is made by: `Cls(...)`,
        `make(...)` after `make = partial(Cls, ...)`, a variable bound to either, and a
        part of such a dataset (`Subset(d, indices)`, `random_split(d, sizes)[0]`)."""
        if isinstance(dataset, cst.Subscript):
            dataset = dataset.value
        if isinstance(dataset, cst.Call) and last_name(dataset.func) in _PARTS:
            return self._dataset_class(dataset.args[0].value) if dataset.args else None
        if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name):
            if self.qualified_name(dataset.func) == "functools.partial" and dataset.args:
                made = dataset.args[0].value
                return made.value if isinstance(made, cst.Name) else None
            return self._instances.get(self.key(dataset.func.value), dataset.func.value)
        name = dotted(dataset)
        return self._instances.get(self.key(name)) if name is not None else None

    def _makes_tensor_datasets(self, name: str | None) -> bool:
        """A function of the file (one definition) every `return` of which gives a
        `TensorDataset`: `dataset = load_examples(...)`."""
        returns = self._returns.get(name or "")
        return bool(returns) and all(returns) and self._defined.get(name or "") == 1

    def methods(self, class_name: str | None, name: str) -> list[cst.FunctionDef]:
        """The methods `name` of the file's classes `class_name` (all definitions)."""
        return [statement for cls in self.classes.get(class_name or "", ())
                for statement in cls.body.body
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name]

    def memory_class(self, class_name: str | None) -> bool:
        """A class of the file (one definition) whose `__getitem__` calls only
        conversions, views and torch or NumPy computation (`_cheap`), and whose
        other methods call nothing that may build what reads on indexing
        (`_lazy`: a dataset, an HDF5 or memory-mapped file): a hand-written
        `TensorDataset`, whatever `__init__` read once. (Judged as the walk goes,
        where the methods' own imports resolve.)"""
        if len(self.classes.get(class_name or "", ())) != 1 or class_name in self._not_in_memory:
            return False
        return len(self.methods(class_name, "__getitem__")) == 1 and len(
            self.methods(class_name, "__init__")) <= 1

    def _cheap(self, call: cst.Call) -> bool:
        """A conversion, a view or a container (`_CHEAP_CALLS`), or torch or NumPy
        computation other than reading a file."""
        func = call.func
        qualified = (self.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute))
                     else None) or ""
        module, _, function = qualified.partition(".")
        if module in ("torch", "numpy"):
            return (function.rpartition(".")[2] not in _READERS
                    and not function.startswith("utils."))
        if qualified:
            return module == "builtins" and function in _CHEAP_CALLS
        return isinstance(func, cst.Attribute) and func.attr.value in _CHEAP_CALLS

    def _lazy(self, call: cst.Call) -> bool:
        """In a method other than `__getitem__`: a call that may build something
        that reads on indexing (a dataset, an HDF5 or memory-mapped file), or a
        function of unknown origin (a local name; not a class of the file seen
        above without `__getitem__`, such as an encoder module)."""
        func = call.func
        if any(a.keyword is not None and a.keyword.value in ("mmap_mode", "mmap")
               for a in call.args):
            return True
        if type(func) is cst.Attribute and func.attr.value == "__init__":
            return False  # `Dataset.__init__(self)`: the base class's, which builds nothing
        qualified = (self.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute))
                     else None) or ""
        if not qualified:
            return isinstance(func, cst.Name) and not (  # a local function (unknown); else a method
                func.value in self.classes and not self.methods(func.value, "__getitem__"))
        return "dataset" in qualified.lower() or qualified == "numpy.memmap" or \
            qualified.partition(".")[0] in _LAZY_MODULES

    # -- verdicts ------------------------------------------------------------------------
    def how_used(self, loader: Loader) -> set[str]:
        """"iterated", "moved", "passed", "inspected": what happens to the loader."""
        if loader.key is None:
            used = {loader.context or "passed"}
            if loader.loop is not None and id(loader.loop) in self._moved_loops and \
                    loader.context != "inspected":  # (a look at a few batches moves them too)
                used.add("moved")
            return used
        used = set(self.uses.get(loader.key, ()))
        for alias, key in self._aliases.items():  # `pbar = tqdm(loader)`
            if key == loader.key:
                used |= self.uses.get(alias, set())
        return used

    def skipped(self, loader: Loader) -> bool:
        """No advice about loading applies: indices or in-memory values batched, the whole
        dataset in one batch, or a loader that is never iterated nor passed on."""
        if loader.index_batcher or loader.one_batch or loader.on_device:
            return True
        return not self.how_used(loader) & {"iterated", "passed", "moved"}

    def leave_Module(self, original_node: cst.Module) -> None:
        for loader in self.loaders:
            loader.tensor_dataset = (loader.tensor_dataset or self._through_parameter(loader)
                                     or self.memory_class(loader.dataset_class)
                                     or self._makes_tensor_datasets(loader.dataset_class))
            self.check(loader)

    def check(self, loader: Loader) -> None:
        raise NotImplementedError


_FEW = 10  # batches: a look at the data, not a pass over it


def _first_batch_only(loop: cst.For) -> bool:
    """A loop whose body ends in an unconditional `break` (it takes one batch),
    or, over `enumerate(...)`, ends or begins with `if i == 1: break` (`>=`, `>`;
    at most `_FEW`): a few batches. A bound that is not a literal (`if i ==
    args.n_samples - 1: break`) counts as a few when the loop neither
    backpropagates nor steps: samples taken to look at, not a pass over the data."""
    last = last_statement(loop.body)
    if isinstance(last, cst.Break) or _waits_for_the_user(loop):
        return True
    first = loop.body.body[0] if isinstance(loop.body, cst.IndentedBlock) else None
    return _stops_early(loop, last) or _stops_early(loop, first)


def _waits_for_the_user(loop: cst.For) -> bool:
    """A loop that shows batches one at a time and waits for the user between them
    (`cv2.waitKey()`, `plt.show()`, `input()`) and neither backpropagates nor steps."""
    calls = [node for node in descendants(loop.body) if isinstance(node, cst.Call)]
    return any(dotted(call.func) in _WAITS for call in calls) and not any(
        _trains(last_name(call.func)) for call in calls)


_WAITS = frozenset({"cv2.waitKey", "plt.show", "pyplot.show", "matplotlib.pyplot.show", "input"})


def _stops_early(loop: cst.For, guard: cst.CSTNode | None) -> bool:
    """`if i >= n: break` (`==`, `>`) on the counter of `loop`, over `enumerate(...)`,
    with `n` a few (see `_first_batch_only`)."""
    if not (isinstance(guard, cst.If) and guard.orelse is None
            and isinstance(last_statement(guard.body), cst.Break)):
        return False
    test, target = guard.test, loop.target
    counter = (target.elements[0].value if isinstance(target, cst.Tuple) and target.elements
               else None)
    iterated = loop.iter
    while isinstance(iterated, cst.Call) and last_name(iterated.func) in ("tqdm", "trange") \
            and iterated.args and iterated.args[0].keyword is None:
        iterated = iterated.args[0].value  # `tqdm(enumerate(loader), total=n)`
    if not (isinstance(iterated, cst.Call) and last_name(iterated.func) == "enumerate"
            and len(iterated.args) == 1 and isinstance(counter, cst.Name)
            and isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.left, cst.Name) and test.left.value == counter.value
            and isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual,
                                                          cst.GreaterThan))):
        return False
    bound = test.comparisons[0].comparator
    if isinstance(bound, cst.Integer):
        return bound.evaluated_value < _FEW
    return not any(isinstance(node, cst.Call) and _trains(last_name(node.func))
                   for node in descendants(loop.body))


def _trains(name: str | None) -> bool:
    """A call that trains on what the loop reads: `loss.backward()`, `opt.step()`,
    or a helper named for it (`train_step(batch)`, `self.optimize(x)`)."""
    return name is not None and (name in ("backward", "step") or "train" in name.lower()
                                 or "optimi" in name.lower())


def _argument_of(node: cst.BaseExpression, function: str) -> cst.BaseExpression | None:
    """`X` of `iter(X)` or `next(X)` (`function` names which)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and \
            node.func.value == function and node.args and node.args[0].keyword is None:
        return node.args[0].value
    return None


def _taken_from(node: cst.BaseExpression) -> str | None:
    """`batches` of `next(batches)`."""
    batches = _argument_of(node, "next")
    return dotted(batches) if batches is not None else None


def _names_or_calls(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return [el.value for el in node.elements]
    return [node]


def _device_like(node: cst.BaseExpression) -> bool:
    """`"cuda"`, `"cuda:0"`, `device`, `self.device`, `args.device`, `torch.device(...)`."""
    if isinstance(node, cst.SimpleString):
        return str(node.evaluated_value).startswith("cuda")
    if isinstance(node, cst.Name):
        return "device" in node.value.lower()
    if isinstance(node, cst.Attribute):
        return "device" in node.attr.value.lower()
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value == "device"
    return False
