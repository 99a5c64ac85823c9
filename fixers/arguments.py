"""Edits to a call's arguments."""
from __future__ import annotations

import libcst as cst

_SPACE = cst.SimpleWhitespace(" ")
_NONE = cst.SimpleWhitespace("")


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    """The `name=` argument of `call`, or None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_args(call: cst.Call) -> bool:
    """Whether `*args` or `**kwargs` may supply any argument."""
    return any(arg.star for arg in call.args)


def _expr(value: str | cst.BaseExpression) -> cst.BaseExpression:
    return cst.parse_expression(value) if isinstance(value, str) else value


def with_keyword(call: cst.Call, name: str, value: str | cst.BaseExpression) -> cst.Call:
    """`call` with `name=value`: replaced in place if present, else added after the
    last plain argument (before any `**kwargs`), in the call's own comma style."""
    existing = keyword(call, name)
    if existing is not None:
        return call.with_deep_changes(existing, value=_expr(value))
    new = cst.Arg(value=_expr(value), keyword=cst.Name(name),
                  equal=cst.AssignEqual(whitespace_before=_NONE, whitespace_after=_NONE))
    args = list(call.args)
    at = next((i for i, a in enumerate(args) if a.star == "**"), len(args))
    if at < len(args):
        new = new.with_changes(comma=cst.Comma(whitespace_after=_SPACE))
    elif args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):  # keep a trailing comma where it was
            new = new.with_changes(comma=last.comma)
            sibling = args[-2].comma if len(args) > 1 else None
            args[-1] = last.with_changes(
                comma=sibling if isinstance(sibling, cst.Comma) else cst.Comma(whitespace_after=_SPACE))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_SPACE))
    args.insert(at, new)
    return call.with_changes(args=args)


def without_keywords(call: cst.Call, *names: str) -> cst.Call:
    """`call` without the named keyword arguments."""
    kept = [a for a in call.args if not (a.keyword is not None and a.keyword.value in names)]
    if len(kept) == len(call.args):
        return call
    if kept and kept[-1] is not call.args[-1]:
        # the old last argument is gone: the new last one takes its trailing comma (or none)
        kept[-1] = kept[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=kept)


def positional(call: cst.Call, index: int) -> cst.Arg | None:
    """The `index`-th positional argument (no keyword, no star), or None."""
    plain = [a for a in call.args if a.keyword is None and not a.star]
    return plain[index] if index < len(plain) else None


def argument(call: cst.Call, name: str, index: int | None = None) -> cst.Arg | None:
    """The argument bound to parameter `name`: the `name=` keyword, else the
    `index`-th plain positional argument (when `index` is given), else None.
    Positions after a `*args` are unknown, so they give None."""
    found = keyword(call, name)
    if found is not None or index is None:
        return found
    for i, arg in enumerate(call.args):
        if arg.keyword is not None or arg.star == "**":
            break
        if arg.star:
            return None
        if i == index:
            return arg
    return None


def renamed_keywords(call: cst.Call, names: dict[str, str]) -> cst.Call:
    """`call` with keyword arguments renamed (`{"input": "A"}`)."""
    args = [
        a.with_changes(keyword=cst.Name(names[a.keyword.value]))
        if a.keyword is not None and a.keyword.value in names else a
        for a in call.args
    ]
    return call.with_changes(args=args)
