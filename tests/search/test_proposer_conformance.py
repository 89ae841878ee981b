"""The conformance suite every proposer runs, on NB201 and on a problem of another family.

Each registered proposer (Optuna baselines, the co-evolution engine and its ablations, any
installed plug-in) must spend exactly its budget, pay for each point once, leave nothing
WAITING or RUNNING, record its options with the study, and resume to a larger budget.
"""

from __future__ import annotations

from collections import Counter

import optuna
import pytest

from coevo.search.problem import Problem
from coevo.search.problems import make_problem, problem_class
from coevo.search.proposers import get_proposer, proposer_names
from coevo.search.runner import run_search

PROBLEMS = ["nb201", "pipeline"]
_BUILT: dict[str, Problem] = {}


def _problem(name: str) -> Problem:
    if name not in _BUILT:  # pipeline enumerates its space for the exact front: build it once
        _BUILT[name] = make_problem(name, dict(problem_class(name).example_options))
    return _BUILT[name]


@pytest.mark.parametrize("problem_name", PROBLEMS)
@pytest.mark.parametrize("proposer", proposer_names())
def test_a_proposer_spends_exactly_its_budget_and_resumes(proposer: str, problem_name: str, storage: str) -> None:
    problem = _problem(problem_name)
    first = run_search(problem, proposer, budget=14, seed=2, storage=storage, study_name="c")
    study = optuna.load_study(study_name="c", storage=storage)
    trials = study.get_trials(deepcopy=False)
    paid = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("query", True)]
    assert first.evaluations == len(paid) == 14 and len({t.user_attrs["point_id"] for t in paid}) == 14
    states = Counter(t.state.name for t in trials)
    assert "WAITING" not in states and "RUNNING" not in states
    assert first.trials == len(trials) >= 14
    assert first.front and all({problem.design_label, *(o.name for o in problem.objectives)} <= set(row) for row in first.front)
    assert study.user_attrs["coevo.proposer_options"] == get_proposer(proposer).options()  # what a joining worker rebuilds
    second = run_search(problem, proposer, budget=20, seed=2, storage=storage, study_name="c")
    paid = [t for t in optuna.load_study(study_name="c", storage=storage).get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    paid = [t for t in paid if t.user_attrs.get("query", True)]
    assert second.evaluations == len(paid) == 20 and len({t.user_attrs["point_id"] for t in paid}) == 20
    if problem.reference() is not None:
        assert second.hv_ratio is not None and 0 < second.hv_ratio <= 1 and len(second.hv_history) == 20
