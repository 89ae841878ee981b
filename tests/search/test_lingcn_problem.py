"""The lingcn problem: encoding round trips, hand-derived depths, niches, evaluation."""

from __future__ import annotations

import random

import pytest

from coevo.search.errors import UserInputError
from coevo.search.problems import make_problem

SMALL = {"dataset": "digits-grid4", "hidden": 1, "epochs": 1, "teacher_epochs": 2}


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    return make_problem("lingcn", SMALL)


def test_encoding_round_trips(problem) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(0)
    for _ in range(20):
        p = problem.random_point(rng)
        assert problem.from_params(problem.to_params(p)) == p
        assert problem.parse_design(problem.describe(p)) == p
        assert sum(n.contains(p) for n in problem.niches()) == 1
    with pytest.raises(UserInputError, match="keep_l1"):
        problem.from_params({**problem.to_params(p), "keep_l1": 0.3})
    assert all(len(set(n) ^ set(p)) <= 2 for n in problem.neighbours(p))


def test_depth_by_hand(problem) -> None:  # type: ignore[no-untyped-def]
    # per layer: fused conv 1 + ceil(log2 degree); head 1
    designs = [
        (0.0, 0.0, 2, 4, 0.5, "relu-fit"),  # 1 + (1+1) + (1+1) = 5
        (0.5, 0.0, 2, 4, 0.5, "relu-fit"),  # 1 + (1+2) + (1+1) = 6
        (0.5, 0.5, 2, 8, 0.5, "relu-fit"),  # 1 + (1+3) + (1+3) = 9
        (0.0, 0.0, 3, 8, 0.5, "relu-fit"),  # 1 + (1+2) + (1+2) = 7
    ]
    cheap = problem.cheap_values(designs)
    assert cheap["depth"].tolist() == [5, 6, 9, 7]
    assert cheap["latency_s"][2] > cheap["latency_s"][0]  # more levels (a larger ring) and more ct x ct


def test_evaluate_is_val_accuracy_and_cached(problem) -> None:  # type: ignore[no-untyped-def]
    d = (0.25, 0.0, 2, 4, 0.5, "relu-fit")
    v = problem.evaluate(d)
    assert 0.0 <= v["accuracy"] <= 100.0 and v["depth"] == 6.0
    assert problem.evaluate(d) == v
