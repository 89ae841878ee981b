from __future__ import annotations

import random

import pytest

from coevo.search.errors import UserInputError
from coevo.search.nb201 import (
    N_CELLS,
    OPS,
    crossover,
    format_arch,
    is_disconnected,
    load_table,
    mutations,
    op_counts,
    parse_arch,
    random_cell,
)

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def test_parse_known_arch() -> None:
    assert parse_arch(ARCH) == (3, 3, 4, 1, 3, 1)
    assert format_arch(parse_arch(ARCH)) == ARCH


def test_round_trip_every_cell_of_the_table() -> None:
    table = load_table()
    assert len(table.ops) == N_CELLS == 15625
    for i in range(0, N_CELLS, 7):
        arch = table.arch(i)
        assert table.index_of(parse_arch(arch)) == i
    # all cells distinct
    assert len({tuple(row) for row in table.ops.tolist()}) == N_CELLS


@pytest.mark.parametrize(
    ("arch", "fragment"),
    [
        ("", "start and end with '|'"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|", "found 2 node groups"),
        ("|conv~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|", "unknown op 'conv'"),
        ("|nor_conv_3x3~1|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|", "should read 'OP~0'"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|", "node 2 needs 2"),
    ],
)
def test_malformed_arch_is_actionable(arch: str, fragment: str) -> None:
    with pytest.raises(UserInputError) as info:
        parse_arch(arch)
    assert fragment in str(info.value)
    assert "e.g." in str(info.value)  # shows the expected format


def test_format_rejects_bad_cells() -> None:
    with pytest.raises(UserInputError):
        format_arch((0, 1, 2))
    with pytest.raises(UserInputError):
        format_arch((0, 1, 2, 3, 4, 5))


def test_mutations_are_the_24_hamming_neighbours() -> None:
    cell = parse_arch(ARCH)
    ns = mutations(cell)
    assert len(ns) == len(set(ns)) == 24
    assert all(sum(a != b for a, b in zip(n, cell, strict=True)) == 1 for n in ns)


def test_crossover_takes_each_edge_from_a_parent() -> None:
    rng = random.Random(0)
    a, b = random_cell(rng), random_cell(rng)
    for _ in range(50):
        child = crossover(a, b, rng)
        assert all(c in (x, y) for c, x, y in zip(child, a, b, strict=True))


def test_op_counts_and_connectivity() -> None:
    counts = op_counts(parse_arch(ARCH))
    assert counts == {"none": 0, "skip_connect": 2, "nor_conv_1x1": 0, "nor_conv_3x3": 3, "avg_pool_3x3": 1}
    assert sum(counts.values()) == 6
    assert set(counts) == set(OPS)
    assert is_disconnected((0,) * 6)
    # only edge 0->3 carries an op: connected
    assert not is_disconnected((0, 0, 0, 1, 0, 0))
    # 0->1 then 1->2 then 2->3
    assert not is_disconnected((1, 0, 1, 0, 0, 1))
    # 0->1 only, nothing reaches 3
    assert is_disconnected((1, 0, 0, 0, 0, 0))
