"""docs/compatibility.md shows the matrix the tests run: every stack a row, every behaviour a
column, and n/a exactly where ``stacks.py`` says a stack cannot serve a cell."""

from __future__ import annotations

from pathlib import Path

from .stacks import STACKS
from .test_matrix import BEHAVIOURS

DOC = Path(__file__).parents[2] / "docs" / "compatibility.md"


def _table() -> dict[str, list[str]]:
    """The matrix table's rows by their first cell; the header row under the key ``stack``."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 2 + len(BEHAVIOURS):
            rows[cells[0]] = cells[2:]
    return rows


def test_the_doc_has_a_column_per_behaviour_and_a_row_per_stack() -> None:
    table = _table()
    assert table["stack"] == [b.name for b in BEHAVIOURS]
    assert set(table) - {"stack", "---"} == {s.name for s in STACKS}


def test_the_doc_marks_na_where_the_stack_cannot_serve_the_cell() -> None:
    table = _table()
    for stack in STACKS:
        for behaviour, result in zip(BEHAVIOURS, table[stack.name]):
            assert (result == "n/a") == (behaviour.name in stack.na), (stack.name, behaviour.name, result)
