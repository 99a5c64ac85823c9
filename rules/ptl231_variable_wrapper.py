"""PTL231 variable-wrapper."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import keyword, with_keyword
from ptlint.analysis.dataflow import assigned_pairs
from ptlint.analysis.names import dotted
from ptlint.fixers.expressions import call_method
from ptlint.fixers.statements import without_statement
from ptlint.model import Safety
from ptlint.rules._symbols import VersionBranches

_VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")
# torch factories whose result is a new tensor that does not require grad
_FACTORIES = frozenset(f"torch.{n}" for n in (
    "tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
    "randperm", "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like", "empty_like",
    "full_like", "rand_like", "randn_like", "randint_like", "bernoulli", "multinomial",
))
# factories that also take `requires_grad=` (not the integer/random-index ones)
_TAKES_REQUIRES_GRAD = frozenset(f"torch.{n}" for n in (
    "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "arange", "linspace", "logspace",
    "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
))
_PRIMARY = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Tuple, cst.Dict,
            cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Integer,
            cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def _parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, _PRIMARY) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _keep_call_parentheses(call: cst.Call, new: cst.BaseExpression) -> cst.BaseExpression:
    """`Variable(` and `)` around a multi-line argument become plain parentheses when the
    argument's line breaks need them, or the call's comments would be lost without them."""
    last = call.args[-1]
    before = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) \
        else last.whitespace_after_arg
    try:
        compile(_code(new), "<fix>", "eval")
        bare = "#" not in _code(call.whitespace_before_args) + _code(before)
    except SyntaxError:
        bare = False
    if bare:
        return new
    return new.with_changes(lpar=[cst.LeftParen(whitespace_after=call.whitespace_before_args)],
                            rpar=[cst.RightParen(whitespace_before=before)])


class VariableWrapper(VersionBranches):
    """
    ## What it does
    Flags calls to `torch.autograd.Variable(...)`. Calls in a branch of an
    `if` that tests the torch version (`if torch.__version__ < "0.4":`) are
    compatibility code and are not reported, nor is `Variable()` without
    arguments (`isinstance(Variable(), torch.Tensor)` asks which version runs).

    ## Why is this bad?
    Since PyTorch 0.4 every tensor is a variable: `Variable(x)` no longer
    adds autograd tracking, it just returns `x.detach()` (a new tensor that
    shares `x`'s memory and never requires grad), and `volatile=` has no
    effect at all. Code that still wraps tensors reads as if it needed the
    wrapper, hides that detach, and uses an API kept only for backward
    compatibility. Use the tensor directly; use `requires_grad=True` on the
    factory, or `x.requires_grad_()`, for leaves that need gradients, and
    `torch.no_grad()` where `volatile=True` was meant.

    ## Example
    ```python
    from torch.autograd import Variable
    inputs = Variable(images.cuda())
    noise = Variable(torch.randn(4, 100), requires_grad=True)
    ```

    Use instead:
    ```python
    inputs = images.cuda()
    noise = torch.randn(4, 100, requires_grad=True)
    ```

    ## Fix safety
    The fix removes the wrapper: `Variable(x)` becomes `x`, and
    `Variable(x, requires_grad=True)` becomes `x.detach().requires_grad_()`,
    the new leaf `Variable` made (`x.requires_grad_()` when `x` is already a
    new tensor, as below, or passes `requires_grad=True` to a torch factory
    that takes it), and `Variable(x, requires_grad=False)`, which says no
    gradient may flow through `x`, becomes `x.detach()`: those forms are
    safe whatever `x` is. `volatile=` is dropped. A statement of its own that would be
    left as `x = x` (`x = Variable(x)`, `self.h = Variable(self.h)`,
    `x, y = Variable(x), Variable(y)`) is removed, with the comments above it kept above the next statement
    (not when it is alone in its block, or a comment follows it on its line).

    It is safe when `x` is a brand-new tensor that does not require grad: a
    torch factory call such as `torch.randn(...)`, `torch.from_numpy(...)`
    or `torch.tensor(...)`, or `x.data` / `x.detach()` (also followed by
    `.clone()`). Otherwise it is
    unsafe, because `Variable(x)` detaches: if `x` requires grad,
    gradients now flow back through it. For the usual case, a batch from a
    data loader, both forms compute the same thing.

    The now unused `from torch.autograd import Variable` is left in place.

    ## References
    - [PyTorch 0.4 migration guide: merging Tensor and Variable](https://pytorch.org/blog/pytorch-0_4_0-migration-guide/)
    - [Autograd: locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    code = "PTL231"
    message = "`Variable(...)` is a leftover from PyTorch < 0.4: tensors are variables"
    fix_title = "Use the tensor directly"
    fix_safety = Safety.UNSAFE
    requires_text = ("Variable",)
    semantic = True  # where a statement that the fix leaves as `x = x` is
    hasattr_too = False  # `if not hasattr(self, "w"):` tests no version here

    def __init__(self, context) -> None:
        super().__init__(context)
        self.slots: set[int] = set()  # expressions that never need parentheses
        # `x = Variable(x)`, `x, y = Variable(x), Variable(y)`: the statement, by call
        self.rebinding: dict[int, cst.Assign] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        self.slots.add(id(node.value))
        pairs = [(dotted(t), v) for t, v in assigned_pairs(node.targets[0].target, node.value)] \
            if len(node.targets) == 1 else []
        if pairs and all(name is not None and name in (dotted(value), self._unwrapped(value))
                         for name, value in pairs):  # the fix leaves `x = x`, `x, y = x, y`
            self.rebinding.update((id(value), node) for _, value in pairs
                                  if isinstance(value, cst.Call))

    def _unwrapped(self, value: cst.BaseExpression) -> str | None:
        """`x` for `Variable(x)` or `Variable(x, volatile=...)`, which the fix makes `x`."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute))
                and len(value.args) in (1, 2) and value.args[0].keyword is None
                and not value.args[0].star and all(a.keyword is not None and a.keyword.value
                                                   == "volatile" for a in value.args[1:])):
            return None
        return dotted(value.args[0].value) if self.qualified_name(value.func) in _VARIABLE \
            else None

    def visit_Arg(self, node: cst.Arg) -> None:
        self.slots.add(id(node.value))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.slots.add(id(node.value))

    def visit_Element(self, node: cst.Element) -> None:
        self.slots.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, (cst.Name, cst.Attribute)):
            return
        if not node.args or self.qualified_name(node.func) not in _VARIABLE or \
                self.in_version_branch():
            return  # (`Variable()`, empty: a probe of what the torch version makes)
        plain = [a for a in node.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        if (len(plain) != 1 or any(a.star for a in node.args) or node.args[0] is not plain[0]
                or keywords - {"requires_grad", "volatile"}):
            self.report(node)
            return
        data = plain[0].value
        fresh = self._fresh(data)
        flag = keyword(node, "requires_grad")
        wants_grad = flag is not None and not (
            isinstance(flag.value, cst.Name) and flag.value.value == "False")
        if flag is not None and not wants_grad and not fresh:
            # `Variable(x, requires_grad=False)` says: no gradient through `x`
            new: cst.BaseExpression = call_method(_parenthesized(data), "detach")
            fresh = True  # the same tensor as Variable's
        elif not wants_grad:
            new = data
            if id(node) not in self.slots:
                new = _parenthesized(data)
        elif (isinstance(data, cst.Call) and self.qualified_name(data.func) in _TAKES_REQUIRES_GRAD
              and not any(a.star for a in data.args) and keyword(data, "requires_grad") is None):
            new = with_keyword(data, "requires_grad", flag.value)
        else:
            args = () if isinstance(flag.value, cst.Name) and flag.value.value == "True" \
                else (cst.Arg(flag.value),)
            # `Variable(x, requires_grad=True)` is a new leaf: `x.detach()`, not `x` itself
            leaf = _parenthesized(data) if fresh else call_method(_parenthesized(data), "detach")
            new = call_method(leaf, "requires_grad_", *args)
            fresh = True  # the same tensor as Variable's
        safety = Safety.SAFE if fresh else Safety.UNSAFE
        rebinding = self.rebinding.get(id(node))
        if rebinding is not None:  # the fix would leave `x = x`: the statement goes
            found = self.model.site(rebinding).alone(())
            if found is not None and len(found[0].body) > 1 \
                    and found[1].trailing_whitespace.comment is None:
                block, line = found  # (a block of its own, or a comment after it: kept)
                self.report(node, edits=[(block, without_statement(block, line))],
                            safety=safety)
                return
        if node.lpar:  # `(Variable(x))`: the parentheses belong to the call
            new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        elif not new.lpar and "\n" in _code(node):
            new = _keep_call_parentheses(node, new)
        self.report(node, replacement=new, safety=safety)

    def _fresh(self, data: cst.BaseExpression) -> bool:
        """A new tensor that does not require grad and nothing else refers to."""
        if isinstance(data, cst.Attribute) and data.attr.value == "data":
            return True
        if isinstance(data, cst.Call):
            if isinstance(data.func, cst.Attribute) and data.func.attr.value == "detach" \
                    and not data.args:
                return True
            if isinstance(data.func, cst.Attribute) and data.func.attr.value == "clone":
                return self._fresh(data.func.value)  # `x.detach().clone()`
            if isinstance(data.func, (cst.Name, cst.Attribute)) \
                    and self.qualified_name(data.func) in _FACTORIES:
                flag = keyword(data, "requires_grad")
                return flag is None or (isinstance(flag.value, cst.Name)
                                        and flag.value.value == "False")
        return False
