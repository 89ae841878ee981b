"""Composed problems (search/compose.py): refused compositions, the joint encoding's round trips, operators, niches, the docs example."""

from __future__ import annotations

import json
import pickle
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from coevo.agent.cli import main
from coevo.search.compose import ComposedProblem, Part
from coevo.search.errors import UserInputError
from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective
from coevo.search.problems import make_problem
from coevo.testing import problems as problem_suite

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "cell_on_chip.py"

OBJECTIVES = (Objective("score", "maximize", "1", "expensive"), Objective("cost", "minimize", "1", "cheap"))


class Width(LevelProblem):
    """A toy part: a width, handed on as an int; niches narrow / wide."""

    name = "width"
    levels: ClassVar[Mapping[str, Levels]] = {"width": Levels((1, 2, 4, 8))}
    objectives = OBJECTIVES

    def evaluate(self, point: Any) -> dict[str, float]:
        return {"score": float(point[0]), "cost": float(point[0])}

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"cost": np.array([float(p[0]) for p in points])}

    def niches(self) -> tuple[Niche, ...]:
        return (Niche("narrow", "width up to 2", lambda p: p[0] <= 2), Niche("wide", "width above 2", lambda p: p[0] > 2))


class Clock(Width):
    """A second toy part: a clock and a mode; niches by mode."""

    name = "clock"
    levels: ClassVar[Mapping[str, Levels]] = {"mhz": Levels((100, 200, 300)), "mode": Levels(("a", "b"), ordered=False)}

    def niches(self) -> tuple[Niche, ...]:
        return (Niche("a", "mode a", lambda p: p[1] == "a"), Niche("b", "mode b", lambda p: p[1] == "b"))


class Chained(ComposedProblem):
    """Width x clock: the width's stage hands an int on, the clock's turns it into a time; width x mhz <= 1200 between parts."""

    name = "toy-chain"
    objectives = OBJECTIVES
    niche_parts = ("width", "clock")

    def parts(self) -> Sequence[Part]:
        return [
            Part("width", Width(), stage=lambda p, _: p[0] * 1000, produces=int),
            Part("clock", Clock(), stage=lambda p, ops: ops / p[0], consumes=int, produces=float),
        ]

    def values(self, point: tuple[Any, ...], outputs: Mapping[str, Any], *, cheap_only: bool) -> dict[str, float]:
        out = {"cost": outputs["clock"]}
        if not cheap_only:
            out["score"] = float(point[0][0] + (point[1][1] == "b"))
        return out

    def violation(self, point: tuple[Any, ...]) -> str | None:
        return "too hot" if point[0][0] * point[1][0] > 1200 else None


class Clash(Chained):
    name = "toy-clash"

    def parts(self) -> Sequence[Part]:
        return [Part("one", Width()), Part("two", Width())]


class Mismatch(Chained):
    name = "toy-mismatch"

    def parts(self) -> Sequence[Part]:
        return [
            Part("width", Width(), stage=lambda p, _: str(p[0]), produces=str),
            Part("clock", Clock(), stage=lambda p, ops: ops / p[0], consumes=int, produces=float),
        ]


def test_parts_sharing_a_parameter_are_refused() -> None:
    with pytest.raises(UserInputError, match="parts 'one' and 'two' share the parameter 'width'"):
        Clash()


def test_a_chain_whose_output_is_not_the_next_input_is_refused() -> None:
    with pytest.raises(UserInputError, match="part 'clock' needs int but the part before it produces str"):
        Mismatch()


def test_a_stage_returning_another_type_than_declared_is_refused() -> None:
    class Liar(Chained):
        def parts(self) -> Sequence[Part]:
            return [Part("width", Width(), stage=lambda p, _: "x", produces=int), *super().parts()[1:]]

    with pytest.raises(UserInputError, match="part 'width' should produce int, its stage returned str"):
        Liar().evaluate(((1,), (100, "a")))


