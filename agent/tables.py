"""Tables on a terminal that never hide a number or a name: they are read and copied from here.

Every column is one of two kinds. A *whole* column (numbers, identifiers, study names,
headers) is as wide as its longest cell and is never cut, folded or ellipsised. A *text*
column (free text: descriptions, notes) may wrap between words. When the whole table does not
fit the console's width, it is printed as records instead (one ``header: value`` line per
cell, grouped by row), so nothing is ever cut: a line longer than the terminal is one line the
terminal wraps, which copies whole.

Design strings (an NB201 arch string, a ``key=value`` configuration) have no spaces and are
often wider than a terminal: :func:`print_design_table` keeps them beside their row when the
row fits, and otherwise lists them below the table, one per line, whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

# borders and padding rich adds per column (2 padding + 1 border) and per table (1 border)
_PER_COLUMN = 3
_PER_TABLE = 1


@dataclass(frozen=True)
class Column:
    """One column of :func:`print_table`.

    Attributes:
        header: the column's header (shown whole).
        text: free text that may wrap between words; ``False`` (numbers, identifiers) keeps
            every cell whole on one line.
        justify: ``"left"`` or ``"right"``.
    """

    header: str
    text: bool = False
    justify: str = "left"


def _as_column(c: str | Column) -> Column:
    return c if isinstance(c, Column) else Column(c)


def _longest_word(s: str) -> int:
    # cells, not characters: a wide character (CJK, some symbols) takes two columns of the terminal
    return max((cell_len(w) for w in s.split()), default=0)


def _min_widths(cols: Sequence[Column], rows: Sequence[Sequence[str]], show_header: bool) -> list[int]:
    """Each column's narrowest width: a whole column's longest cell, a text column's longest word (headers wrap between words)."""
    widths = []
    for i, col in enumerate(cols):
        head = [_longest_word(col.header)] if show_header else []
        cells = [_longest_word(r[i]) if col.text else cell_len(r[i]) for r in rows]
        widths.append(max([*head, *cells, 1]))
    return widths


def table_width(columns: Sequence[str | Column], rows: Sequence[Sequence[str]], *, show_header: bool = True) -> int:
    """The narrowest width at which :func:`print_table` shows ``rows`` as a table, every whole cell on one line."""
    cols = [_as_column(c) for c in columns]
    return sum(_min_widths(cols, rows, show_header)) + _PER_COLUMN * len(cols) + _PER_TABLE


