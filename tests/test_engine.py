"""Engine pieces that every rule relies on."""
from __future__ import annotations

from ptlint.engine import apply_edits, non_overlapping
from ptlint.model import Edit, Fix, Position, Safety


def P(line: int, column: int) -> Position:
    return Position(line, column)


def test_apply_edits_in_any_order():
    text = "a = 1\nb = 2\n"
    edits = [Edit(P(2, 4), P(2, 5), "20"), Edit(P(1, 0), P(1, 1), "alpha")]
    assert apply_edits(text, edits) == "alpha = 1\nb = 20\n"


def test_apply_edits_keeps_crlf_and_counts_it_as_one_break():
    assert apply_edits("a = 1\r\nb = 2\r\n", [Edit(P(2, 0), P(2, 1), "c")]) == "a = 1\r\nc = 2\r\n"


def test_edit_to_the_end_of_a_file_without_final_newline():
    text = "x = 1\ny = 2"
    assert apply_edits(text, [Edit(P(2, 0), P(3, 0), "y = 3\n")]) == "x = 1\ny = 3\n"
    assert apply_edits(text, [Edit(P(2, 4), P(2, 5), "4")]) == "x = 1\ny = 4"


def test_overlapping_fixes_never_both_apply():
    a = Fix("a", Safety.SAFE, (Edit(P(1, 0), P(1, 5), "x"),))
    b = Fix("b", Safety.SAFE, (Edit(P(1, 3), P(1, 8), "y"),))
    c = Fix("c", Safety.SAFE, (Edit(P(2, 0), P(2, 1), "z"),))
    assert non_overlapping([b, a, c]) == [a, c]
