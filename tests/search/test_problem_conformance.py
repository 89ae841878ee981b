"""The conformance suite every problem runs: registering one (or writing one, as docs/examples does) gets these tests.

Parametrised over every registered problem (built-ins and installed entry points) and the
worked example of docs/problems.md, each built with its own ``example_options``.
"""

from __future__ import annotations

import json
import math
import random
import typing
from pathlib import Path

import optuna
import pytest

from coevo.search.errors import UserInputError
from coevo.search.niches import niche_of
from coevo.search.problem import Evolvable, Problem
from coevo.search.problems import (
    check_problem_class,
    describe_options,
    make_problem,
    problem_class,
    problem_from_spec,
    problem_names,
    problem_reference,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'docs' / 'examples' / 'tiled_matmul.py'}:TiledMatmul"
NAMES = [*problem_names(), EXAMPLE]
IDS = [n if n != EXAMPLE else "docs-example" for n in NAMES]

_BUILT: dict[str, Problem] = {}


def built(name: str) -> Problem:
    """The problem built with its example options (once per test session: some build tables or profiles)."""
    if name not in _BUILT:
        _BUILT[name] = make_problem(name, dict(problem_class(name).example_options))
    return _BUILT[name]


def _points(problem: Problem, n: int, seed: int = 0) -> list[typing.Hashable]:
    """``n`` points sampled the way Optuna samplers do (through ``suggest``)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed), directions=problem.directions)
    return [problem.suggest(study.ask()) for _ in range(n)]


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_declarations_keep_the_contract(name: str) -> None:
    cls = problem_class(name)
    check_problem_class(cls, name)  # raises on a broken declaration
    assert cls.objectives[0].direction == "maximize" and cls.objectives[1].direction == "minimize"
    assert all(o.unit and o.cost in ("cheap", "expensive") for o in cls.objectives)
    assert any(o.cost == "expensive" for o in cls.objectives)  # something to pay for: the budget counts it
    for o in cls.objectives:
        lo, hi = o.bounds
        assert lo is None or hi is None or lo < hi


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_options_are_refused_with_their_bounds(name: str) -> None:
    cls = problem_class(name)
    with pytest.raises(UserInputError, match="no option 'no_such_option'"):
        make_problem(name, {**cls.example_options, "no_such_option": 1})
    for row in describe_options(cls):
        assert row["help"], f"option {row['name']} has no help text"
        bad: object = None
        if row["choices"]:
            bad = "not-one-of-the-choices"
        elif row["bounds"]:
            bounds = row["bounds"]
            bad = bounds["le"] + 1 if "le" in bounds else bounds["lt"] if "lt" in bounds else bounds.get("ge", bounds.get("gt", 0)) - 1
        if bad is None:
            continue
        with pytest.raises(UserInputError) as exc:
            make_problem(name, {**cls.example_options, row["name"]: bad})
        assert row["name"] in str(exc.value) and repr(bad) in str(exc.value)  # what was wrong and what was given


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_spec_names_the_problem_and_rebuilds_it(name: str) -> None:
    problem = built(name)
    spec = problem.spec()
    assert spec["problem"] == problem.name and json.loads(json.dumps(spec)) == spec
    again = problem_from_spec(spec, reference=problem_reference(problem))
    assert type(again) is type(problem) and again.spec() == spec


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_parameters_round_trip_and_point_ids_are_stable(name: str) -> None:
    problem = built(name)
    fresh = make_problem(name, dict(problem_class(name).example_options))
    for point in _points(problem, 40):
        params = problem.to_params(point)
        assert problem.from_params(params) == point
        assert set(params) == set(problem.distributions())
        assert fresh.point_id(point) == problem.point_id(point) == problem.point_id(problem.from_params(params))
        if type(problem).parse_design is not Problem.parse_design:
            assert problem.parse_design(problem.describe(point)) == point


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_every_point_lies_in_exactly_one_niche(name: str) -> None:
    problem = built(name)
    niches = problem.niches()
    assert len({n.id for n in niches}) == len(niches) and all(n.description for n in niches)
    for point in _points(problem, 300, seed=1):
        assert sum(n.contains(point) for n in niches) == 1, (
            f"{problem.describe(point)} is in {sum(n.contains(point) for n in niches)} niches"
        )
        niche_of(niches, point)


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_evaluate_gives_every_objective_and_agrees_with_itself(name: str) -> None:
    problem = built(name)
    names = [o.name for o in problem.objectives]
    for point in _points(problem, 2, seed=2):
        values = problem.evaluate(point)
        assert list(values) == names and all(isinstance(v, float) and math.isfinite(v) for v in values.values())
        for o in problem.objectives:
            lo, hi = o.bounds
            assert (lo is None or values[o.name] >= lo) and (hi is None or values[o.name] <= hi), (o.name, values[o.name])
        again = make_problem(name, dict(problem_class(name).example_options)).evaluate(point)
        if problem.noisy:
            assert list(again) == names
        else:
            assert again == values  # deterministic: a new instance, the same values
        if isinstance(problem, Evolvable):
            cheap = problem.cheap_values([point])
            for o in problem.objectives:
                if o.cost == "cheap":
                    assert float(cheap[o.name][0]) == pytest.approx(values[o.name])  # free values are the evaluated ones


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_evolution_operators_stay_in_the_space(name: str) -> None:
    problem = built(name)
    if not isinstance(problem, Evolvable):
        pytest.skip(f"{name} is not Evolvable: the co-evolution engine does not search it")
    rng = random.Random(3)
    points = [problem.random_point(rng) for _ in range(20)]
    for point in points:
        assert problem.from_params(problem.to_params(point)) == point
        neighbours = problem.neighbours(point)
        assert neighbours and point not in neighbours
        assert all(problem.from_params(problem.to_params(n)) == n for n in neighbours)
    child = problem.crossover(points[0], points[1], rng)
    assert problem.from_params(problem.to_params(child)) == child
    features = problem.features(points)
    assert features.shape[0] == len(points) and features.ndim == 2
    assert all(math.isfinite(float(x)) for x in features.ravel())
