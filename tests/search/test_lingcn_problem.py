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
    with pytest.raises(UserInputError, match="budget"):
        problem.from_params({**problem.to_params(p), "budget": 1.5})
    assert all(len(set(n) ^ set(p)) <= 2 for n in problem.neighbours(p))


def test_depth_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    # op costs from a fixed model (linear in the ring dimension and in the chain's primes), not timed on this machine:
    # measured costs under load made the order flaky, and the order asked here is a property of the structure
    from coevo.search.lingcn import problem as lingcn_problem

    weights = {"encrypt": 1.0, "mul_plain": 0.1, "mul": 2.0, "add": 0.05, "add_plain": 0.05}
    monkeypatch.setattr(lingcn_problem, "_costs", lambda n, bits: {op: w * 1e-8 * n * len(bits) for op, w in weights.items()})
    fresh = make_problem("lingcn", SMALL)  # structures are cached per instance: a new one uses the fixed costs
    assert isinstance(fresh, lingcn_problem.LinGcnProblem)
    # 2 blocks, 4 non-linear positions per node; each kept (block, rank) row adds 2 levels on every path; head 1
    designs = [(b, 0.5, 1.0, "relu-fit") for b in (0.0, 0.25, 0.5, 0.75, 1.0)]
    cheap = fresh.cheap_values(designs)
    assert cheap["depth"].tolist() == [1, 3, 5, 7, 9]
    assert list(cheap["latency_s"]) == sorted(cheap["latency_s"])  # each kept row adds squares and a deeper chain
    assert cheap["latency_s"][4] > 2 * cheap["latency_s"][2]


def test_evaluate_is_val_accuracy_and_cached(problem) -> None:  # type: ignore[no-untyped-def]
    d = (0.5, 0.5, 1.0, "relu-fit")
    v = problem.evaluate(d)
    assert 0.0 <= v["accuracy"] <= 100.0 and v["depth"] == 5.0
    assert problem.evaluate(d) == v
