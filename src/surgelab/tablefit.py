"""Terminal tables that fit the terminal by leaving out columns, never by cutting words short.

Rich shrinks a table wider than the console by truncating its cells ("n.s. CI…", "kne…",
"inv…"), which reads as data. ``fit_table`` instead drops whole columns, least needed first,
until the table's natural width fits, and says in the caption which ones went and the width
(``COLUMNS=…``) that shows them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

__all__ = ["fit_table", "natural_width"]


def natural_width(table: Table) -> int:
    """The width the table takes when nothing in it is wrapped or cut."""
    console = Console(width=100_000, file=None, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def fit_table(table: Table, width: int | None, drop: Sequence[str]) -> Table:
    """Leave out the columns named in ``drop`` (in that order, by header) until ``table`` fits ``width``."""
    if width is None:
        return table
    full, dropped = natural_width(table), []
    for header in drop:
        if natural_width(table) <= width:
            break
        column = next((c for c in table.columns if str(c.header) == header), None)
        if column is not None:
            table.columns.remove(column)
            # rich measures a column by the index it was added at and draws it by its place: renumber
            table.columns[:] = [replace(c, _index=i) for i, c in enumerate(table.columns)]
            dropped.append(header.replace("\n", " "))
    if dropped:
        said = f"{', '.join(dropped)} left out to fit {width} columns; COLUMNS={full} (or a wider terminal) shows them"
        table.caption = f"{table.caption}\n{said}" if table.caption else said
    return table
