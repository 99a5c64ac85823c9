"""PTL331 save-whole-module."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import keyword
from ptlint.fixers.expressions import call_method
from ptlint.model import Safety
from ptlint.rule import Rule
from ptlint.rules._serialization import copies_through_memory

_SAVE = ("torch.save",)
_MODULE_BASES = ("torch.nn.Module", "torch.nn.modules.module.Module", "lightning.LightningModule",
                 "lightning.pytorch.LightningModule", "pytorch_lightning.LightningModule")
# torch.nn names that are not module classes
_NN_NOT_MODULES = frozenset({"Parameter", "UninitializedParameter", "UninitializedBuffer",
                             "ParameterList", "ParameterDict"})
# methods only modules have: calling one shows the name holds a module
_MODULE_ONLY = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children",
                          "named_children", "buffers", "named_buffers", "register_buffer",
                          "register_forward_hook", "register_forward_pre_hook"})


class _Binding:
    __slots__ = ("module", "placeholder", "items", "changed")

    def __init__(self, module: bool, placeholder: bool = False, items: list | None = None) -> None:
        self.module = module  # known or shown (by a module-only method) to hold a module
        self.placeholder = placeholder  # a global used before the file binds it
        self.items = items  # the values of the dict, list or tuple display it is bound to
        self.changed = False  # an item set or the container changed by a method


# methods that change a dict or list in place
_CHANGES = frozenset({"update", "pop", "setdefault", "append", "extend", "insert", "clear",
                      "remove", "popitem", "__setitem__"})


# methods that return the module they are called on
_RETURNS_SELF = frozenset({"to", "cuda", "cpu", "train", "eval", "half", "float", "double",
                           "bfloat16", "requires_grad_", "apply", "share_memory", "to_empty",
                           "xpu", "mps", "type"})


class SaveWholeModule(Rule):
    """
    ## What it does
    Flags `torch.save(model, path)` where `model` is known to be an
    `nn.Module`: `self` inside a class derived from `nn.Module`, a name
    assigned a `torch.nn` layer, a `torchvision.models` model or an instance
    of a module class defined in the same file (also after `.to(device)`,
    `.cuda()`, `.eval()`, ...), a name annotated `nn.Module`, or a name whose
    binding has a method only modules have called on it (`.parameters()`,
    `.named_modules()`, ...). A module as a value of a dict literal, or an
    item of a list or tuple literal, being saved is flagged too (also through
    a name bound to one and not changed after: `state = {"net": net, ...}`,
    then `torch.save(state, path)`), and so is `model.module` of such a name (the model
    inside a `DataParallel` or `DistributedDataParallel` wrapper). A save into
    a name bound to an empty `io.BytesIO()` that the same function
    `torch.load`s back is a deep copy through memory, no checkpoint: not
    flagged.

    ## Why is this bad?
    Saving the module object pickles it, and pickle stores its class by
    import path (`mypackage.models.Net`). Loading then needs the very same
    code at the very same path: renaming a file, moving a class or changing
    an attribute breaks old checkpoints. Since PyTorch 2.6 `torch.load`
    defaults to `weights_only=True` and refuses such checkpoints unless the
    loader opts into `weights_only=False`, which runs arbitrary code from the
    file. A `state_dict()` holds only tensors: it loads with
    `weights_only=True` into any compatible model with
    `model.load_state_dict(...)`.

    ## Example
    ```python
    import torch
    import torch.nn as nn
    model = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
    torch.save(model, "model.pt")
    ```

    Use instead:
    ```python
    import torch
    import torch.nn as nn
    model = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
    torch.save(model.state_dict(), "model.pt")
    # later: model.load_state_dict(torch.load("model.pt", weights_only=True))
    ```

    ## Fix safety
    Unsafe: the fix saves `model.state_dict()` instead of `model`, so the
    code that loads the file must change too (build the model, then
    `model.load_state_dict(torch.load(path, weights_only=True))`). No fix
    is offered in a file that itself calls `torch.load` without
    `weights_only=True`: it may read the whole module back, which a state
    dict cannot replace.

    ## References
    - [Saving and loading models: save/load `state_dict` (recommended)](https://pytorch.org/tutorials/beginner/saving_loading_models.html#save-load-state-dict-recommended)
    - [`torch.load` and `weights_only`](https://pytorch.org/docs/stable/generated/torch.load.html)
    """

    code = "PTL331"
    message = "`torch.save()` of a whole module pickles its class: save its `state_dict()`"
    fix_title = "Save `state_dict()` instead"
    fix_safety = Safety.UNSAFE
    tags = ("security",)
    security_severity = 5.0  # medium: its readers must load with weights_only=False
    requires_text = ("save",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.module_classes: set[str] = set()
        self.kinds: list[bool | None] = []  # per enclosing def: a class (module or not) or None
        self.scopes: list[dict[str, _Binding]] = [{}]
        self.saves: list[tuple[cst.BaseExpression, _Binding]] = []
        self.loads_objects = False  # a `torch.load` that may read a whole module back

    def visit_Module(self, node: cst.Module) -> None:
        self.tree = node

    # -- classes, functions, names ----------------------------------------------
    def _is_module_class(self, node: cst.BaseExpression) -> bool:
        qualified = self.qualified_name(node)
        if qualified is not None:
            if qualified in _MODULE_BASES:
                return True
            if qualified.startswith("torch.nn.") and qualified.count(".") == 2:
                name = qualified.rsplit(".", 1)[1]
                return name[:1].isupper() and name not in _NN_NOT_MODULES
            return False
        return isinstance(node, cst.Name) and node.value in self.module_classes

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        is_module = any(self._is_module_class(b.value) for b in node.bases)
        if is_module:
            self.module_classes.add(node.name.value)
        self.kinds.append(is_module)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.kinds.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        scope: dict[str, _Binding] = {}
        for param in params:
            annotation = param.annotation.annotation if param.annotation else None
            scope[param.name.value] = _Binding(
                annotation is not None and self._is_module_class(annotation))
        is_static = any(isinstance(d.decorator, cst.Name) and d.decorator.value in
                        ("staticmethod", "classmethod") for d in node.decorators)
        if self.kinds and self.kinds[-1] and params and not is_static:
            scope[params[0].name.value] = _Binding(True)  # `self` of a module's method
        self.scopes.append(scope)
        self.kinds.append(None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()
        self.kinds.pop()

    def _binding(self, node: cst.BaseExpression) -> _Binding | None:
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in _RETURNS_SELF:
            node = node.func.value  # `model.eval()`, `model.cpu()`
        if not isinstance(node, cst.Name):
            return None
        for scope in reversed(self.scopes):
            if node.value in scope:
                return scope[node.value]
        if self.qualified_name(node) is not None:
            return None  # an import or a builtin
        # a global bound later in the file, or never: evidence may still come
        return self.scopes[0].setdefault(node.value, _Binding(False, placeholder=True))

    def _holds_module(self, node: cst.BaseExpression) -> bool:
        binding = self._binding(node)
        return binding is not None and binding.module

    def _creates_module(self, value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in _RETURNS_SELF:
            value = value.func.value
        if isinstance(value, cst.Name):
            return self._holds_module(value)
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return False
        if self._is_module_class(value.func):
            return True
        qualified = self.qualified_name(value.func) or ""
        if qualified.startswith("torchvision.models."):
            return qualified.rsplit(".", 1)[1][:1].islower()  # resnet18(), not a weights enum
        return qualified == "timm.create_model"

    def visit_Assign(self, node: cst.Assign) -> None:
        holds = self._creates_module(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):  # `state["net"] = ...`
                self._changed(target.target.value)
            if isinstance(target.target, cst.Name) and len(node.targets) == 1 and _items(
                    node.value) is not None:  # `state = {"net": net, ...}`
                self.scopes[-1][target.target.value] = _Binding(False, items=_items(node.value))
            elif isinstance(target.target, cst.Name):
                name = target.target.value
                old = self.scopes[-1].get(name)
                if old is not None and old.placeholder:  # the global a function used earlier
                    old.placeholder = False
                    old.module = old.module or holds
                else:
                    self.scopes[-1][name] = _Binding(holds)

    def _changed(self, node: cst.BaseExpression) -> None:
        binding = self._binding(node) if isinstance(node, cst.Name) else None
        if binding is not None:
            binding.changed = True

    # -- the save -------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _CHANGES:
            self._changed(func.value)
        if isinstance(func, cst.Attribute) and func.attr.value in _MODULE_ONLY:
            binding = self._binding(func.value)
            if binding is not None:
                binding.module = True
            return
        qualified = self.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if qualified in _SAVE + ("torch.load",) and copies_through_memory(self, node, self.tree):
            return  # a deep copy through `io.BytesIO()`: no checkpoint
        if qualified == "torch.load":
            flag = keyword(node, "weights_only")
            self.loads_objects |= not (flag is not None and isinstance(flag.value, cst.Name)
                                       and flag.value.value == "True")
        if qualified not in _SAVE or not node.args:
            return
        obj = node.args[0]
        if obj.keyword is not None or obj.star:
            return
        container = self._binding(obj.value) if isinstance(obj.value, cst.Name) else None
        if container is not None and container.items is not None:
            values = container.items  # `state = {"net": net, ...}`, then `torch.save(state, p)`
        else:  # `{"net": net}`, `[model, criterion, optimizer]`, or the object itself
            values, container = _items(obj.value) or [obj.value], None
        for value in values:
            # `model.module`: the model inside a `DataParallel`/DDP wrapper (or a
            # submodule of a module): a module when `model` holds one
            binding = self._binding(value.value if isinstance(value, cst.Attribute)
                                    and value.attr.value == "module" else value)
            if binding is not None:
                self.saves.append((value, binding, container))

    def leave_Module(self, node: cst.Module) -> None:
        for value, binding, container in self.saves:
            if binding.module and not (container is not None and container.changed):
                fix = None if self.loads_objects else call_method(value, "state_dict")
                self.report(value, replacement=fix)


def _items(value: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The values of a dict display, or the items of a list or tuple display."""
    if isinstance(value, cst.Dict):
        return [e.value for e in value.elements if isinstance(e, cst.DictElement)]
    if isinstance(value, (cst.List, cst.Tuple)):
        return [e.value for e in value.elements if isinstance(e, cst.Element)]
    return None
