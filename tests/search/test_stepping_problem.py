"""The stepping problem: splits -> step fractions, the cheap objective from the plan, niches, evaluation, and a pelnas search."""

from __future__ import annotations

import json

import pytest

from coevo.agent.cli import main
from coevo.search.errors import UserInputError
from coevo.search.niches import niche_of
from coevo.search.problems import make_problem
from coevo.search.stepping.problem import FIRST, GAPS, SteppingProblem, fractions_of
from coevo.sim.stepping import build, plan, stepping_macs, zoo_setup
from coevo.sim.stepping.config import SteppingConfig


@pytest.fixture(scope="module")
def problem() -> SteppingProblem:
    # the index partition keeps these trainings cheap; the importance-driven assignment has its own tests (tests/sim)
    return SteppingProblem(epochs=1, assign="index")


def test_designs_train_with_the_familys_assignment_by_default() -> None:
    assert SteppingProblem().options.assign == SteppingConfig.assign == "importance"


def test_every_split_is_four_increasing_fractions_ending_at_the_full_model() -> None:
    assert fractions_of((0.1, 0.2, 0.3, 0)) == (0.1, 0.3, 0.6, 1.0)
    assert fractions_of((FIRST[-1], GAPS[-1], GAPS[-1], 1))[2] < 1.0  # the widest split still leaves the last step something
    assert fractions_of((FIRST[0], GAPS[0], GAPS[0], 0))[0] > 0


def test_cheap_objective_is_the_first_steps_macs(problem: SteppingProblem) -> None:
    arch = zoo_setup("cnn-digits")[1]
    for point in ((0.05, 0.1, 0.1, 0), (0.35, 0.3, 0.3, 1)):
        p = plan(arch, fractions_of(point))
        kmac = problem.cheap_values([point])["smallest_kmac"][0]
        assert kmac == stepping_macs(arch, p.cum, 0) / 1000.0
        assert kmac <= point[0] * problem.full_macs / 1000.0  # at most the share it asks for
    low, high = problem.cheap_values([(0.05, 0.1, 0.1, 0), (0.35, 0.1, 0.1, 0)])["smallest_kmac"]
    assert low < high


def test_niches_follow_the_first_step(problem: SteppingProblem) -> None:
    niches = problem.niches()
    ids = [niche_of(niches, (f, 0.1, 0.1, 0)) for f in FIRST]
    assert ids == ["small", "small", "medium", "medium", "large", "large", "large"]


def test_designs_read_back_and_bad_ones_are_refused(problem: SteppingProblem) -> None:
    point = (0.15, 0.25, 0.05, 1)
    assert problem.parse_design(problem.describe(point)) == point
    with pytest.raises(UserInputError, match=r"first=0\.4 is outside the space"):
        problem.parse_design("first=0.4 gap1=0.1 gap2=0.1 distill=0")
    with pytest.raises(UserInputError, match="model"):
        make_problem("stepping", {"model": "cnn-mnist"})
    with pytest.raises(UserInputError, match="epochs"):
        make_problem("stepping", {"epochs": 0})
    assert all(sum(a != b for a, b in zip(point, n, strict=True)) == 1 for n in problem.neighbours(point))


def test_evaluation_is_the_built_nets_mean_validation_accuracy(problem: SteppingProblem) -> None:
    point = (0.25, 0.25, 0.25, 0)
    values = problem.evaluate(point)
    b = build("cnn-digits", (0.25, 0.5, 0.75, 1.0), epochs=1, seed=0, assign=problem.options.assign)
    assert values["mean_accuracy"] == pytest.approx(sum(b.val_accuracy) / 4)
    assert values["smallest_accuracy"] == b.val_accuracy[0]
    assert values == SteppingProblem(epochs=1, assign=problem.options.assign).evaluate(point)


@pytest.mark.slow  # 12 short trainings
def test_pelnas_search_on_the_stepping_problem(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    args = ["search", "--problem", "stepping", "--proposer", "pelnas", "--budget", "12", "--epochs", "1", "--assign", "index"]
    args += ["--storage", storage, "--json"]  # the index partition: the search is under test here, not the assignment (cheaper)
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] == 12 and data["front"]
    assert all(0 <= row["mean_accuracy"] <= 100 and row["smallest_kmac"] > 0 for row in data["front"])
