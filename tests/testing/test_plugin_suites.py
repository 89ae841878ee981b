"""A plug-in's view of coevo.testing: a tiny tool, problem and proposer, registered nowhere, run through the shipped suites.

This module is written as another repository would write its tests: it imports only the
public coevo API and coevo.testing. The broken variants show that each suite can fail, and
that its message names the check and what is wrong.
"""

from __future__ import annotations

import itertools
import random
import time
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
import optuna
import pytest
from pydantic import Field

import coevo
from coevo.testing import Check, ConformanceError
from coevo.testing import problems as problem_suite
from coevo.testing import proposers as proposer_suite
from coevo.testing import tools as tool_suite
from coevo.tools import REGISTRY, Tool, ToolArgs, ToolResult

# ---- a tool


class DoubleArgs(ToolArgs):
    x: int = Field(description="the integer to double")


class Double(Tool):
    """Doubles an integer and says how long that took."""

    name = "plugin.double"
    description = "Double an integer: a plug-in's tool, checked by coevo's shipped conformance suite."
    Args = DoubleArgs
    example: ClassVar[dict[str, Any]] = {"x": 21}
    measured_fields = frozenset({"wall_s"})

    def run(self, args: DoubleArgs) -> ToolResult:
        started = time.perf_counter()
        return ToolResult(value={"doubled": 2 * args.x, "wall_s": time.perf_counter() - started})


_CALLS = itertools.count()


class CountingDouble(Double):
    """Broken: its result numbers the calls, a field that differs between two calls, and does not declare it measured."""

    name = "plugin.counting_double"

    def run(self, args: DoubleArgs) -> ToolResult:
        return ToolResult(value={"doubled": 2 * args.x, "call": next(_CALLS)})


class VagueArgs(ToolArgs):
    x: int


class Vague(Tool):
    """Broken: an argument without a description (a model calling it cannot tell what to pass)."""

    name = "plugin.vague"
    description = Double.description
    Args = VagueArgs
    example: ClassVar[dict[str, Any]] = {"x": 21}

    def run(self, args: VagueArgs) -> ToolResult:
        return ToolResult(value={"doubled": 2 * args.x})


# ---- a problem


LEVELS = (1, 2, 3, 4, 6, 8)


class Cell(NamedTuple):
    """One design: two sizes from :data:`LEVELS`."""

    x: int
    y: int


class GridOptions(coevo.ProblemOptions):
    weight: float = Field(0.1, ge=0.0, le=1.0, description="penalty per unit of x squared in the quality")


