"""The conformance suite of a proposer: what every registered proposer passes, and a plug-in's proposer can too.

A proposer is given as a registered name or as a factory (a callable that returns a new
:class:`coevo.Proposer`; its class is one), and checked on a problem instance of any family.
With pytest::

    import pytest
    from coevo.testing import proposers as proposer_suite

    @pytest.mark.parametrize("check", proposer_suite.CHECKS, ids=str)
    def test_my_proposer(check, tmp_path):
        check(proposer_suite.ProposerUnderTest(MyProposer, make_problem("nb201"), storage=f"sqlite:///{tmp_path}/s.sqlite3"))

Without a test runner, ``proposer_suite.check_proposer_conforms(MyProposer, problem)`` runs
every check (in a temporary SQLite storage) and raises :class:`coevo.testing.ConformanceError`
naming the first that fails.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import optuna

from coevo.search.problem import Problem
from coevo.search.proposers import Proposer, get_proposer
from coevo.search.runner import SearchResult, run_search
from coevo.testing._suite import Check, expect, run_checks


@dataclass(frozen=True)
class ProposerUnderTest:
    """A proposer, the problem it is checked on, and where its studies go.

    Attributes:
        proposer: a registered name, or a factory of new instances (called once per search).
        problem: the problem searched.
        storage: an Optuna storage URL for the checks' studies; None: a temporary SQLite file per check.
    """

    proposer: str | Callable[[], Proposer]
    problem: Problem
    storage: str | None = None

    def new(self) -> Proposer:
        """A new instance of the proposer."""
        return get_proposer(self.proposer) if isinstance(self.proposer, str) else self.proposer()

    @property
    def label(self) -> str:
        """How failure messages name the proposer and the problem."""
        name = self.proposer if isinstance(self.proposer, str) else getattr(self.proposer, "name", "") or repr(self.proposer)
        return f"{name} on {self.problem.name}"

    @contextmanager
    def storage_url(self) -> Iterator[str]:
        """The storage to use: the one given, or a temporary SQLite file removed afterwards."""
        if self.storage is not None:
            yield self.storage
            return
        with tempfile.TemporaryDirectory(prefix="coevo-conformance-") as folder:
            yield f"sqlite:///{Path(folder) / 'study.sqlite3'}"


def _paid(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that paid for the expensive objectives."""
    trials = study.get_trials(deepcopy=False)
    return [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("query", True)]


def _spent_exactly(subject: ProposerUnderTest, result: SearchResult, study: optuna.Study, budget: int) -> None:
    paid = _paid(study)
    ids = {t.user_attrs["point_id"] for t in paid}
    expect(
        result.evaluations == len(paid) == budget and len(ids) == budget,
        f"{subject.label}: budget {budget}, but {result.evaluations} evaluations reported, {len(paid)} paid, {len(ids)} distinct points",
    )


def check_budget_and_resume(subject: ProposerUnderTest) -> None:
    """A search spends exactly its budget, once per point, leaves no trial waiting or running, records its options, and resumes."""
    problem = subject.problem
    with subject.storage_url() as storage:
        first = run_search(problem, subject.new(), budget=14, seed=2, storage=storage, study_name="c")
        study = optuna.load_study(study_name="c", storage=storage)
        _spent_exactly(subject, first, study, 14)
        trials = study.get_trials(deepcopy=False)
        states = Counter(t.state.name for t in trials)
        expect("WAITING" not in states and "RUNNING" not in states, f"{subject.label}: trials left behind: {dict(states)}")
        expect(first.trials == len(trials) >= 14, f"{subject.label}: {first.trials} trials reported, the study holds {len(trials)}")
        columns = {problem.design_label, *(o.name for o in problem.objectives)}
        expect(first.front and all(columns <= set(row) for row in first.front), f"{subject.label}: front rows lack {sorted(columns)}")
        options = study.user_attrs["coevo.proposer_options"]
        expect(options == subject.new().options(), f"{subject.label}: the study records options {options}, not {subject.new().options()}")
        second = run_search(problem, subject.new(), budget=20, seed=2, storage=storage, study_name="c")
        _spent_exactly(subject, second, optuna.load_study(study_name="c", storage=storage), 20)
        if problem.reference() is not None:
            hv = second.hv_ratio
            expect(hv is not None and 0 < hv <= 1, f"{subject.label}: HV ratio {hv} is not in (0, 1]")
            expect(len(second.hv_history) == 20, f"{subject.label}: HV history has {len(second.hv_history)} entries, not 20")


CHECKS: tuple[Check[ProposerUnderTest], ...] = (Check("budget_and_resume", check_budget_and_resume),)
"""Every check a proposer passes."""


def check_proposer_conforms(proposer: str | Callable[[], Proposer], problem: Problem, *, storage: str | None = None) -> None:
    """Run every check of :data:`CHECKS` on ``proposer`` searching ``problem``.

    Raises:
        ConformanceError: the first check that fails, named.
    """
    subject = ProposerUnderTest(proposer, problem, storage)
    run_checks(CHECKS, subject, label=f"proposer {subject.label}")
