"""The one data model every part of ptlint shares: findings, spans, fixes and edits."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Safety(enum.Enum):
    """How far a fix may be trusted (ruff's "applicability")."""

    SAFE = "safe"  # behaviour and comments are preserved
    UNSAFE = "unsafe"  # the code stays valid, but behaviour may change
    DISPLAY_ONLY = "display-only"  # shown, never applied


@dataclass(frozen=True, order=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, as LibCST gives it; renderers add 1


@dataclass(frozen=True, order=True)
class Span:
    start: Position
    end: Position


@dataclass(frozen=True, order=True)
class Edit:
    start: Position
    end: Position
    content: str


@dataclass(frozen=True)
class Fix:
    title: str
    safety: Safety
    edits: tuple[Edit, ...]
    imports: tuple[str, ...] = ()  # "import copy" / "from torch.nn.parallel import DistributedDataParallel"


@dataclass(frozen=True)
class Finding:
    path: str
    code: str
    name: str
    message: str
    span: Span
    fix: Fix | None = None
    cell: int | None = None  # notebooks: index into the notebook's `cells` (see `cell_label`)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.span.start, self.code)


SYNTAX_ERROR = ("PTL000", "syntax-error")


def cell_number(index: int) -> int:
    """The number people know a notebook cell by: 1 for the first cell, every cell
    (markdown and raw too) counted, as ruff numbers them."""
    return index + 1


def cell_label(index: int) -> str:
    """`cell 3` for the cell at index 2 of the notebook's `cells`."""
    return f"cell {cell_number(index)}"
