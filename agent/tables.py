"""Tables of designs on a terminal: design strings are copied from here, so they are never broken.

A design string (an NB201 arch string, a ``key=value`` configuration) has no spaces, and a
table column too narrow for it would fold it mid-token. :func:`print_design_table` keeps the
design column when the whole row fits the terminal; otherwise the table shows a row number
and the designs follow it one per line, whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

# borders and padding rich adds per column (2 padding + 1 border) and per table (1 border)
_PER_COLUMN = 3
_PER_TABLE = 1


def print_design_table(
    console: Console, title: str, header: Sequence[str], rows: Sequence[Sequence[str]], designs: Sequence[str], *, design_header: str
) -> None:
    """Print ``rows`` with each row's design whole, in the table when it fits, else listed below it."""
    widest = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    design_width = max([len(design_header), *(len(d) for d in designs)])
    needed = sum(widest) + design_width + _PER_COLUMN * (len(header) + 1) + _PER_TABLE
    inline = needed <= console.width
    table = Table(title=title)
    if not inline:
        table.add_column("#", justify="right")
    for h in header:
        table.add_column(h, no_wrap=True)
    if inline:
        table.add_column(design_header, no_wrap=True, overflow="ignore")
    for k, (row, design) in enumerate(zip(rows, designs, strict=True), start=1):
        table.add_row(*([str(k)] if not inline else []), *row, *([design] if inline else []))
    console.print(table)
    if not inline:
        console.print(f"{design_header} of each row:")
        for k, design in enumerate(designs, start=1):
            console.print(f"{k:>3}  {design}", soft_wrap=True, highlight=False, markup=False)
