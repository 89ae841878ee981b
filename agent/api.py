"""The Python API behind ``import coevo``: searches as the CLI runs them, for problems built in code.

Example:
    >>> import coevo
    >>> result = coevo.search("nb201", options={"device": "raspi4"}, proposer="random", budget=5,
    ...                       storage="sqlite:///runs/example.sqlite3")  # doctest: +SKIP
    >>> 0 < result.hv_ratio <= 1  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from coevo.agent.reasoners import Reasoner, make_reasoner
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.problems import make_problem
from coevo.search.proposers import Proposer, get_proposer, takes_reasoner
from coevo.search.runner import Progress, SearchResult, check_seed, run_search


def search(
    problem: Problem | str,
    *,
    options: Mapping[str, Any] | None = None,
    proposer: str | Proposer = "pelnas",
    budget: int = 100,
    seed: int = 0,
    storage: str | None = None,
    study: str | None = None,
    reasoner: str | Reasoner | Mapping[str, Any] | None = None,
    proposer_options: Mapping[str, Any] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> SearchResult:
    """Run (or resume) a search, as ``coevo search`` does.

    Args:
        problem: a problem instance (your :class:`coevo.Problem` subclass, built with its
            options), or a registered name / ``module:Class`` / ``path/to/file.py:Class``.
        options: the problem's options when ``problem`` is a name or reference.
        proposer: a proposer name (``pelnas``, ``tpe``, ...) or instance.
        budget: expensive evaluations to pay for.
        seed: the seed.
        storage: Optuna storage URL (default ``sqlite:///runs/coevo.sqlite3``); ``coevo worker``
            processes may join the search through it.
        study: study name (default: built from the problem, proposer and seed).
        reasoner: for proposers driven by a reasoner (the co-evolution engine): ``"offline"``
            (default), ``"llm"`` (the endpoint from ``COEVO_LLM_BASE_URL`` / ``COEVO_LLM_MODEL``),
            a :class:`~agent.reasoners.Reasoner`, or its settings as a mapping.
        proposer_options: further options of the proposer (``round_size``, ``kb_tokens``, ...).
        on_progress: called after every paid evaluation.

    Returns:
        the search's summary: HV ratio, IGD and front recall where the problem's exact front
        is known, the found front, evaluations, wall time.

    Raises:
        UserInputError: a bad problem, option, proposer, budget or seed (the message says what to change).
    """
    if budget <= 0:
        raise UserInputError(f"budget must be a positive number of evaluations, got {budget}")
    check_seed(seed)
    if isinstance(problem, Problem):
        if options:
            raise UserInputError("options go to the problem's constructor when you pass a problem instance")
        built = problem
    else:
        built = make_problem(problem, options or {}, storage=storage)
    chosen: Proposer
    if isinstance(proposer, Proposer):
        chosen = proposer
    else:
        settings: dict[str, Any] = dict(proposer_options or {})
        if takes_reasoner(proposer):
            settings["reasoner"] = make_reasoner(reasoner, storage=storage) if isinstance(reasoner, str) else reasoner
        elif reasoner is not None:
            raise UserInputError(f"proposer {proposer!r} takes no reasoner")
        chosen = get_proposer(proposer, settings)
    return run_search(built, chosen, budget=budget, seed=seed, storage=storage, study_name=study, on_progress=on_progress)
