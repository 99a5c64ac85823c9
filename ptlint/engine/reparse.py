"""Parse successive versions of one document, re-parsing only what changed.

An editor changes a few characters at a time, and LibCST's parse of a whole
2,000-line file costs more than every rule together. `Reparser` keeps the
last text and its module. On a new text it finds the changed region (the
common prefix and suffix of the two texts), the innermost block that holds
it (the module's body, or the body of a `def`, `class`, `for`, `if` ... at
any depth), and re-parses only the statements of that block that the change
touches, with one unchanged statement on each side. Those statements are
parsed in a small module that puts them at their real indentation:

    if 1:            <- sets the module's default indentation, as in the file
        pass
    if 1:            <- one `if 1:` per enclosing block
        if 1:
            ...the statements, as they are in the file...

and the new statements replace the old ones in the tree (their ancestors are
rebuilt; everything else is the same objects as before).

The result must be the tree a full parse gives: each piece is checked to
print back exactly to its text (so no line went to a neighbour's
whitespace), the last statement of a piece ends with a line of code (so no
trailing comment can change owner), and the piece never includes the file's
first statement (the header) or the first indented block (the module's
default indentation). Anything else unusual (a form feed, which LibCST drops;
a text that does not parse; no line break at the end) returns None: the
caller parses the whole text.

Where each statement starts is worked out from the length of its text,
remembered per node (nodes are immutable, and an unchanged statement is the
same object in the next tree), so only new or re-parsed statements are
printed.
"""
from __future__ import annotations

from itertools import accumulate

import libcst as cst
from libcst._nodes.internal import CodegenState

from ptlint.engine.guard import too_deep, unvalidated

MARGIN = 1  # unchanged statements re-parsed on each side of the change
_LOOKAHEAD = 3  # how far a piece may grow to end on a line of code


class _Counter(CodegenState):
    """Prints a node and notes where chosen children start (token counts)."""

    def __init__(self, module: cst.Module, indent: tuple[str, ...], wanted: set[int]) -> None:
        super().__init__(default_indent=module.default_indent,
                         default_newline=module.default_newline, indent_tokens=list(indent))
        self.wanted = wanted
        self.marks: list[int] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.marks.append(len(self.tokens))


_STATEMENTS = frozenset(
    kind for kind in vars(cst).values() if isinstance(kind, type)
    and issubclass(kind, (cst.SimpleStatementLine, cst.BaseCompoundStatement)))


