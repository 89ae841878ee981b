"""Every registered proposer passes the shipped conformance suite (coevo.testing.proposers), on NB201 and on a problem of another family.

Each registered proposer (Optuna baselines, the co-evolution engine and its ablations, any
installed plug-in, read from the registry) must spend exactly its budget, pay for each point
once, leave nothing WAITING or RUNNING, record its options with the study, and resume to a
larger budget.
"""

from __future__ import annotations

import pytest

from coevo.search.problem import Problem
from coevo.search.problems import make_problem, problem_class
from coevo.search.proposers import proposer_names
from coevo.testing import Check
from coevo.testing import proposers as proposer_suite

PROBLEMS = ["nb201", "pipeline"]
"""Two families to search: NB201 (an exact front) and the pipeline planner (another kind of design)."""
_BUILT: dict[str, Problem] = {}


def _problem(name: str) -> Problem:
    if name not in _BUILT:  # pipeline enumerates its space for the exact front: build it once
        _BUILT[name] = make_problem(name, dict(problem_class(name).example_options))
    return _BUILT[name]


SLOW = {("qnehvi", "nb201", "budget_and_resume"): 34, ("qnehvi", "pipeline", "budget_and_resume"): 33}
"""(proposer, problem, check) cases that fit Gaussian processes for a while (seconds on a 2-core machine: nb201's idle,
pipeline's beside other jobs): out of the fast loop (``make test-fast`` must stay under 8 minutes), still in CI."""
CASES = [
    pytest.param(
        proposer,
        problem,
        check,
        id=f"{proposer}-{problem}-{check}",
        marks=[pytest.mark.slow] if (proposer, problem, str(check)) in SLOW else [],
    )
    for proposer in proposer_names()
    for problem in PROBLEMS
    for check in proposer_suite.CHECKS
]


@pytest.mark.parametrize(("proposer", "problem_name", "check"), CASES)
def test_proposer_conforms(proposer: str, problem_name: str, check: Check[proposer_suite.ProposerUnderTest], storage: str) -> None:
    check(proposer_suite.ProposerUnderTest(proposer, _problem(problem_name), storage=storage))