def _share(least: Sequence[int], most: Sequence[int], spare: int) -> list[int]:
    """``least`` grown towards ``most`` by at most ``spare`` in all: all of it when it is enough, else each by its share."""
    want = sum(m - n for m, n in zip(most, least, strict=True))
    if want <= spare:
        return list(most)
    return [n + (m - n) * spare // want for m, n in zip(most, least, strict=True)]


def _widths(cols: Sequence[Column], rows: Sequence[Sequence[str]], show_header: bool, width: int) -> list[int]:
    """Column widths that fit ``width``: every column at least its minimum, the rest shared by the columns that can use it.

    First a whole column gets its whole header on one line (``without H1`` over numbers, not
    ``without`` / ``H1``): a few columns each; then text columns share what is left, towards their
    longest cell on one line. Every width is fixed for rich, which would otherwise shrink the
    widest column first, whatever it holds.
    """
    least = _min_widths(cols, rows, show_header)
    spare = width - _PER_COLUMN * len(cols) - _PER_TABLE - sum(least)
    headed = _share(
        least, [max(n, cell_len(c.header) if show_header and not c.text else 0) for n, c in zip(least, cols, strict=True)], spare
    )
    spare -= sum(headed) - sum(least)
    most = [
        max([cell_len(col.header) if show_header else 0, *(cell_len(r[i]) for r in rows), headed[i]]) if col.text else headed[i]
        for i, col in enumerate(cols)
    ]
    # each text column gets a share of what is left, by how much more it could use
    return _share(headed, most, spare)


def print_table(
    console: Console,
    title: str | None,
    columns: Sequence[str | Column],
    rows: Sequence[Sequence[str]],
    *,
    show_header: bool = True,
) -> None:
    """Print ``rows`` (cells as plain text) as a table when it fits the console, else as records; nothing is ever cut."""
    cols = [_as_column(c) for c in columns]
    if table_width(cols, rows, show_header=show_header) > console.width:
        _print_records(console, title, cols, rows, show_header=show_header)
        return
    widths = _widths(cols, rows, show_header, console.width)
    # rich wraps a title to the table's width and folds a word wider than that (a study name over a
    # narrow table): such a title is printed on its own line, which the terminal wraps whole
    framed = title is not None and _longest_word(title) <= sum(widths) + _PER_COLUMN * len(cols) + _PER_TABLE
    if title and not framed:
        console.print(title, soft_wrap=True, highlight=False, markup=False)
    table = Table(title=Text(title) if title and framed else None, show_header=show_header)
    for col, width in zip(cols, widths, strict=True):
        header = Text(col.header, no_wrap=False, overflow="fold")  # a header wraps between words, never inside one
        table.add_column(header, width=width, no_wrap=not col.text, overflow="fold", justify=col.justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    console.print(table)


def _print_records(
    console: Console, title: str | None, cols: Sequence[Column], rows: Sequence[Sequence[str]], *, show_header: bool
) -> None:
    """The table as ``header: value`` lines (``#k`` before each row), for a console too narrow for it."""
    if title:
        console.print(title, soft_wrap=True, highlight=False, markup=False)
    if not show_header:  # a key/value table: its first column names the rest
        for row in rows:
            console.print(f"  {row[0]}: {'  '.join(row[1:])}", soft_wrap=True, highlight=False, markup=False)
        return
    for k, row in enumerate(rows, start=1):
        console.print(f"#{k}", highlight=False, markup=False)
        for col, cell in zip(cols, row, strict=True):
            console.print(f"  {col.header}: {cell}", soft_wrap=True, highlight=False, markup=False)


def print_design_table(
    console: Console,
    title: str,
    header: Sequence[str | Column],
    rows: Sequence[Sequence[str]],
    designs: Sequence[str],
    *,
    design_header: str,
) -> None:
    """Print ``rows`` with each row's design whole, in the table when it fits, else listed below it by row number."""
    cols = [_as_column(h) for h in header]
    inline_cols = [*cols, Column(design_header)]
    inline_rows = [[*row, design] for row, design in zip(rows, designs, strict=True)]
    if table_width(inline_cols, inline_rows) <= console.width:
        print_table(console, title, inline_cols, inline_rows)
        return
    numbered = [[str(k), *row] for k, row in enumerate(rows, start=1)]
    if table_width([Column("#"), *cols], numbered) <= console.width:
        print_table(console, title, [Column("#", justify="right"), *cols], numbered)
    else:  # records: numbered #1, #2, ... already
        print_table(console, title, cols, rows)
    console.print(f"{design_header} of each row:", highlight=False, markup=False)
    for k, design in enumerate(designs, start=1):
        console.print(f"{k:>3}  {design}", soft_wrap=True, highlight=False, markup=False)


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
"""A markdown table's second line, ``|---|:--:|``."""


def _markdown_cells(line: str) -> list[str]:
    """The cells of one markdown table row (``\\|`` is a pipe inside a cell), as plain text."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    cells = re.split(r"(?<!\\)\|", inner)
    # inline code and bold mean nothing in a table cell on a terminal
    return [c.replace("\\|", "|").replace("`", "").replace("**", "").strip() for c in cells]


def markdown_blocks(markdown: str) -> list[str | tuple[list[str], list[list[str]]]]:
    """``markdown`` cut into prose (a string) and pipe tables (header cells, rows of cells), in order.

    >>> markdown_blocks("# t\\n\\n| a | b |\\n|---|---|\\n| 1 | x y |\\nend")
    ['# t\\n', (['a', 'b'], [['1', 'x y']]), 'end']
    """
    lines = markdown.splitlines()
    blocks: list[str | tuple[list[str], list[list[str]]]] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            if prose:
                blocks.append("\n".join(prose))
                prose = []
            header = _markdown_cells(lines[i])
            i += 2
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _markdown_cells(lines[i])
                rows.append((cells + [""] * len(header))[: len(header)])  # a short row is padded, as markdown does
                i += 1
            blocks.append((header, rows))
        else:
            prose.append(lines[i])
            i += 1
    if prose:
        blocks.append("\n".join(prose))
    return blocks


def print_markdown(console: Console, markdown: str) -> None:
    """Print a markdown report (``coevo bench``'s, ``kb ablate``'s): its tables through :func:`print_table`, the rest as markdown.

    rich's own markdown tables shrink every column to the terminal and end cut cells with
    ``…``; here a table keeps its numbers and names whole, or is printed as records.
    """
    from rich.markdown import Markdown  # loads markdown-it: only the commands that print a report pay for it

    for block in markdown_blocks(markdown):
        if isinstance(block, str):
            if block.strip():
                console.print(Markdown(block))
            continue
        header, rows = block
        print_table(console, None, [_column(h, [r[i] for r in rows]) for i, h in enumerate(header)], rows)


NOT_AVAILABLE = "n/a"
"""What a summary shows for a value that does not exist (no exact front: no HV ratio), where ``None`` says nothing to a person."""


def summary_cell(value: Any) -> str:
    """One value of a key/value summary (``coevo search``'s, ``coevo runs show``'s), as a person reads it.

    Floats to 4 decimals; dicts and lists as JSON, the form ``--json`` prints and ``--options``
    takes; None as :data:`NOT_AVAILABLE`.

    >>> [summary_cell(v) for v in (0.987654, {"problem": "noc", "k": 4}, None, 12)]
    ['0.9877', '{"problem": "noc", "k": 4}', 'n/a', '12']
    """
    if value is None:
        return NOT_AVAILABLE
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def render_value(console: Console, value: Any, *, notes: Sequence[str] = ()) -> None:
    """Show a tool's value: lists of records as tables, the rest as key/value rows; numbers and names are never cut.

    Keys without a value (None, empty text) and empty lists or mappings are named on one line
    under the table rather than shown as empty rows; a ``notes`` entry whose notes are all among
    ``notes`` (the tool's messages, which the caller prints after the value) is not shown twice.
    """
    if not isinstance(value, dict):
        console.print_json(json.dumps(value, default=str))
        return
    scalars: list[list[str]] = []
    unset: list[str] = []
    empty: list[str] = []
    for key, v in value.items():
        if key == "notes" and isinstance(v, list) and v and notes and set(map(str, v)) <= set(notes):
            continue  # printed after the value as the tool's messages
        if v is None or v == "":
            unset.append(key)
        elif isinstance(v, list | dict) and not v:
            empty.append(key)
        elif isinstance(v, list) and all(isinstance(x, dict) for x in v):
            _render_records(console, key, v)
        elif isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()):  # records by name (plans by method)
            _render_records(console, key, [{"name": name, **x} for name, x in v.items()])
        else:
            scalars.append([key, _cell(v)])
    if scalars:
        print_table(console, None, [Column("key"), _column("value", [r[1] for r in scalars])], scalars, show_header=False)
    gaps = [f"{what}: {', '.join(keys)}" for what, keys in (("no value", unset), ("empty", empty)) if keys]
    if gaps:
        console.print("; ".join(gaps), style="dim", markup=False, soft_wrap=True, highlight=False)


def _column(header: str, cells: list[str]) -> Column:
    """Free text (cells with spaces: sentences, JSON) wraps between words; numbers and names stay whole."""
    return Column(header, text=any(" " in c for c in cells))


def _render_records(console: Console, key: str, records: list[dict[str, Any]]) -> None:
    """One list of records as a table (its first 50 rows); a column of designs is printed unfolded."""
    columns = list(dict.fromkeys(k for row in records for k in row))
    cells = [[_cell(row.get(col)) for col in columns] for row in records[:50]]
    design = _design_column(columns, cells)
    if design is not None:  # designs are copied from here: never folded mid-token
        kept = [i for i in range(len(columns)) if i != design]
        print_design_table(
            console,
            f"{key} ({len(records)})",
            [_column(columns[i], [row[i] for row in cells]) for i in kept],
            [[row[i] for i in kept] for row in cells],
            [row[design] for row in cells],
            design_header=columns[design],
        )
    else:
        print_table(console, f"{key} ({len(records)})", [_column(c, [row[i] for row in cells]) for i, c in enumerate(columns)], cells)
    if len(records) > 50:
        console.print(f"[dim]... {len(records) - 50} more rows[/]")


def _design_column(columns: list[str], cells: list[list[str]]) -> int | None:
    """The column holding design strings (long, no spaces: arch strings, key=value lists), if any."""
    for i in range(len(columns)):
        values = [row[i] for row in cells if row[i]]
        if values and all(" " not in x for x in values) and max(len(x) for x in values) > 30:
            return i
    return None


def _cell(v: Any) -> str:
    if isinstance(v, bool):  # as coevo search's own front table says it ("paid: yes")
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict) and v and all(_scalar(x) for x in v.values()):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items())  # a study's problem: "problem=nb201, dataset=cifar10"
    if isinstance(v, dict | list):
        return json.dumps(v, default=str)
    return "" if v is None else str(v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)