@pytest.mark.parametrize(
    ("problem_class", "message"),
    [("Clash", "share the parameter 'width'"), ("Mismatch", "needs int but the part before it produces str")],
)
def test_a_bad_composition_is_one_line_and_exit_2_from_the_command_line(
    tmp_path: Path, storage: str, capsys: pytest.CaptureFixture[str], problem_class: str, message: str
) -> None:
    path = tmp_path / "bad.py"
    path.write_text(Path(__file__).read_text())  # this module's classes, loaded as a user's file
    assert main(["search", "--problem", f"{path}:{problem_class}", "--budget", "3", "--storage", storage]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_the_joint_encoding_round_trips_and_ids_join_the_parts() -> None:
    problem = Chained()
    assert set(problem.distributions()) == {"width", "mhz", "mode"}
    rng = random.Random(0)
    for _ in range(50):
        point = problem.random_point(rng)
        assert problem.violation(point) is None
        params = problem.to_params(point)
        assert problem.from_params(params) == point
        assert problem.parse_design(problem.describe(point)) == point
        assert problem.point_id(point) == f"{point[0][0]}/{point[1][0]}-{point[1][1]}"
    assert problem.describe(((2,), (300, "b"))) == "width: width=2 ; clock: mhz=300 mode=b"
    with pytest.raises(UserInputError, match="outside the space: too hot"):
        problem.from_params({"width": 8, "mhz": 200, "mode": "a"})
    with pytest.raises(UserInputError, match="no part clock"):
        problem.parse_design("width: width=2")


def test_the_operators_move_one_part_and_keep_the_constraint() -> None:
    problem = Chained()
    rng = random.Random(1)
    for _ in range(30):
        point = problem.random_point(rng)
        neighbours = problem.neighbours(point)
        assert neighbours and point not in neighbours
        for n in neighbours:
            assert sum(a != b for a, b in zip(point, n, strict=True)) == 1 and problem.violation(n) is None
        other = problem.random_point(rng)
        child = problem.crossover(point, other, rng)
        assert problem.violation(child) is None
        assert child[0] in (point[0], other[0]) and child[1][0] in (point[1][0], other[1][0])
    # every neighbour the parts offer that keeps the constraint is there: (2, 300) -> width 1 or 4; mhz 200; mode a
    assert set(problem.neighbours(((2,), (300, "b")))) == {((1,), (300, "b")), ((4,), (300, "b")), ((2,), (200, "b")), ((2,), (300, "a"))}


def test_evaluation_chains_the_parts_and_cheap_values_skip_the_expensive_one() -> None:
    problem = Chained()
    point = ((4,), (200, "b"))
    assert problem.chain(point) == {"width": 4000, "clock": 20.0}
    assert problem.evaluate(point) == {"score": 5.0, "cost": 20.0}
    cheap = problem.cheap_values([point, ((1,), (100, "a"))])
    assert list(cheap) == ["cost"] and cheap["cost"].tolist() == [20.0, 10.0]


def test_niches_are_the_product_of_the_named_parts() -> None:
    problem = Chained()
    niches = problem.niches()
    assert [n.id for n in niches] == ["narrow*a", "narrow*b", "wide*a", "wide*b"]
    rng = random.Random(2)
    for _ in range(100):
        point = problem.random_point(rng)
        assert sum(n.contains(point) for n in niches) == 1


def test_nb201_accel_is_built_from_the_registry_with_its_parts() -> None:
    problem = make_problem("nb201-accel", {"dataset": "cifar100"})
    point = problem.random_point(random.Random(0))  # type: ignore[attr-defined]
    again = pickle.loads(pickle.dumps(problem))  # rebuilt from its options (its stages are closures)
    assert again.spec() == problem.spec() and again.evaluate(point) == problem.evaluate(point)
    assert [p.key for p in problem.part_list] == ["cell", "accel"]  # type: ignore[attr-defined]
    assert [n.id for n in problem.niches()] == ["conv0", "c1x1", "c3x3_1", "c3x3_2", "c3x3_3", "c3x3_4p"]
    assert problem.front_objectives == ("accuracy", "latency_ms")


@pytest.mark.parametrize("check", problem_suite.CHECKS, ids=str)
def test_the_toy_composition_conforms_where_samplers_cannot_break_its_constraint(check: Any) -> None:
    # the conformance suite samples through Optuna, which cannot be told a constraint: conform without it
    class Unconstrained(Chained):
        def violation(self, point: tuple[Any, ...]) -> str | None:
            return None

    globals()["Unconstrained"] = Unconstrained  # one check rebuilds the class from its module and name
    Unconstrained.__qualname__ = "Unconstrained"
    check(problem_suite.ProblemUnderTest(Unconstrained))


def _example() -> Any:
    from coevo.search.problems import problem_class

    return problem_class(f"{EXAMPLE}:CellOnChip")()


def test_the_docs_example_keeps_its_constraint_between_parts_and_multiplies_niches() -> None:
    problem = _example()
    assert len(problem.niches()) == 6 * 3 and problem.niches()[0].id == "conv0*ws"
    rng = random.Random(4)
    for _ in range(40):
        point = problem.random_point(rng)
        needs = 256 if 3 in point[0] else 64  # a 3x3 conv (code 3) at 32 px reads 144 KiB of im2col input; else the reduction's 36 KiB
        assert point[1][3] >= needs and all(n[1][3] >= (256 if 3 in n[0] else 64) for n in problem.neighbours(point))
    with pytest.raises(UserInputError, match=r"the largest layer input \(144 KiB\) does not fit the 128 KiB input buffer"):
        problem.parse_design(
            "cell: |nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2| ; "
            "accel: rows=8 cols=8 dataflow=ws ifmap_kb=128 filter_kb=8 ofmap_kb=16 clock_mhz=200"
        )


@pytest.mark.slow  # the engine's first round samples random designs for each of the 18 product niches: ~30 s on 2 loaded cores
def test_the_docs_example_runs(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", "--problem", f"{EXAMPLE}:CellOnChip", "--proposer", "pelnas", "--budget", "10", "--storage", storage, "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluations"] == 10 and result["front"]
    for row in result["front"]:
        ifmap = int(re.search(r"ifmap_kb=(\d+)", row["design"]).group(1))  # type: ignore[union-attr]
        needs = 256 if "nor_conv_3x3" in row["design"].split(" ; ")[0] else 64  # a 3x3 conv at 32 px: 144 KiB of im2col input
        assert ifmap >= needs, row["design"]
