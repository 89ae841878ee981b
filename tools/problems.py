"""``problem.describe`` and ``problem.cheap_objectives``: what a problem is, and the free objectives of its designs.

``problem.describe`` gives chat what ``coevo problems describe`` shows (objectives with units and
costs, options, niches) and what a model needs to write designs: the design format, the encoding
explained, and for a composed problem (:class:`~search.compose.ComposedProblem`) its parts, each
with its parameters and their values.


A search pays only for its expensive objectives (NB201 accuracy); the cheap ones (NB201
latency from the lookup table, a simulator's estimate) are free to know for any design, which
is why the co-evolution engine ranks candidates with them and why an LLM reasoner may call
this tool inside a round (:mod:`agent.reasoners.round_tools`). It never returns an expensive
objective: it calls :meth:`search.problem.Evolvable.cheap_values`, whose contract is that
nothing expensive is evaluated.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, ClassVar

import optuna
from pydantic import Field

from coevo.search.compose import ComposedProblem
from coevo.search.config import DEFAULT_PROBLEM
from coevo.search.errors import UserInputError
from coevo.search.problem import Evolvable, Problem
from coevo.search.problems import describe_options, make_problem
from coevo.tools._base import Tool, ToolArgs, ToolResult, problem_code

MAX_DESIGNS = 64


class CheapArgs(ToolArgs):
    """The problem, its options, and the designs whose free (cheap) objectives to compute."""

    problem: str = Field(DEFAULT_PROBLEM, description=f"problem name (coevo problems list), e.g. {DEFAULT_PROBLEM}")
    options: dict[str, Any] = Field(default_factory=dict, description='problem options, e.g. {"dataset": "cifar10", "device": "fpga"}')
    designs: list[str] = Field(
        ..., min_length=1, max_length=MAX_DESIGNS, description=f"designs in the problem's design format (1 to {MAX_DESIGNS})"
    )


@lru_cache(maxsize=16)
def _problem(name: str, options_json: str) -> Problem:
    return make_problem(name, json.loads(options_json))  # NB201's table loads once per setting, not per call


class ProblemCheap(Tool):
    """The cheap objectives of up to 64 designs (free lookups or simulations; never an expensive objective)."""

    name = "problem.cheap_objectives"
    description = (
        "The cheap objectives of designs of a search problem, free to know before paying for an evaluation: e.g. NB201 "
        "latency (ms) on a device from the lookup table, or nb201-accel's latency, energy and area from its accelerator "
        "model. Never returns an expensive objective (accuracy). "
        "Invalid designs are listed with the reason."
    )
    Args = CheapArgs
    loads_code = ("problem", "options")  # a problem file, or a model file among the options: a model's call asks first
    example: ClassVar[dict[str, Any]] = {
        "problem": "nb201",
        "options": {"dataset": "cifar10", "device": "raspi4"},
        "designs": ["|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"],
    }

    def user_code(self, args: Any) -> list[str]:
        return problem_code(args)

    def run(self, args: CheapArgs) -> ToolResult:
        problem = _problem(args.problem, json.dumps(args.options, sort_keys=True))
        cheap = [o for o in problem.objectives if o.cost == "cheap"]
        if not isinstance(problem, Evolvable) or not cheap:
            raise UserInputError(f"problem {problem.name} has no cheap objectives to compute without evaluating a design")
        rows: list[dict[str, Any]] = []
        valid: list[tuple[int, Any]] = []
        for k, text in enumerate(args.designs):
            try:
                point = problem.parse_design(text)
            except UserInputError as exc:
                rows.append({"design": text, "error": str(exc)})
                continue
            rows.append({"design": problem.describe(point)})
            valid.append((k, point))
        if valid:
            values = problem.cheap_values([p for _, p in valid])
            for j, (k, _) in enumerate(valid):
                rows[k].update({o.name: round(float(values[o.name][j]), 6) for o in cheap})
        units = {o.name: o.unit for o in cheap}
        messages = [f"cheap objectives of {problem.name}: " + ", ".join(f"{n} ({u})" for n, u in units.items())]
        expensive = [o.name for o in problem.objectives if o.cost == "expensive"]
        if expensive:
            messages.append(f"{', '.join(expensive)} cost(s) an evaluation and are not given here")
        return ToolResult(value={"problem": problem.spec(), "units": units, "designs": rows}, messages=messages)


class DescribeArgs(ToolArgs):
    """The problem to describe, and its options (the defaults when none are given)."""

    problem: str = Field(DEFAULT_PROBLEM, description="problem name (coevo problems list), e.g. nb201-accel, or path/to/file.py:Class")
    options: dict[str, Any] = Field(default_factory=dict, description='problem options, e.g. {"dataset": "cifar10"}; default: the defaults')


def parameter_values(distribution: optuna.distributions.BaseDistribution) -> list[Any] | dict[str, Any]:
    """The values a design parameter takes: its choices, or its range (and step).

    >>> parameter_values(optuna.distributions.CategoricalDistribution(("ws", "os", "is")))
    ['ws', 'os', 'is']
    >>> parameter_values(optuna.distributions.IntDistribution(8, 128, step=8))
    {'low': 8, 'high': 128, 'step': 8}
    """
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return list(distribution.choices)
    if isinstance(distribution, optuna.distributions.IntDistribution | optuna.distributions.FloatDistribution):
        out = {"low": distribution.low, "high": distribution.high}
        return out | ({"step": distribution.step} if distribution.step is not None else {}) | ({"log": True} if distribution.log else {})
    return {"distribution": type(distribution).__name__}


def _parts(problem: Problem) -> list[dict[str, Any]]:
    """A composed problem's parts (a single problem is its own one part): key, problem, design format, parameters."""
    pairs = [(p.key, p.problem) for p in problem.part_list] if isinstance(problem, ComposedProblem) else [(problem.name, problem)]
    return [
        {
            "part": key,
            "problem": part.name,
            "label": part.design_label,
            "design_format": part.design_format,
            "parameters": {name: parameter_values(d) for name, d in part.distributions().items()},
        }
        for key, part in pairs
    ]


