from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coevo.search.nb201 import load_table
from coevo.search.nb201.problem import complexity_niches
from coevo.search.niches import allocate, niche_of, single_niche


def test_pelnas_niches_partition_all_cells() -> None:
    niches = complexity_niches()
    assert [n.id for n in niches] == ["conv0", "c1x1", "c3x3_1", "c3x3_2", "c3x3_3", "c3x3_4p"]
    sizes = dict.fromkeys((n.id for n in niches), 0)
    for row in load_table().ops.tolist():
        owners = [n.id for n in niches if n.contains(tuple(row))]
        assert len(owners) == 1
        sizes[owners[0]] += 1
    # 4^6 cells without 3x3; 3^6 of them without 1x1 either; C(6,k) 4^(6-k) with k 3x3
    assert sizes == {
        "conv0": 729,
        "c1x1": 4096 - 729,
        "c3x3_1": 6 * 4**5,
        "c3x3_2": 15 * 4**4,
        "c3x3_3": 20 * 4**3,
        "c3x3_4p": 15 * 16 + 6 * 4 + 1,
    }
    assert niche_of(single_niche(), (3,) * 6) == "all"


@given(st.integers(0, 200), st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 50), min_size=1))
def test_allocate_spends_exactly_and_feeds_every_niche(total: int, contribution: dict[str, float]) -> None:
    shares = allocate(total, contribution)
    assert sum(shares.values()) == total and set(shares) == set(contribution)
    if total >= 2 * len(contribution):
        assert min(shares.values()) >= 1


def test_allocate_follows_contribution() -> None:
    shares = allocate(20, {"a": 1.0, "b": 9.0, "c": 1.0})
    assert shares["b"] > shares["a"] >= shares["c"] >= shares["a"] - 1  # equal claims differ by the tie-break at most
