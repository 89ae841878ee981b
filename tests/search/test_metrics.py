from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coevo.search.metrics import FrontMetrics, FrontReference, hypervolume, pareto_mask

# ---- hand-checked cases


def test_pareto_mask_small() -> None:
    acc = np.array([90.0, 85.0, 92.0, 92.0, 80.0, 90.0])
    lat = np.array([2.0, 1.0, 3.0, 3.0, 1.5, 2.5])
    # (85,1) front; (80,1.5) dominated by (85,1); (90,2) front; (90,2.5) dominated; (92,3) twice: both front
    assert pareto_mask(acc, lat).tolist() == [True, True, True, True, False, False]


def test_pareto_same_latency_keeps_best_only() -> None:
    assert pareto_mask(np.array([1.0, 2.0]), np.array([5.0, 5.0])).tolist() == [False, True]


def test_hypervolume_hand_computed() -> None:
    # ref (acc 80, lat 10). points (85, 2) and (90, 6):
    # slab lat 2..6 height 5 = 20; slab lat 6..10 height 10 = 40; total 60
    assert hypervolume(np.array([85.0, 90.0]), np.array([2.0, 6.0]), 80.0, 10.0) == pytest.approx(60.0)
    # a dominated point adds nothing; a point below the floor adds nothing
    assert hypervolume(np.array([85.0, 90.0, 84.0, 79.0]), np.array([2.0, 6.0, 3.0, 0.5]), 80.0, 10.0) == pytest.approx(60.0)
    assert hypervolume(np.array([]), np.array([]), 80.0, 10.0) == 0.0


def _toy_ref() -> tuple[FrontReference, np.ndarray, np.ndarray]:
    acc = np.array([85.0, 90.0, 70.0, 88.0, 95.0])
    lat = np.array([2.0, 6.0, 0.5, 7.0, 10.0])
    return FrontReference.from_space(acc, lat, floor=80.0), acc, lat


def test_reference_uses_useful_region_and_max_latency() -> None:
    ref, acc, lat = _toy_ref()
    # (70,0.5) is on the front but under the floor; (95,10) is on the front at the ref latency
    assert ref.ids == frozenset({"0", "1", "4"})
    assert ref.ceiling == 10.0
    assert ref.hv == pytest.approx(60.0)  # the 95% point sits at lat_ref: zero width
    assert ref.hv_ratio(acc, lat) == pytest.approx(1.0)
    assert ref.recall(["0", "1", "4", "3"]) == 1.0
    assert ref.recall(["0"]) == pytest.approx(1 / 3)


def test_igd_hand_computed() -> None:
    ref, acc, lat = _toy_ref()
    # normalisation: acc 70..95 (span 25), lat 0.5..10 (span 9.5)
    assert ref.igd(acc, lat) == 0.0
    found_acc, found_lat = np.array([85.0]), np.array([2.0])
    d1 = math.hypot(5 / 25, 4 / 9.5)
    d2 = math.hypot(10 / 25, 8 / 9.5)
    assert ref.igd(found_acc, found_lat) == pytest.approx((0 + d1 + d2) / 3)
    assert ref.igd([], []) == math.inf


def test_hv_history_is_incremental() -> None:
    ref, _, _ = _toy_ref()
    hist = ref.hv_history([85.0, 88.0, 90.0], [2.0, 7.0, 6.0])
    # (85,2) alone: lat 2..10 height 5 = 40; with (88,7): 5*5 + 3*8 = 49; with (90,6): the full 60
    assert hist == pytest.approx([40 / 60, 49 / 60, 1.0])
    m = FrontMetrics.score(ref, ["0", "3", "1"], [85.0, 88.0, 90.0], [2.0, 7.0, 6.0])
    assert m.hv_ratio == pytest.approx(hist[-1])
    assert m.front_recall == pytest.approx(2 / 3)


# ---- properties

points = st.lists(st.tuples(st.floats(0, 100, allow_nan=False), st.floats(0, 50, allow_nan=False)), min_size=1, max_size=40)


def _arr(pts: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([p[0] for p in pts])
    return a, np.array([p[1] for p in pts])


def _dominates(a1: float, l1: float, a2: float, l2: float) -> bool:
    return a1 >= a2 and l1 <= l2 and (a1 > a2 or l1 < l2)


@settings(max_examples=200, deadline=None)
@given(points)
def test_front_is_exactly_the_non_dominated_set(pts: list[tuple[float, float]]) -> None:
    acc, lat = _arr(pts)
    mask = pareto_mask(acc, lat)
    for i in range(len(pts)):
        dominated = any(_dominates(acc[j], lat[j], acc[i], lat[i]) for j in range(len(pts)))
        assert mask[i] == (not dominated)


@settings(max_examples=200, deadline=None)
@given(points, points)
def test_hv_monotone_and_front_only(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> None:
    acc_a, lat_a = _arr(a)
    acc_ab, lat_ab = _arr(a + b)
    hv_a = hypervolume(acc_a, lat_a, 20.0, 45.0)
    assert hypervolume(acc_ab, lat_ab, 20.0, 45.0) >= hv_a - 1e-9
    m = pareto_mask(acc_a, lat_a)
    assert hypervolume(acc_a[m], lat_a[m], 20.0, 45.0) == pytest.approx(hv_a)
    perm = np.random.default_rng(0).permutation(len(acc_a))
    assert hypervolume(acc_a[perm], lat_a[perm], 20.0, 45.0) == pytest.approx(hv_a)
    assert 0 <= hv_a <= 80 * 45 + 1e-9


@settings(max_examples=100, deadline=None)
@given(points, st.data())
def test_ratio_of_any_subset_is_at_most_one(pts: list[tuple[float, float]], data: st.DataObject) -> None:
    acc, lat = _arr(pts)
    # guarantee a useful front with positive area: a good fast point and a slow bad one
    acc = np.append(acc, [99.0, 0.0])
    lat = np.append(lat, [1.0, 60.0])
    ref = FrontReference.from_space(acc, lat, floor=20.0)
    idx = data.draw(st.lists(st.integers(0, len(acc) - 1), unique=True))
    r = ref.hv_ratio(acc[idx], lat[idx])
    assert 0.0 <= r <= 1.0 + 1e-12
    assert ref.hv_ratio(acc, lat) == pytest.approx(1.0)
    assert ref.igd(acc, lat) == pytest.approx(0.0)
    hist = ref.hv_history(acc[idx], lat[idx])
    assert all(x <= y + 1e-12 for x, y in itertools.pairwise(hist))
