"""The NAS-Bench-201 cell space: 6 edges x 5 operations = 15,625 cells.

A cell is a DAG over 4 nodes; edge ``j -> i`` (j < i) carries one operation. The arch
string lists, for each target node i = 1..3, the ops on its incoming edges from j = 0..i-1:
``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``. Internally a cell is a tuple of 6 op codes
(indices into :data:`OPS`) in that edge order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from coevo.search.errors import UserInputError

OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
"""Operation names, in the canonical NAS-Bench-201 order (codes 0..4)."""

EDGES: tuple[tuple[int, int], ...] = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
"""(source, target) node of each of the 6 edges, in arch-string order."""

N_EDGES = len(EDGES)
N_OPS = len(OPS)
N_CELLS = N_OPS**N_EDGES

Cell = tuple[int, ...]
"""A cell: 6 op codes, one per edge, in :data:`EDGES` order."""

_OP_CODE = {name: i for i, name in enumerate(OPS)}
_EXAMPLE = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def _bad(arch: str, why: str) -> UserInputError:
    return UserInputError(
        f"malformed NB201 arch string {arch!r}: {why}. Expected 3 groups joined by '+', e.g. {_EXAMPLE} with ops from {', '.join(OPS)}"
    )


def parse_arch(arch: str) -> Cell:
    """Parse an arch string into a cell (tuple of 6 op codes).

    Raises:
        UserInputError: with the position of the first problem and the expected format.
    """
    text = arch.strip()
    if not (text.startswith("|") and text.endswith("|")):
        raise _bad(arch, "it must start and end with '|'")
    groups = text[1:-1].split("|+|")
    if len(groups) != 3:
        raise _bad(arch, f"found {len(groups)} node groups, need 3")
    codes: list[int] = []
    for node, group in enumerate(groups, start=1):
        entries = group.split("|")
        if len(entries) != node:
            raise _bad(arch, f"node {node} needs {node} incoming edge(s), found {len(entries)}")
        for source, entry in enumerate(entries):
            op, sep, src = entry.partition("~")
            if not sep or src != str(source):
                raise _bad(arch, f"entry {entry!r} of node {node} should read 'OP~{source}'")
            if op not in _OP_CODE:
                raise _bad(arch, f"unknown op {op!r}")
            codes.append(_OP_CODE[op])
    return tuple(codes)


def format_arch(cell: Sequence[int]) -> str:
    """Format a cell (6 op codes) as the canonical arch string."""
    check_cell(cell)
    names = [OPS[c] for c in cell]
    groups = ["|".join(f"{names[k]}~{src}" for k, (src, dst) in enumerate(EDGES) if dst == node) for node in (1, 2, 3)]
    return "|" + "|+|".join(groups) + "|"


def check_cell(cell: Sequence[int]) -> None:
    """Raise :class:`UserInputError` unless ``cell`` is 6 op codes in range."""
    if len(cell) != N_EDGES or not all(isinstance(c, int) and 0 <= c < N_OPS for c in cell):
        raise UserInputError(f"a cell is {N_EDGES} op codes in 0..{N_OPS - 1}, got {list(cell)!r}")


def cell_key(cell: Sequence[int]) -> int:
    """Dense key in 0..15624 (base-5 number of the op codes); not the NAS-Bench-201 index."""
    key = 0
    for c in cell:
        key = key * N_OPS + c
    return key


def op_counts(cell: Sequence[int]) -> dict[str, int]:
    """How many edges carry each op."""
    counts = dict.fromkeys(OPS, 0)
    for c in cell:
        counts[OPS[c]] += 1
    return counts


def is_disconnected(cell: Sequence[int]) -> bool:
    """True when no path of non-``none`` edges joins the input (node 0) to the output (node 3).

    Such cells output zeros; they are valid NB201 cells (the benchmark lists them) but useless.
    """
    reach = {0}
    for (src, dst), c in sorted(zip(EDGES, cell, strict=True), key=lambda e: e[0][1]):
        if c != 0 and src in reach:
            reach.add(dst)
    return 3 not in reach


def mutations(cell: Sequence[int]) -> list[Cell]:
    """All 24 cells at Hamming distance 1 (one edge's op changed)."""
    out: list[Cell] = []
    for e in range(N_EDGES):
        for op in range(N_OPS):
            if op != cell[e]:
                out.append((*cell[:e], op, *cell[e + 1 :]))
    return out


def crossover(a: Sequence[int], b: Sequence[int], rng: random.Random) -> Cell:
    """Uniform crossover: each edge's op taken from ``a`` or ``b`` with equal probability."""
    return tuple(x if rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))


def random_cell(rng: random.Random) -> Cell:
    """A uniformly random cell."""
    return tuple(rng.randrange(N_OPS) for _ in range(N_EDGES))
