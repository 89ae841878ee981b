"""Every problem explains its design encoding in words (reports open with it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
import pytest

from coevo.search.problem import Objective, Point, Problem
from coevo.search.problems import BUILTIN, make_problem


class _Toy(Problem):
    name = "toy"
    objectives = (Objective("score", "maximize", "", "expensive"), Objective("cost", "minimize", "USD", "cheap"))

    def spec(self) -> dict[str, Any]:
        return {"problem": self.name}

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {
            "left": optuna.distributions.CategoricalDistribution(["a", "b"]),
            "right": optuna.distributions.CategoricalDistribution(["a", "b"]),
            "depth": optuna.distributions.IntDistribution(1, 9, step=2),
            "rate": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
        }

    def from_params(self, params: Mapping[str, Any]) -> Point:
        return tuple(params.values())

    def to_params(self, point: Any) -> dict[str, Any]:
        return dict(zip(self.distributions(), point, strict=True))

    def point_id(self, point: Point) -> str:
        return str(point)

    def describe(self, point: Point) -> str:
        return str(point)

    def evaluate(self, point: Point) -> dict[str, float]:
        return {"score": 0.0, "cost": 0.0}


def test_the_default_names_every_parameter_and_what_it_can_be() -> None:
    text = _Toy().explain_encoding()
    assert text.startswith("A design is set by 4 parameters: ")
    assert "left, right (each one of a, b)" in text  # same choices: listed together
    assert "depth (an integer from 1 to 9 in steps of 2)" in text
    assert "rate (a number from 0.0001 to 0.1 (log scale))" in text
    assert "written as" not in text  # no design_format: nothing claimed about it
    toy = _Toy()
    toy.design_format = "left/right/depth/rate."
    assert toy.explain_encoding().endswith(" It is written as left/right/depth/rate.")


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_builtin_problem_explains_every_parameter(name: str) -> None:
    problem = make_problem(name, {})
    text = problem.explain_encoding()
    assert all(param in text for param in problem.distributions())


def test_nb201_says_what_edge_i_j_means() -> None:
    text = make_problem("nb201", {}).explain_encoding()
    assert "edge_i_j is the operation on the edge from node i to node j" in text
    assert all(op in text for op in ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"))
