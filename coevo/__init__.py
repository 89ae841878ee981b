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
