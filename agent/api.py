"""The Python API behind ``import coevo``: searches as the CLI runs them, for problems built in code.

Example:
    >>> import coevo
    >>> result = coevo.optimize("nb201", options={"device": "raspi4"}, proposer="random", budget=5,
    ...                       storage="sqlite:///runs/example.sqlite3")  # doctest: +SKIP
    >>> 0 < result.hv_ratio <= 1  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from coevo.agent.reasoners import Reasoner, reasoner_config
from coevo.agent.run_config import make_proposer
from coevo.search.config import DEFAULT_PROPOSER, SearchConfig, default
from coevo.search.problem import Problem
from coevo.search.proposers import Proposer
from coevo.search.runner import Progress, SearchResult


def optimize(
    problem: Problem | str,
    *,
    options: Mapping[str, Any] | None = None,
    proposer: str | Proposer = DEFAULT_PROPOSER,
    budget: int = default("budget"),
    seed: int = default("seed"),
    storage: str | None = None,
    study: str | None = None,
    reasoner: str | Reasoner | Mapping[str, Any] | None = None,
    proposer_options: Mapping[str, Any] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    eval_timeout_s: float | None = None,
) -> SearchResult:
    """Run (or resume) a search, as ``coevo search`` does.

    The keywords become one :class:`~coevo.search.config.SearchConfig`, validated before
    anything is built (the same configuration the CLI's flags and the search tools build).

    Args:
        problem: a problem instance (your :class:`coevo.Problem` subclass, built with its
            options), or a registered name / ``module:Class`` / ``path/to/file.py:Class``.
        options: the problem's options when ``problem`` is a name or reference.
        proposer: a proposer name (``pelnas``, the default, ``tpe``, ...) or instance.
        budget: evaluations to make: paid ones of the expensive objectives (in zero-cost mode, evaluations on their
            estimate: none paid).
        seed: the seed.
        storage: Optuna storage URL (default ``sqlite:///runs/coevo.sqlite3``); ``coevo worker``
            processes may join the search through it.
        study: study name (default: built from the problem, proposer and seed).
        reasoner: for proposers driven by a reasoner (the co-evolution engine): ``"offline"``
            (default), ``"llm"`` (the endpoint from ``COEVO_LLM_BASE_URL`` / ``COEVO_LLM_MODEL``),
            ``"auto"``, a :class:`~agent.reasoners.Reasoner`, or its settings as a mapping
            (:class:`~coevo.search.config.ReasonerConfig`'s fields).
        proposer_options: further options of the proposer (``round_size``, ``kb_tokens``, ...).
        on_progress: called after every paid evaluation.
        eval_timeout_s: seconds one evaluation may take before its trial fails as timed out
            (default: the problem's ``eval_timeout_s``). A failed evaluation (timed out, raised,
            a NaN or a missing objective) is paid for, counted in the result's ``failed``, and
            the search goes on.

    Returns:
        the search's summary: HV ratio, IGD and front recall where the problem's exact front
        is known, the found front, evaluations, wall time.

    Raises:
        UserInputError: a bad problem, option, proposer, budget, seed or reasoner setting (the
            message names the keyword and says what to change).
    """
    built = reasoner if isinstance(reasoner, Reasoner) else None
    settings = None
    if isinstance(reasoner, str):
        settings = reasoner_config({"kind": reasoner})
    elif isinstance(reasoner, Mapping):
        settings = reasoner_config(reasoner)
    extra = dict(proposer_options or {}) | ({"reasoner": built} if built is not None else {})
    config = SearchConfig.create(
        problem=problem,
        options=dict(options or {}),
        proposer=proposer,
        budget=budget,
        seed=seed,
        storage=storage,
        study=study,
        reasoner=settings,
        proposer_options=extra,
        eval_timeout_s=eval_timeout_s,
    )
    return config.run(proposer=make_proposer(config), on_progress=on_progress)
