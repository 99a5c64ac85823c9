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
    last plain argument (before any `**kwargs`), in the call's own comma style; a
    comment that ends the last argument's line stays with that argument."""
    existing = keyword(call, name)
    if existing is not None:
        return call.with_deep_changes(existing, value=_expr(value))
    new = cst.Arg(value=_expr(value), keyword=cst.Name(name),
                  equal=cst.AssignEqual(whitespace_before=_NONE, whitespace_after=_NONE))
    args = list(call.args)
    at = next((i for i, a in enumerate(args) if a.star == "**"), len(args))
    if at < len(args):
        new = new.with_changes(comma=cst.Comma(whitespace_after=_SPACE))
    elif args and _commented(args[-1]):
        args[-1], new = _after_comment(call, args[-1], new)
    elif args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):  # keep a trailing comma where it was
            new = new.with_changes(comma=last.comma)
            sibling = args[-2].comma if len(args) > 1 else None
            args[-1] = last.with_changes(
                comma=sibling if isinstance(sibling, cst.Comma) else cst.Comma(whitespace_after=_SPACE))
        else:
            # `f(a\n)`: the line break before `)` moves after the new argument
            new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_SPACE),
                                         whitespace_after_arg=_NONE)
    args.insert(at, new)
    return call.with_changes(args=args)


def _tail(arg: cst.Arg) -> cst.BaseParenthesizableWhitespace:
    """The whitespace after an argument and its comma, if any."""
    if isinstance(arg.comma, cst.Comma):
        return arg.comma.whitespace_after
    return arg.whitespace_after_arg


def _commented(arg: cst.Arg) -> bool:
    """Whether a comment ends the line of the argument (`shuffle=False,  # why`)."""
    tail = _tail(arg)
    return isinstance(tail, cst.ParenthesizedWhitespace) and tail.first_line.comment is not None


def _after_comment(call: cst.Call, last: cst.Arg, new: cst.Arg) -> tuple[cst.Arg, cst.Arg]:
    """`last` and `new` when a comment ends `last`'s line: the comment stays with
    `last` (after its comma) and `new` goes on a line of its own, indented like the
    other arguments, before what closed the call."""
    tail = _tail(last)
    assert isinstance(tail, cst.ParenthesizedWhitespace)
    args = call.args
    before = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(
        args[-2].comma, cst.Comma) else call.whitespace_before_args
    if isinstance(before, cst.ParenthesizedWhitespace):  # one argument per line: the same
        indent, line = before.indent, before.last_line
    elif tail.last_line.value:  # `)` aligned under the arguments: there
        indent, line = tail.indent, tail.last_line
    else:  # `)` at the statement's indentation: one level deeper
        indent, line = tail.indent, cst.SimpleWhitespace("    ")
    to_new = tail.with_changes(indent=indent, last_line=line)
    closing = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[],
                                          indent=tail.indent, last_line=tail.last_line)
    if isinstance(last.comma, cst.Comma):  # keep the trailing comma style
        return (last.with_changes(comma=last.comma.with_changes(whitespace_after=to_new)),
                new.with_changes(comma=cst.Comma(whitespace_after=closing)))
    return (last.with_changes(comma=cst.Comma(whitespace_after=to_new), whitespace_after_arg=_NONE),
            new.with_changes(whitespace_after_arg=closing))


def without_keywords(call: cst.Call, *names: str) -> cst.Call:
    """`call` without the named keyword arguments."""
    kept = [a for a in call.args if not (a.keyword is not None and a.keyword.value in names)]
    if len(kept) == len(call.args):
        return call
    if not kept:
        return call.with_changes(args=[], whitespace_before_args=_closing(call))
    if kept and kept[-1] is not call.args[-1] and not _commented(kept[-1]):
        # the old last argument is gone: the new last one takes its trailing comma (or
        # none); one whose line ends in a comment keeps its comma, and so the comment
        kept[-1] = kept[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=kept)


def _has_comment(ws: cst.BaseParenthesizableWhitespace) -> bool:
    if not isinstance(ws, cst.ParenthesizedWhitespace):
        return False
    lines = [ws.first_line, *ws.empty_lines]
    return any(line.comment is not None for line in lines)


def _closing(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace between `(` and `)` once every argument is gone: nothing,
    unless a comment sits after `(`; then `)` goes where it was."""
    before = call.whitespace_before_args
    if not _has_comment(before):
        return cst.SimpleWhitespace("")
    end = _tail(call.args[-1])
    if isinstance(end, cst.ParenthesizedWhitespace):
        return before.with_changes(indent=end.indent, last_line=end.last_line)
    return before


def positional(call: cst.Call, index: int) -> cst.Arg | None:
    """The `index`-th positional argument (no keyword, no star), or None."""
    plain = [a for a in call.args if a.keyword is None and not a.star]
    return plain[index] if index < len(plain) else None


def prepend_argument(call: cst.Call, value: str | cst.BaseExpression) -> cst.Call:
    """`call` with `value` as a new first positional argument: `f(a, k=1)` → `f(value, a, k=1)`;
    an argument list that starts on its own line gets the new argument on its own line."""
    if not call.args:
        return call.with_changes(args=[cst.Arg(value=_expr(value))])
    after = call.whitespace_before_args
    if isinstance(after, cst.ParenthesizedWhitespace):  # on the next line, without the comment
        after = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    else:  # one line: `f(value, a)`
        after = _SPACE
    first = cst.Arg(value=_expr(value), comma=cst.Comma(whitespace_after=after))
    return call.with_changes(args=[first, *call.args])


def positional_to_keyword(call: cst.Call, index: int, name: str) -> cst.Call | None:
    """`call` with its `index`-th positional argument passed last, by keyword:
    `f(a, b, c)` with (0, "k") → `f(b, c, k=a)`. None when a comment ends that
    argument's line (it would have nowhere to go)."""
    arg = positional(call, index)
    if arg is None or _commented(arg):
        return None
    rest = [a for a in call.args if a is not arg]
    return with_keyword(call.with_changes(args=rest), name, arg.value)


def positionals_as_keywords(call: cst.Call, names: list[str] | tuple[str, ...]) -> cst.Call | None:
    """`call` with its leading positional arguments passed by keyword, the i-th as
    `names[i]`: `f(a, b, k=1)` with ("x", "y") → `f(x=a, y=b, k=1)`. None when a
    positional argument has no name to take or `*args` is among them."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None or arg.star == "**":
            break
        if arg.star or i >= len(names):
            return None
        args[i] = arg.with_changes(
            keyword=cst.Name(names[i]),
            equal=cst.AssignEqual(whitespace_before=_NONE, whitespace_after=_NONE),
        )
    return call.with_changes(args=args)


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