class _Index(CodegenState):
    """Prints a module and notes where every statement starts and ends."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent,
                         default_newline=module.default_newline)
        self.open: list[int] = []
        self.spans: list[tuple[cst.CSTNode, int, int]] = []  # (statement, first token, end)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if type(node) in _STATEMENTS:
            self.open.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if type(node) in _STATEMENTS:
            self.spans.append((node, self.open.pop(), len(self.tokens)))


def _notes(module: cst.Module) -> dict[int, tuple[cst.CSTNode, int, int | None]]:
    """The length of every statement's text, and where the first statement of
    each indented body starts (from its owner's start), from one printing."""
    state = _Index(module)
    module._codegen(state)
    ends = [0, *accumulate(map(len, state.tokens))]
    starts = {id(node): ends[first] for node, first, _ in state.spans}
    notes = {}
    for node, first, end in state.spans:
        body = getattr(node, "body", None)
        offset = None
        if isinstance(body, cst.IndentedBlock) and body.body and id(body.body[0]) in starts:
            offset = starts[id(body.body[0])] - ends[first]
        notes[id(node)] = (node, ends[end] - ends[first], offset)
    return notes


class Reparser:
    """The last text and module of one document; `reparse` gives the next."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.module: cst.Module | None = None
        self.partial = False  # whether the last module came from a re-parse of part of it
        self._header = 0  # the length of the module's header (comments before its first statement)
        self._tops: tuple[cst.Module, dict[int, int]] | None = None  # top-level starts
        # id(node) -> (node, length of its text, offset of its body's first statement or None)
        self._info: dict[int, tuple[cst.CSTNode, int, int | None]] = {}

    def remember(self, text: str, module: cst.Module) -> None:
        """The module a full parse gave for `text`."""
        if module is not self.module:
            self._info = {}
        self.text, self.module, self.partial = text, module, False

    def reparse(self, text: str) -> cst.Module | None:
        """The module of `text`, re-parsing only the changed statements; None
        where that cannot be done exactly (then parse the whole text)."""
        if self.module is None or self.text is None:
            return None
        if text == self.text:
            return self.module
        try:
            module = self._splice(self.module, self.text, text)
        except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
            module = None
        if module is not None:
            self.text, self.module, self.partial = text, module, True
            self._prune()
        return module

    # -- lengths and offsets ------------------------------------------------------
    def where(self, chain: list[cst.CSTNode]) -> int | None:
        """Where the last of `chain` (statements of the current module, each in
        the body of the one before, from the top level down) starts in the
        text; None where that is not known without printing."""
        module = self.module
        if module is None or not self._info:
            return None
        if self._tops is None or self._tops[0] is not module:
            starts, at = {}, self._header
            for statement in module.body:
                starts[id(statement)] = at
                found = self._info.get(id(statement))
                if found is None:
                    return None
                at += found[1]
            self._tops = (module, starts)
        at = self._tops[1].get(id(chain[0]))
        if at is None:
            return None
        for outer, inner in zip(chain, chain[1:]):
            found = self._info.get(id(outer))
            block = getattr(outer, "body", None)
            if found is None or found[2] is None or not isinstance(block, cst.IndentedBlock):
                return None
            at += found[2]
            for sibling in block.body:
                if sibling is inner:
                    break
                length = self._info.get(id(sibling))
                if length is None:
                    return None
                at += length[1]
            else:
                return None  # in another clause (`else:`, `except:`): not noted
        return at

    def _length(self, module: cst.Module, node: cst.CSTNode, indent: tuple[str, ...]) -> int:
        found = self._info.get(id(node))
        if found is None:
            state = _Counter(module, indent, set())
            node._codegen(state)
            found = self._info[id(node)] = (node, sum(map(len, state.tokens)), None)
        return found[1]

    def _body_offset(self, module: cst.Module, node: cst.CSTNode,
                     indent: tuple[str, ...]) -> int:
        """Where the first statement of `node`'s body starts, from `node`'s start;
        the lengths of its body's statements are noted on the way."""
        found = self._info.get(id(node))
        if found is not None and found[2] is not None:
            return found[2]
        body = node.body.body
        inner = (*indent, _indent_of(module, node.body))
        state = _Counter(module, indent, {id(s) for s in body})
        node._codegen(state)
        ends = [0, *accumulate(map(len, state.tokens))]
        starts = [ends[m] for m in state.marks] + [None]
        for statement, start, end in zip(body, starts, starts[1:]):
            if end is not None:
                self._info.setdefault(id(statement), (statement, end - start, None))
        self._length(module, body[-1], inner)
        self._info[id(node)] = (node, ends[-1], starts[0])
        return starts[0]

    def _prune(self) -> None:
        """Keep the notes of the current tree's nodes only."""
        assert self.module is not None
        kept: dict[int, tuple[cst.CSTNode, int, int | None]] = {}
        stack = list(self.module.body)
        while stack:
            node = stack.pop()
            found = self._info.get(id(node))
            if found is not None:
                kept[id(node)] = found
                if found[2] is not None:
                    stack.extend(node.body.body)
        self._info = kept

    # -- the splice -------------------------------------------------------------------
    def _splice(self, old: cst.Module, old_text: str, text: str) -> cst.Module | None:
        if "\f" in text or "\f" in old_text or not text.endswith("\n") \
                or not old_text.endswith("\n"):
            return None  # LibCST drops form feeds, and a last lone "\r"
        start, old_end, new_end = _changed(old_text, text)
        if not self._info:
            self._info = _notes(old)
        statements = old.body
        lengths = [self._length(old, s, ()) for s in statements]
        header = len(old_text) - sum(lengths) - _footer_length(old)
        self._header = header
        starts = list(accumulate(lengths[:-1], initial=header))
        first_block = next((k for k, s in enumerate(statements)
                            if isinstance(getattr(s, "body", None), cst.IndentedBlock)), None)
        if first_block is None or start < starts[first_block] + lengths[first_block]:
            return None  # the default indentation, the header or the first line may change
        # Go down to the innermost block whose statements hold the change.
        path: list[tuple[list, int, cst.CSTNode]] = []  # (block's statements, index, owner)
        indent: tuple[str, ...] = ()
        while True:
            touched = [k for k, (s, n) in enumerate(zip(starts, lengths))
                       if s <= old_end and s + n >= start]
            if len(touched) != 1:
                break
            k = touched[0]
            owner = statements[k]
            block = getattr(owner, "body", None)
            if not isinstance(block, cst.IndentedBlock) or not block.body:
                break
            inner = (*indent, _indent_of(old, block))
            first = starts[k] + self._body_offset(old, owner, indent)
            child_lengths = [self._length(old, s, inner) for s in block.body]
            child_starts = list(accumulate(child_lengths[:-1], initial=first))
            if start < first:
                break  # in the block's header
            piece = _piece(child_starts, child_lengths, start, old_end, old_text, nested=True)
            if piece is None:
                break
            path.append((statements, k, owner))
            statements, starts, lengths, indent = list(block.body), child_starts, child_lengths, inner
        piece = _piece(starts, lengths, start, old_end, old_text, nested=bool(path))
        if piece is None:
            return None
        first, last = piece
        if not path and first == 0:
            return None  # the module's header is parsed with its first statement
        begin = starts[first]
        to_eof = not path and last == len(statements) - 1
        finish = len(old_text) if to_eof else starts[last] + lengths[last]
        chunk = text[begin:finish + new_end - old_end]
        parsed = self._parse_piece(old, chunk, indent, to_eof)
        if parsed is None:
            return None
        new, footer = parsed
        body = (*statements[:first], *new, *statements[last + 1:])  # tuples, as parsed
        delta = new_end - old_end
        for statements, k, owner in reversed(path):
            node, length, offset = self._info[id(owner)]
            owner = owner.with_changes(body=owner.body.with_changes(body=body))
            self._info[id(owner)] = (owner, length + delta, offset)
            body = (*statements[:k], owner, *statements[k + 1:])
        return old.with_changes(body=body, footer=footer if to_eof else old.footer)

    def _parse_piece(self, old: cst.Module, chunk: str, indent: tuple[str, ...],
                     to_eof: bool) -> tuple[tuple[cst.CSTNode, ...], object] | None:
        """The statements of `chunk` parsed at the indentation `indent`, each
        checked to print back to its text; and (at the end of the file) the footer."""
        if too_deep(chunk, "") is not None:
            return None
        newline = old.default_newline
        lines = [f"if 1:{newline}", f"{old.default_indent}pass{newline}"]
        lines += [f"{''.join(indent[:level])}if 1:{newline}" for level in range(len(indent))]
        prefix = "".join(lines)
        with unvalidated(chunk):
            module = cst.parse_module(prefix + chunk)
        if len(module.body) < 2 or module.header or (module.footer and not to_eof):
            return None
        dummy, block = module.body[0], module.body[1:]
        if module.code_for_node(dummy) != prefix[:len(lines[0]) + len(lines[1])]:
            return None  # a line of the piece went into the first `if`'s block
        for _ in indent:  # down the `if 1:` wrappers
            wrapper = block[0] if len(block) == 1 else None
            if (not isinstance(wrapper, cst.If) or wrapper.orelse is not None
                    or not isinstance(wrapper.body, cst.IndentedBlock) or wrapper.body.footer):
                return None
            block = wrapper.body.body
        at, code = 0, ""
        for statement in block:
            state = _Counter(old, indent, set())
            statement._codegen(state)
            code = "".join(state.tokens)
            if not chunk.startswith(code, at):
                return None
            self._info[id(statement)] = (statement, len(code), None)
            at += len(code)
        if at + (_footer_length(module) if to_eof else 0) != len(chunk):
            return None
        if not to_eof and not _ends_with_code(code):
            return None  # the new last statement must end on code, as the old one did
        return tuple(block), module.footer


def _indent_of(module: cst.Module, block: cst.IndentedBlock) -> str:
    return module.default_indent if block.indent is None else block.indent


def _footer_length(module: cst.Module) -> int:
    return sum(len(module.code_for_node(line)) for line in module.footer)


def _changed(old: str, new: str) -> tuple[int, int, int]:
    """(start, end in `old`, end in `new`) of the region where the texts differ."""
    limit = min(len(old), len(new))
    low, high = 0, limit  # the common prefix's length, by bisection on slices
    while low < high:
        mid = (low + high + 1) // 2
        if old[:mid] == new[:mid]:
            low = mid
        else:
            high = mid - 1
    prefix = low
    low, high = 0, limit - prefix
    while low < high:
        mid = (low + high + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            low = mid
        else:
            high = mid - 1
    return prefix, len(old) - low, len(new) - low


def _ends_with_code(text: str) -> bool:
    """Whether the last line of `text` (a statement's text) is a line of code,
    not a comment or a blank line (which a following block might own instead)."""
    line = text.rstrip("\r\n").rsplit("\n", 1)[-1].rsplit("\r", 1)[-1].strip()
    return bool(line) and not line.startswith("#")


def _piece(starts: list[int], lengths: list[int], start: int, end: int, text: str,
           *, nested: bool) -> tuple[int, int] | None:
    """The first and last statement to re-parse for a change from `start` to
    `end`: those it touches and `MARGIN` unchanged ones on each side, grown at
    the end until the last one ends on a line of code. None where that runs
    past the end of a nested block (whose end is not in the piece); at the
    top level, the piece then goes to the end of the file."""
    count = len(starts)
    touched = [k for k, (s, n) in enumerate(zip(starts, lengths)) if s <= end and s + n >= start]
    if not nested and end >= starts[-1] + lengths[-1]:  # the change reaches the footer
        return max((touched[0] if touched else count - 1) - MARGIN, 0), count - 1
    if not touched:
        return None
    first = max(touched[0] - MARGIN, 0)
    for last in range(touched[-1] + MARGIN, min(touched[-1] + MARGIN + _LOOKAHEAD, count)):
        if not nested and last == count - 1:
            return first, last
        if _ends_with_code(text[starts[last]:starts[last] + lengths[last]]):
            return first, last
    return None
