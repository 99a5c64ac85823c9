"""Edits and tests on expressions."""
from __future__ import annotations

import libcst as cst

# Nodes that can be the receiver of `.method()` or the operand of a unary `-`
# without parentheses.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString,
          cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float, cst.Imaginary,
          cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp,
          cst.GeneratorExp)


def is_one(node: cst.BaseExpression) -> bool:
    """The literal `1` or `1.0` (any spelling of one: `1.`, `1.00`)."""
    if isinstance(node, cst.Integer):
        return node.evaluated_value == 1
    if isinstance(node, cst.Float):
        return node.evaluated_value == 1.0
    return False


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node`, in parentheses unless it is an atom (or already has them)."""
    if node.lpar or isinstance(node, _ATOMS):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def bare(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` without its own parentheses (for use as a call argument)."""
    return node.with_changes(lpar=[], rpar=[]) if node.lpar else node


def negated(node: cst.BaseExpression) -> cst.BaseExpression:
    """`-node`, parenthesizing `node` where needed; `-(-x)` becomes `x`."""
    if (isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus)
            and not node.lpar):
        return node.expression
    if isinstance(node, (cst.Integer, cst.Float)) or node.lpar or isinstance(node, _ATOMS):
        return cst.UnaryOperation(operator=cst.Minus(), expression=node)
    return cst.UnaryOperation(operator=cst.Minus(), expression=parenthesized(node))


# Expressions that `.attr` binds to as a whole (not a bare number: `1.x`; not
# implicitly concatenated strings: `"a" "b".x`; not a tuple without parentheses).
_RECEIVERS = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.FormattedString,
    cst.List, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp,
)


def as_receiver(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr`, parenthesized when `expr.attr` would bind to only part of it
    (`a + b`, `-x`, `1`, `x if c else y`, an unparenthesized tuple)."""
    if expr.lpar or isinstance(expr, _RECEIVERS):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def call_method(receiver: cst.BaseExpression, method: str, *args: cst.Arg) -> cst.Call:
    """`receiver.method(*args)`, parenthesizing the receiver where needed:
    `loss` → `loss.detach()`, `loss * n` → `(loss * n).detach()`."""
    return cst.Call(func=cst.Attribute(value=as_receiver(receiver), attr=cst.Name(method)),
                    args=args)


def wrapped_in_call(expr: cst.BaseExpression, dotted: str) -> cst.Call:
    """`dotted(expr)`: `model.state_dict()` → `copy.deepcopy(model.state_dict())`.
    Parentheses around `expr` become redundant and are dropped (except around a
    tuple or a yield, which need them)."""
    redundant = expr.lpar and not isinstance(expr, (cst.Tuple, cst.Yield))
    inner = expr.with_changes(lpar=[], rpar=[]) if redundant else expr
    return cst.Call(func=cst.parse_expression(dotted), args=[cst.Arg(value=inner)])


_EXACT_INT = 2**53  # ints below this convert to the same float either way


def float_literal(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`1` -> `1.0`, `-2` -> `-2.0`, `0.5` stays; None for anything but a real number."""
    if isinstance(node, cst.Float):
        return node
    if isinstance(node, cst.Integer):
        value = node.evaluated_value
        if abs(value) >= _EXACT_INT:
            return None
        return cst.Float(repr(float(value)))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        inner = float_literal(node.expression)
        return None if inner is None else node.with_changes(expression=inner)
    return None


def as_floats(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """A nested list/tuple of real-number literals with every int written as a float."""
    if isinstance(node, (cst.List, cst.Tuple)):
        elements = []
        for el in node.elements:
            if isinstance(el, cst.StarredElement):
                return None
            value = as_floats(el.value)
            if value is None:
                return None
            elements.append(el.with_changes(value=value))
        return node.with_changes(elements=elements)
    return float_literal(node)


def is_sequence_display(node: cst.BaseExpression) -> bool:
    """Data for sure: a list/tuple display or comprehension, `[0] * n`, or a
    concatenation that makes a list or a tuple: not `(n,) + x.size()`, a
    `torch.Size` (its `__radd__` keeps the type), nor `(n,) + shape`, which may be one."""
    if isinstance(node, (cst.List, cst.Tuple, cst.ListComp)):
        return True
    if not isinstance(node, cst.BinaryOperation):
        return False
    if isinstance(node.operator, cst.Multiply):
        return is_sequence_display(node.left) or is_sequence_display(node.right)
    if isinstance(node.operator, cst.Add):  # a list adds only to a list
        return isinstance(node.left, (cst.List, cst.ListComp)) or isinstance(
            node.right, (cst.List, cst.ListComp)) or (
            is_sequence_display(node.left) and is_sequence_display(node.right))
    return False


def is_size(node: cst.BaseExpression) -> bool:
    """A size for sure: an int literal, `x.size()` (a `torch.Size`), `x.size()`
    joined to a tuple display (`x.size() + (n,)`, a `torch.Size` too), or an int
    (`len(x)`, `int(n)`, `x.size(0)`, `x.numel()`). Not `x.shape`: an array's or
    a gym space's `.shape` is a tuple, which a legacy constructor takes as data."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        sides = (node.left, node.right)
        return any(isinstance(s, cst.Tuple) for s in sides) and any(_whole_size(s) for s in sides)
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Name):
        return node.func.value in ("len", "int") and len(node.args) == 1
    return (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("size", "numel")
            and len(node.args) <= (node.func.attr.value == "size"))


def _whole_size(node: cst.BaseExpression) -> bool:
    """`x.size()`: a `torch.Size`, not one of its ints."""
    return (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "size")