class ProblemDescribe(Tool):
    """A problem's objectives (units, costs), options, niches, design format and, composed, its parts and their parameters."""

    name = "problem.describe"
    description = (
        "Describe a search problem before searching it: its objectives (direction, unit, cheap or expensive), its "
        "options with defaults and bounds, its niches, how a design is written, and, for a composed problem such as "
        "nb201-accel (an NB201 cell x a systolic-array accelerator), each part with its parameters and their values."
    )
    Args = DescribeArgs
    loads_code = ("problem", "options")  # a problem file, or a model file among the options: a model's call asks first
    example: ClassVar[dict[str, Any]] = {"problem": "nb201-accel", "options": {"dataset": "cifar10"}}

    def user_code(self, args: Any) -> list[str]:
        return problem_code(args)

    def run(self, args: DescribeArgs) -> ToolResult:
        problem = _problem(args.problem, json.dumps(args.options, sort_keys=True))
        value = {
            "problem": problem.spec(),
            "doc": (type(problem).__doc__ or "").strip().split("\n")[0],
            "objectives": [
                {
                    "name": o.name,
                    "direction": o.direction,
                    "unit": o.unit,
                    "cost": o.cost,
                    "depends_on": None if o.depends_on is None else list(o.depends_on),
                }
                for o in problem.objectives
            ],
            "front_pair": list(problem.front_objectives),
            "options": describe_options(type(problem)),
            "niches": [{"id": n.id, "description": n.description} for n in problem.niches()],
            "design_format": problem.design_format,
            "encoding": problem.explain_encoding(),
            "parts": _parts(problem),
        }
        return ToolResult(value=value)
