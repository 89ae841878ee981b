"""The table of problems a search can run, by name."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from search.compress.problem import CompressProblem
from search.errors import UserInputError, unknown_name
from search.nb201.problem import NB201Problem
from search.noc.problem import NocProblem
from search.pipeline.problem import PipelineProblem
from search.problem import Problem

PROBLEMS: dict[str, Callable[..., Problem]] = {
    "nb201": NB201Problem.from_options,
    "pipeline": PipelineProblem,
    "noc": NocProblem,
    "compress": CompressProblem,
}
"""Problem name -> factory taking the problem's options as keyword arguments (a class whose ``__init__`` takes them, or a
``from_options`` where options choose between classes, as NB201's ``mode`` does)."""


def make_problem(name: str, options: Mapping[str, Any] | None = None) -> Problem:
    """Build a problem from its name and options (``None`` options are dropped).

    Raises:
        UserInputError: unknown problem name, or an option the problem does not take.
    """
    try:
        factory = PROBLEMS[name]
    except KeyError:
        raise unknown_name("problem", name, PROBLEMS) from None
    given = {k: v for k, v in (options or {}).items() if v is not None}
    accepted = set(inspect.signature(factory).parameters)
    extra = sorted(set(given) - accepted)
    if extra:
        raise UserInputError(f"problem {name!r} does not take option(s) {', '.join(extra)}; it takes: {', '.join(sorted(accepted))}")
    return factory(**given)
