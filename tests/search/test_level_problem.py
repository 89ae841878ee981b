"""The level-choice base (search.problem.LevelProblem) on a small toy space with every kind of level and one constraint."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Mapping
from typing import Any, NamedTuple

import optuna
import pydantic
import pytest

from coevo.search.errors import UserInputError
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field, level_format
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


# ---- family configurations (search.problem.config_field)


@dataclasses.dataclass(frozen=True)
class Family:
    size: int = dataclasses.field(default=4, metadata={"help": "cells", "ge": 1, "le": 64})
    name: str = dataclasses.field(default="a", metadata={"help": "which one"})


def test_config_field_takes_default_bounds_and_help_from_the_family() -> None:
    class Options(ProblemOptions):
        size: int = config_field(Family, "size")
        small: int = config_field(Family, "size", description="fewer cells", le=8)
        free: int = config_field(Family, "size", bounds=False)
        name: str = config_field(Family, "name")

    o = Options()
    assert (o.size, o.small, o.free, o.name) == (4, 4, 4, "a")
    assert Options.model_fields["size"].description == "cells" and Options.model_fields["small"].description == "fewer cells"
    assert Options(size=64, free=1000).free == 1000
    with pytest.raises(pydantic.ValidationError, match="less than or equal to 64"):
        Options(size=65)
    with pytest.raises(pydantic.ValidationError, match="less than or equal to 8"):
        Options(small=9)
    with pytest.raises(ValueError, match="not a narrower bound"):
        config_field(Family, "size", le=100)
    with pytest.raises(KeyError):
        config_field(Family, "colour")


def _family_pairs() -> list[tuple[str, type, str, type, str]]:
    """(family, adapter model, its field, family config, the config field it reads), for every shared default."""
    from coevo.search.fpga.problem import FpgaOptions
    from coevo.search.freeze.problem import FreezeOptions
    from coevo.search.lingcn.problem import LinGcnOptions
    from coevo.search.prune.problem import PruneOptions
    from coevo.search.quant.problem import QuantOptions
    from coevo.search.reram.problem import ReramOptions
    from coevo.search.spmm.problem import SpmmOptions
    from coevo.search.stepping.problem import SteppingOptions
    from coevo.sim.fpga.config import FpgaConfig
    from coevo.sim.freeze.config import FreezeFamilyConfig
    from coevo.sim.graph.config import SpmmConfig
    from coevo.sim.he.config import HeConfig
    from coevo.sim.prune.config import PruneConfig
    from coevo.sim.quant.config import QuantConfig
    from coevo.sim.reram.config import ReramConfig
    from coevo.sim.stepping.config import SteppingConfig
    from coevo.tools.fpga import LengthAwareArgs
    from coevo.tools.freeze import FreezeArgs
    from coevo.tools.he import HEGcnArgs
    from coevo.tools.kernels import SpmmArgs
    from coevo.tools.prune import PruneArgs
    from coevo.tools.quant import QuantArgs
    from coevo.tools.reram import ReramArgs
    from coevo.tools.stepping import BuildArgs

    table = {
        "reram": (ReramConfig, [
            (ReramArgs, "fault_rate", "fault_rate"), (ReramOptions, "fault_rate", "fault_rate"), (ReramArgs, "sa0_sa1", "sa0_sa1"),
            (ReramOptions, "sa0_sa1", "sa0_sa1"), (ReramArgs, "rows", "rows"), (ReramArgs, "bits_per_cell", "bits_per_cell"),
            (ReramArgs, "finetune_epochs", "finetune_epochs"), (ReramOptions, "finetune_epochs", "finetune_epochs"),
            (ReramArgs, "fault_maps", "fault_maps"), (ReramOptions, "fault_maps", "search_fault_maps"),
        ]),
        "prune": (PruneConfig, [
            (PruneArgs, "calib_tokens", "calib_tokens"), (PruneOptions, "calib_tokens", "calib_tokens"),
            (PruneArgs, "score", "score"), (PruneOptions, "score", "score"),
            (PruneArgs, "seed", "seed"), (PruneOptions, "calib_seed", "seed"),
        ]),
        "he": (HeConfig, [
            (HEGcnArgs, "teacher_epochs", "teacher_epochs"), (LinGcnOptions, "teacher_epochs", "teacher_epochs"),
            (HEGcnArgs, "scale_bits", "scale_bits"), (LinGcnOptions, "scale_bits", "scale_bits"), (HEGcnArgs, "epochs", "epochs"),
            (LinGcnOptions, "epochs", "search_epochs"), (HEGcnArgs, "dataset", "dataset"), (LinGcnOptions, "dataset", "dataset"),
        ]),
        "spmm": (SpmmConfig, [
            (SpmmArgs, "feature_dim", "feature_dim"), (SpmmOptions, "feature_dim", "feature_dim"), (SpmmArgs, "repeats", "repeats"),
            (SpmmOptions, "repeats", "repeats"), (SpmmArgs, "dtype", "dtype"), (SpmmOptions, "dtype", "dtype"),
        ]),
        "quant": (QuantConfig, [
            (QuantArgs, "finetune_epochs", "finetune_epochs"), (QuantOptions, "finetune_epochs", "search_finetune_epochs"),
            (QuantArgs, "seed", "seed"), (QuantOptions, "seed", "seed"), (QuantOptions, "model", "model"),
        ]),
        "freeze": (FreezeFamilyConfig, [
            (FreezeArgs, "cache", "codec"), (FreezeOptions, "codec", "codec"), (FreezeArgs, "versions", "versions"),
            (FreezeOptions, "versions", "versions"), (FreezeArgs, "seed", "seed"), (FreezeOptions, "seed", "seed"),
        ]),
        "stepping": (SteppingConfig, [
            (BuildArgs, "model", "model"), (SteppingOptions, "model", "model"),
            (BuildArgs, "seed", "seed"), (SteppingOptions, "seed", "seed"),
        ]),
        "fpga": (FpgaConfig, [
            (LengthAwareArgs, "device", "device"), (FpgaOptions, "device", "device"),
            (LengthAwareArgs, "pes", "pes"), (FpgaOptions, "pes", "pes"),
            (LengthAwareArgs, "buckets", "buckets"), (FpgaOptions, "buckets", "buckets"), (LengthAwareArgs, "tile_m", "tile_m"),
        ]),
    }  # fmt: skip
    return [(family, model, f, config, c) for family, (config, rows) in table.items() for model, f, c in rows]


def test_each_family_declares_a_shared_default_once() -> None:
    """A tool argument and a problem option that stand for the same setting hold the family configuration's default."""
    for family, model, f, config, c in _family_pairs():
        assert model.model_fields[f].default == getattr(config(), c), (family, model.__name__, f)
    from coevo.search.freeze.problem import QUALITY
    from coevo.search.reram.problem import CFG
    from coevo.sim.reram import CrossbarConfig

    assert CrossbarConfig() == CFG  # the problem's crossbar is the simulator's default one
    assert QUALITY == {8: 90, 6: 75, 4: 50}  # the jpeg/webp quality of each bit level, as the freeze docs state
