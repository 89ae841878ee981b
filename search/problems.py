"""The table of problems a search can run, by name.

Problems are imported when first used, so listing their names (``--help``, errors) costs
nothing: some import torch.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from search.errors import UserInputError, unknown_name
from search.problem import Problem

PROBLEMS: dict[str, str] = {
    "nb201": "search.nb201.problem:NB201Problem.from_options",
    "pipeline": "search.pipeline.problem:PipelineProblem",
    "noc": "search.noc.problem:NocProblem",
    "compress": "search.compress.problem:CompressProblem",
}
"""Problem name -> ``module:factory`` taking the problem's options as keyword arguments (a class whose ``__init__`` takes
them, or a ``from_options`` where options choose between classes, as NB201's ``mode`` does)."""


def problem_factory(name: str) -> Callable[..., Problem]:
    """The factory of problem ``name`` (its module imported now).

    Raises:
        UserInputError: unknown problem name (the message lists the valid ones).
    """
    try:
        target = PROBLEMS[name]
    except KeyError:
        raise unknown_name("problem", name, PROBLEMS) from None
    module, _, attr = target.partition(":")
    factory: Any = importlib.import_module(module)
    for part in attr.split("."):
        factory = getattr(factory, part)
    return factory


def make_problem(name: str, options: Mapping[str, Any] | None = None) -> Problem:
    """Build a problem from its name and options (``None`` options are dropped).

    Raises:
        UserInputError: unknown problem name, or an option the problem does not take.
    """
    factory = problem_factory(name)
    given = {k: v for k, v in (options or {}).items() if v is not None}
    accepted = set(inspect.signature(factory).parameters)
    extra = sorted(set(given) - accepted)
    if extra:
        raise UserInputError(f"problem {name!r} does not take option(s) {', '.join(extra)}; it takes: {', '.join(sorted(accepted))}")
    return factory(**given)