class Grid(coevo.Problem, coevo.Evolvable):
    """Pick two sizes: quality (expensive, maximised) against cost (cheap, minimised)."""

    name = "plugin-grid"
    Options = GridOptions
    objectives = (
        coevo.Objective("quality", "maximize", "points", "expensive"),
        coevo.Objective("cost", "minimize", "units", "cheap", bounds=(0.0, None)),
    )
    example_options: ClassVar[Mapping[str, Any]] = {"weight": 0.2}
    design_format = "x=X y=Y, each one of 1, 2, 3, 4, 6, 8"

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {"x": optuna.distributions.CategoricalDistribution(LEVELS), "y": optuna.distributions.CategoricalDistribution(LEVELS)}

    def from_params(self, params: Mapping[str, Any]) -> Cell:
        try:
            cell = Cell(int(params["x"]), int(params["y"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise coevo.UserInputError(f"a cell needs x and y; got {dict(params)!r}") from exc
        if cell.x not in LEVELS or cell.y not in LEVELS:
            raise coevo.UserInputError(f"{cell} is outside the space; {self.design_format}")
        return cell

    def to_params(self, point: Any) -> dict[str, Any]:
        return dict(Cell(*point)._asdict())

    def point_id(self, point: Any) -> str:
        return f"{point[0]}x{point[1]}"

    def describe(self, point: Any) -> str:
        return f"x={point[0]} y={point[1]}"

    def parse_design(self, text: str) -> Cell:
        point, _ = coevo.read_key_values(self, text, "a cell")  # through from_params: a Cell
        return typing.cast(Cell, point)

    def evaluate(self, point: Any) -> dict[str, float]:
        x, y = Cell(*point)
        return {"quality": float(x * y - self.options.weight * x * x), "cost": float(x + y)}

    def neighbours(self, point: Any) -> list[Cell]:
        cell, out = Cell(*point), []
        for field in ("x", "y"):
            i = LEVELS.index(getattr(cell, field))
            out += [cell._replace(**{field: LEVELS[j]}) for j in (i - 1, i + 1) if 0 <= j < len(LEVELS)]
        return out

    def crossover(self, a: Any, b: Any, rng: random.Random) -> Cell:
        return Cell(*(p if rng.random() < 0.5 else q for p, q in zip(a, b, strict=True)))

    def random_point(self, rng: random.Random) -> Cell:
        return Cell(rng.choice(LEVELS), rng.choice(LEVELS))

    def features(self, points: Sequence[Any]) -> np.ndarray:
        return np.array([[float(p[0]), float(p[1])] for p in points]).reshape(-1, 2)

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"cost": np.array([float(p[0] + p[1]) for p in points])}


class DriftingGrid(Grid):
    """Broken: a point's id depends on the instance, so a study resumed elsewhere would pay for it again."""

    name = "plugin-drifting-grid"

    def point_id(self, point: Any) -> str:
        return f"{point[0]}x{point[1]}@{id(self)}"


# ---- a proposer


class Shuffled(coevo.Proposer):
    """Leaves every choice to Optuna's random sampler, seeded by the run."""

    name = "plugin-shuffled"

    def sampler(self, problem: coevo.Problem, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)


class Forgetful(Shuffled):
    """Broken: its options name the instance, so a worker joining the study cannot rebuild the same proposer."""

    name = "plugin-forgetful"

    def options(self) -> dict[str, Any]:
        return {"instance": id(self)}


# ---- the plug-in's tests


@pytest.mark.parametrize("check", tool_suite.CHECKS, ids=str)
def test_the_plugin_tool_passes_the_tool_suite(check: Check[Tool]) -> None:
    check(Double())


GRID = problem_suite.ProblemUnderTest(Grid)


@pytest.mark.parametrize("check", problem_suite.CHECKS, ids=str)
def test_the_plugin_problem_passes_the_problem_suite(check: Check[problem_suite.ProblemUnderTest]) -> None:
    check(GRID)


@pytest.mark.parametrize("check", proposer_suite.CHECKS, ids=str)
def test_the_plugin_proposer_passes_the_proposer_suite(check: Check[proposer_suite.ProposerUnderTest], storage: str) -> None:
    check(proposer_suite.ProposerUnderTest(Shuffled, Grid(), storage=storage))


def test_the_whole_suites_run_without_pytest_too() -> None:
    tool_suite.check_tool_conforms(Double())
    problem_suite.check_problem_conforms(Grid, {"weight": 0.5})
    proposer_suite.check_proposer_conforms(Shuffled, Grid())  # in a temporary SQLite storage
    assert not Path("runs").exists()  # nothing left in the working folder
    assert "plugin.double" not in REGISTRY.names() and "plugin-grid" not in coevo.problem_names()  # registered nowhere


def test_a_broken_tool_fails_the_suite_naming_the_check() -> None:
    with pytest.raises(ConformanceError, match=r"tool plugin.counting_double: check cli_matches_direct_call .*'call'"):
        tool_suite.check_tool_conforms(CountingDouble())
    with pytest.raises(ConformanceError, match=r"tool plugin.vague: check contract .*plugin.vague.x has no description"):
        tool_suite.check_tool_conforms(Vague())


def test_a_broken_problem_fails_the_suite_naming_the_check() -> None:
    with pytest.raises(ConformanceError, match=r"problem plugin-drifting-grid: check params_round_trip .*has several ids"):
        problem_suite.check_problem_conforms(DriftingGrid)


def test_a_broken_proposer_fails_the_suite_naming_the_check() -> None:
    with pytest.raises(ConformanceError, match=r"proposer plugin-forgetful on plugin-grid: check budget_and_resume .*records options"):
        proposer_suite.check_proposer_conforms(Forgetful, Grid())
