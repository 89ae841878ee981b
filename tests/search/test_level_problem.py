"""The level-choice base (search.problem.LevelProblem) on a small toy space with every kind of level and one constraint."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Any, NamedTuple

import optuna
import pytest

from coevo.search.errors import UserInputError
from coevo.search.problem import LevelProblem, Levels, Objective, level_format
from coevo.search.problems import check_problem_class

TILES = (8, 16, 32, 64)
RATES = (0.0, 0.25, 0.5)
ORDERS = ("ij", "ji", "kj")
TABLE: Mapping[str, Levels] = {
    "tile": Levels(TILES),
    "rate": Levels(RATES, fmt="g"),
    "flag": Levels((0, 1), choices=(0.0, 1.0), fmt="g"),
    "order": Levels(ORDERS, ordered=False),
}
NAMED: Mapping[str, Levels] = {"tile": TABLE["tile"], "order": TABLE["order"]}


class Toy(LevelProblem):
    """Four parameters: ordered ints, floats written with ``g``, a 0/1 flag stored as 0.0/1.0, unordered names.

    Constraint: tile 64 with rate 0.5 is outside the space.
    """

    name = "toy-levels"
    levels = TABLE
    design_noun = "a toy design"
    objectives = (Objective("score", "maximize", "1", "expensive"), Objective("cost", "minimize", "1", "cheap"))

    def violation(self, point: tuple[Any, ...]) -> str | None:
        return "tile 64 cannot run at rate 0.5" if point[0] == 64 and point[1] == 0.5 else None

    def evaluate(self, point: Any) -> dict[str, float]:
        return {"score": float(point[0]) * (1 - point[1]), "cost": float(point[0])}

    def cheap_values(self, points: Any) -> dict[str, Any]:
        return {"cost": [float(p[0]) for p in points]}


class Tiling(NamedTuple):
    tile: int
    order: str


class NamedToy(Toy):
    """The same base with a NamedTuple point and no constraint."""

    name = "toy-named"
    levels = NAMED
    point_type = Tiling

    def violation(self, point: tuple[Any, ...]) -> str | None:
        return None


def space() -> list[tuple[Any, ...]]:
    """Every point of Toy's space, enumerated here from the level lists and the constraint as the docstring states them."""
    return [p for p in itertools.product(TILES, RATES, (0, 1), ORDERS) if not (p[0] == 64 and p[1] == 0.5)]


@pytest.fixture
def toy() -> Toy:
    return Toy()


def test_declaration_passes_the_problem_checks() -> None:
    check_problem_class(Toy, "toy")
    check_problem_class(NamedToy, "toy")


def test_every_point_round_trips_through_params_text_and_optuna(toy: Toy) -> None:
    points = space()
    assert len(points) == 4 * 3 * 2 * 3 - 6
    dists = toy.distributions()
    assert list(dists) == ["tile", "rate", "flag", "order"]
    assert dists["flag"].choices == (0.0, 1.0)
    for p in points:
        params = toy.to_params(p)
        assert all(params[k] in dists[k].choices for k in dists)
        assert toy.from_params(params) == p
        assert toy.parse_design(toy.describe(p)) == p
        assert toy.from_params({k: str(v) for k, v in params.items()}) == p
    study = optuna.create_study(directions=toy.directions)
    for p in points[:5]:
        study.enqueue_trial(toy.to_params(p))
        assert toy.suggest(study.ask()) == p


def test_point_ids_and_descriptions_are_the_declared_text(toy: Toy) -> None:
    assert toy.point_id((8, 0.25, 1, "ji")) == "8-0.25-1-ji"
    assert toy.point_id((64, 0.0, 0, "kj")) == "64-0-0-kj"
    assert toy.describe((16, 0.5, 0, "ij")) == "tile=16 rate=0.5 flag=0 order=ij"
    assert toy.to_params((16, 0.5, 1, "ij")) == {"tile": 16, "rate": 0.5, "flag": 1.0, "order": "ij"}
    assert len({toy.point_id(p) for p in space()}) == len(space())
    assert Toy().point_id((32, 0.25, 0, "ij")) == toy.point_id((32, 0.25, 0, "ij"))
    assert level_format(Toy.levels) == "key=value pairs: tile=(8|16|32|64) rate=(0|0.25|0.5) flag=(0|1) order=(ij|ji|kj)"


def test_values_keep_the_level_types(toy: Toy) -> None:
    p = toy.from_params({"tile": "16", "rate": 0, "flag": 1.0, "order": " ji "})
    assert p == (16, 0.0, 1, "ji")
    assert [type(v) for v in p] == [int, float, int, str]


