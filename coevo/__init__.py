"""coevo's public Python API: define a problem in code, search it as the CLI does, read the results.

    import coevo

    class MySpace(coevo.Problem):     # the contract and a worked example: docs/problems.md
        ...

    result = coevo.optimize(MySpace(), proposer="pelnas", budget=100, storage="sqlite:///runs/x.sqlite3")
    print(result.front)

Everything here is re-exported from the packages that implement it (``search``, ``agent``);
the command line (``coevo search --problem path/to/my_space.py:MySpace``) runs the same code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coevo.agent.api import optimize
    from coevo.agent.reasoners import OfflineReasoner, Reasoner, make_reasoner
    from coevo.search.errors import CoevoError, StorageError, UserInputError
    from coevo.search.niches import Niche, single_niche
    from coevo.search.problem import (
        Evolvable,
        LevelProblem,
        Levels,
        Objective,
        Problem,
        ProblemContext,
        ProblemOptions,
        level_format,
        read_key_values,
    )
    from coevo.search.problems import make_problem, problem_class, problem_names
    from coevo.search.proposers import Evaluation, Proposal, Proposer, RoundContext, get_proposer, proposer_names
    from coevo.search.runner import Progress, SearchResult, run_search
    from coevo.search.study import load_search

_EXPORTS: dict[str, str] = {
    "CoevoError": "coevo.search.errors",
    "Evaluation": "coevo.search.proposers",
    "Evolvable": "coevo.search.problem",
    "LevelProblem": "coevo.search.problem",
    "Levels": "coevo.search.problem",
    "Niche": "coevo.search.niches",
    "Objective": "coevo.search.problem",
    "OfflineReasoner": "coevo.agent.reasoners",
    "Problem": "coevo.search.problem",
    "ProblemContext": "coevo.search.problem",
    "ProblemOptions": "coevo.search.problem",
    "Progress": "coevo.search.runner",
    "Proposal": "coevo.search.proposers",
    "Proposer": "coevo.search.proposers",
    "Reasoner": "coevo.agent.reasoners",
    "RoundContext": "coevo.search.proposers",
    "SearchResult": "coevo.search.runner",
    "StorageError": "coevo.search.errors",
    "UserInputError": "coevo.search.errors",
    "get_proposer": "coevo.search.proposers",
    "level_format": "coevo.search.problem",
    "load_search": "coevo.search.study",
    "make_problem": "coevo.search.problems",
    "make_reasoner": "coevo.agent.reasoners",
    "optimize": "coevo.agent.api",
    "problem_class": "coevo.search.problems",
    "problem_names": "coevo.search.problems",
    "proposer_names": "coevo.search.proposers",
    "read_key_values": "coevo.search.problem",
    "run_search": "coevo.search.runner",
    "single_niche": "coevo.search.niches",
}
"""Where each public name lives: imported on first use, so ``import coevo.agent.cli`` (every command's
start-up) does not load the search engine, the reasoners and their dependencies."""


_SUBPACKAGES = frozenset({"agent", "figures", "knowledge", "prompts", "search", "sim", "testing", "tools"})


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its package on first use (PEP 562)."""
    if name in _SUBPACKAGES:  # ``import coevo; coevo.search...`` worked when this module imported them all
        return importlib.import_module(f"coevo.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'coevo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "CoevoError",
    "Evaluation",
    "Evolvable",
    "LevelProblem",
    "Levels",
    "Niche",
    "Objective",
    "OfflineReasoner",
    "Problem",
    "ProblemContext",
    "ProblemOptions",
    "Progress",
    "Proposal",
    "Proposer",
    "Reasoner",
    "RoundContext",
    "SearchResult",
    "StorageError",
    "UserInputError",
    "get_proposer",
    "level_format",
    "load_search",
    "make_problem",
    "make_reasoner",
    "optimize",
    "problem_class",
    "problem_names",
    "proposer_names",
    "read_key_values",
    "run_search",
    "single_niche",
]
