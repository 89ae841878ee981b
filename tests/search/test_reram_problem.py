"""The reram problem: area by hand, niches, determinism, the fault-free accuracy, and a short pelnas search."""

from __future__ import annotations

import random

import pytest

from coevo.search.errors import UserInputError
from coevo.search.problems import make_problem
from coevo.search.reram.problem import LEVELS, ReramProblem
from coevo.search.runner import run_search
from coevo.sim.zoo import load


@pytest.fixture(scope="module")
def problem() -> ReramProblem:
    return ReramProblem(fault_maps=2)


def test_area_by_hand(problem: ReramProblem) -> None:
    base = (0.0, 0.0, 0, 0, 0)
    # mlp-digits: fc1 64->128 (1 x 8 crossbars), fc2 128->64 (2 x 4), fc3 64->10 (1 x 1), two arrays each: 34
    assert problem.cheap_values([base])["area"][0] == 34
    assert problem.cheap_values([(0.0, 0.0, 1, 2, 0)])["area"][0] == 34  # duplication and MSB copies reuse the same crossbars
    assert problem.cheap_values([(0.0, 0.0, 0, 0, 2)])["area"][0] == pytest.approx(34 * 66 * 66 / 64**2)
    # 20 % of columns pruned without duplication frees crossbars: fc1 keeps 103 outputs (412 bitlines, 7 tiles), fc2 52 (208, 2 x 4)
    assert problem.cheap_values([(0.0, 0.2, 0, 0, 0)])["area"][0] == 2 * (7 + 8 + 1)


def test_niches_split_on_spare_lines(problem: ReramProblem) -> None:
    niches = {n.id: n for n in problem.niches()}
    rng = random.Random(0)
    for _ in range(50):
        p = problem.random_point(rng)
        assert niches["spare"].contains(p) == (p[4] > 0) != niches["zero-space"].contains(p)
    assert all(len(LEVELS[k]) >= 2 for k in LEVELS)


def test_no_faults_gives_the_quantized_accuracy_and_evaluate_is_deterministic() -> None:
    clean = ReramProblem(fault_rate=0.0, fault_maps=1)
    zm = load("mlp-digits")
    point = (0.0, 0.0, 0, 0, 0)
    value = clean.evaluate(point)["accuracy"]
    assert value == pytest.approx(zm.evaluate(clean._plan(point).quantized_model(), "val"))
    assert abs(value - zm.baseline["val_accuracy"]) <= 2.0  # 8-bit weights barely move a 98 % classifier
    faulty = ReramProblem(fault_rate=0.2, sa0_sa1="1:1", fault_maps=2)
    hit = faulty.evaluate(point)
    assert hit == ReramProblem(fault_rate=0.2, sa0_sa1="1:1", fault_maps=2).evaluate(point)
    assert hit["accuracy"] < value - 10  # 20 % stuck cells, half of them at the top conductance, break the model


def test_bad_options_are_refused() -> None:
    with pytest.raises(UserInputError, match="SA0:SA1"):
        make_problem("reram", {"sa0_sa1": "nine to one"})
    with pytest.raises(UserInputError, match="fault_rate"):
        make_problem("reram", {"fault_rate": 1.5})
    with pytest.raises(UserInputError, match="knowledge='unknown'"):
        make_problem("reram", {"knowledge": "unknown"})
    with pytest.raises(UserInputError, match=r"finetune_epochs=0 with prune_method='learned'.*prune_method='l2'"):
        make_problem("reram", {"finetune_epochs": 0})  # every pruned design would fail, paid for, as the tool refuses it
    assert make_problem("reram", {"finetune_epochs": 0, "prune_method": "l2"}).options.finetune_epochs == 0
    with pytest.raises(UserInputError, match="outside the space"):
        ReramProblem(fault_maps=1).from_params({"prune_rows": 0.3, "prune_cols": 0, "dup": 0, "msb": 0, "spare": 0})


@pytest.mark.slow  # about 30 s on 2 busy cores
def test_a_short_pelnas_search_runs(storage: str) -> None:
    # one fine-tuning epoch: the search's mechanics, not the fine-tuning (5 epochs made it 238 s on busy cores)
    problem = ReramProblem(fault_maps=1, finetune_epochs=1)
    result = run_search(problem, "pelnas", budget=6, storage=storage, study_name="reram-test")
    assert result.evaluations == 6 and result.problem["problem"] == "reram"