def test_bad_designs_name_the_field(toy: Toy) -> None:
    with pytest.raises(UserInputError, match=r"tile=12 is outside the space; tile is one of 8, 16, 32, 64"):
        toy.from_params({"tile": 12, "rate": 0.0, "flag": 0, "order": "ij"})
    with pytest.raises(UserInputError, match=r"order=ik is outside the space; order is one of ij, ji, kj"):
        toy.parse_design("tile=8 rate=0 flag=0 order=ik")
    with pytest.raises(UserInputError, match=r"cannot read .* as a toy design: .*missing: rate, flag"):
        toy.parse_design("tile=8 order=ij")
    with pytest.raises(UserInputError, match=r"rate=0\.3 is outside .*flag=2 is outside"):
        toy.from_params({"tile": 8, "rate": 0.3, "flag": 2, "order": "ij"})
    with pytest.raises(UserInputError, match=r"tile 64 cannot run at rate 0\.5"):
        toy.from_params({"tile": 64, "rate": 0.5, "flag": 0, "order": "ij"})


def test_neighbours_change_one_choice_by_one_step_or_to_any_other_unordered_level(toy: Toy) -> None:
    assert toy.neighbours((16, 0.25, 0, "ij")) == [
        (8, 0.25, 0, "ij"), (32, 0.25, 0, "ij"), (16, 0.0, 0, "ij"), (16, 0.5, 0, "ij"), (16, 0.25, 1, "ij"),
        (16, 0.25, 0, "ji"), (16, 0.25, 0, "kj"),
    ]  # fmt: skip
    assert (64, 0.5, 1, "kj") not in toy.neighbours((32, 0.5, 1, "kj"))  # the constraint holds
    levels = (TILES, RATES, (0, 1), ORDERS)
    for p in space():
        for n in toy.neighbours(p):
            changed = [i for i in range(4) if n[i] != p[i]]
            assert len(changed) == 1 and n in space()
            i = changed[0]
            assert i == 3 or abs(levels[i].index(n[i]) - levels[i].index(p[i])) == 1


def test_crossover_takes_each_choice_from_a_parent_and_keeps_the_constraint(toy: Toy) -> None:
    rng = random.Random(3)
    a, b = (64, 0.0, 0, "ij"), (8, 0.5, 1, "kj")
    children = [toy.crossover(a, b, rng) for _ in range(200)]
    assert all(all(c[i] in (a[i], b[i]) for i in range(4)) for c in children)
    assert all(c in space() for c in children)
    assert len(set(children)) > 8  # both parents contribute, in many mixes
    assert [toy.crossover(a, b, random.Random(s)) for s in range(5)] == [toy.crossover(a, b, random.Random(s)) for s in range(5)]


def test_random_points_cover_the_space_deterministically(toy: Toy) -> None:
    draws = [toy.random_point(random.Random(0)) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]
    rng = random.Random(1)
    points = [toy.random_point(rng) for _ in range(3000)]
    assert set(points) == set(space())  # 66 points, 3000 draws: every one is hit
    assert [toy.random_point(random.Random(s)) for s in range(20)] != [toy.random_point(random.Random(s + 1)) for s in range(20)]


def test_features_are_numbers_or_level_indices(toy: Toy) -> None:
    assert toy.features([(8, 0.25, 1, "kj"), (64, 0.0, 0, "ij")]).tolist() == [[8.0, 0.25, 1.0, 2.0], [64.0, 0.0, 0.0, 0.0]]
    assert toy.features([]).shape == (0, 4)


def test_named_tuple_points() -> None:
    p = NamedToy()
    point = p.from_params({"tile": 32, "order": "ji"})
    assert isinstance(point, Tiling) and point == Tiling(32, "ji")
    assert all(isinstance(n, Tiling) for n in p.neighbours(point))
    assert isinstance(p.random_point(random.Random(0)), Tiling)
    assert isinstance(p.crossover(point, Tiling(8, "ij"), random.Random(0)), Tiling)
    assert p.point_id(point) == "32-ji"


def test_level_tables_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Levels(())
    with pytest.raises(ValueError, match="must differ"):
        Levels((1, 2, 1))
    with pytest.raises(ValueError, match="2 Optuna choices for 3 levels"):
        Levels((1, 2, 3), choices=(1.0, 2.0))
    assert Levels((True, False)).read("yes") == (True, True) and Levels((True, False)).read("no") == (True, False)
    assert Levels((True, False)).read("maybe") == (False, None)
