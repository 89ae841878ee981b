"""The freeze problem: the encoding, counted MACs by hand, niches, evaluation on digits, and a short search."""

from __future__ import annotations

import pytest

from coevo.search.errors import UserInputError
from coevo.search.freeze.problem import FreezeProblem
from coevo.search.problems import make_problem
from coevo.search.runner import run_search

N_TRAIN = 1000  # cnn-digits' training split
LAYERS = [16 * 64 * 9, 32 * 64 * 16 * 9, 64 * 16 * 32 * 9, 256 * 64, 64 * 10]  # per-sample forward MACs (hand counts)


@pytest.fixture(scope="module")
def problem() -> FreezeProblem:
    return FreezeProblem(epochs=2)


def test_freeze_points_are_the_running_maximum() -> None:
    p = FreezeProblem(epochs=8)
    assert p.freeze_at((0.5, 0.25, 1.0, 8, 6, 4, 0.25)) == (4, 4, None)
    assert p.freeze_at((0.25, 0.75, 0.5, 8, 6, 4, 0.25)) == (2, 6, 6)
    assert p.freeze_at((1.0, 0.25, 0.25, 8, 6, 4, 0.25)) == (None, None, None)
    cfg = FreezeProblem(epochs=8, codec="jpeg").config((0.25, 0.5, 0.75, 8, 6, 4, 0.0))
    assert cfg.quality == (90, 75, 50) and cfg.augment == "none"
    assert p.config((0.25, 0.5, 0.75, 8, 6, 4, 1.0)).augment == "full"


def test_counted_gmac_by_hand(problem: FreezeProblem) -> None:
    full = problem.cheap_values([(1.0, 1.0, 1.0, 8, 8, 8, 0.0)])["train_gmac"][0]
    # 2 epochs, every layer forward + weight gradient, all but conv1 the input gradient
    assert full == pytest.approx(2 * N_TRAIN * (3 * sum(LAYERS) - LAYERS[0]) / 1e9)
    # conv1 frozen after 1 epoch, cache without augmentation: epoch 1 full; one pass of conv1 over the set to build the
    # cache; epoch 2 trains conv2.. with no input gradient at conv2
    one = problem.cheap_values([(0.5, 1.0, 1.0, 8, 8, 8, 0.0)])["train_gmac"][0]
    epoch2 = 3 * sum(LAYERS[1:]) - LAYERS[1]
    assert one == pytest.approx(N_TRAIN * (3 * sum(LAYERS) - LAYERS[0] + LAYERS[0] + epoch2) / 1e9)


def test_evaluation_counts_what_it_claims_and_niches_follow_frozen_blocks(problem: FreezeProblem) -> None:
    point = (0.5, 0.5, 1.0, 8, 4, 4, 0.25)
    values = problem.evaluate(point)
    assert values["train_gmac"] == pytest.approx(problem.cheap_values([point])["train_gmac"][0])
    assert values["cache_mb"] > 0 and 0 <= values["accuracy"] <= 100
    niches = {n.id: n for n in problem.niches()}
    assert niches["two"].contains(point) and niches["none"].contains((1.0, 0.5, 0.5, 8, 8, 8, 0.0))
    assert niches["three"].contains((0.5, 0.5, 0.5, 8, 8, 8, 0.0))


def test_bad_designs_and_options_are_refused(problem: FreezeProblem) -> None:
    with pytest.raises(UserInputError, match="outside the space"):
        problem.parse_design("f1=0.3 f2=0.5 f3=1 b1=8 b2=6 b3=4 share=0.25")
    with pytest.raises(UserInputError, match="need"):
        problem.from_params({"f1": 0.25})
    with pytest.raises(UserInputError, match="model"):
        make_problem("freeze", {"model": "cnn-mnist"})
    assert problem.parse_design(problem.describe((0.25, 0.5, 1.0, 8, 6, 4, 0.125))) == (0.25, 0.5, 1.0, 8, 6, 4, 0.125)


@pytest.mark.slow
def test_a_short_pelnas_search_runs(storage: str) -> None:
    result = run_search(FreezeProblem(epochs=1), "pelnas", budget=4, storage=storage)
    assert result.evaluations == 4
