"""The Proposer contract: who chooses the next design points of a search.

The proposer proposes, the study records: a proposer never forks an Optuna sampler to
inject candidates. It either returns explicit :class:`Proposal` objects, which the runner
validates and enqueues with ``study.enqueue_trial`` (rationale and cited heuristic ids go in
``user_attrs``), or returns none and lets its Optuna sampler pick through ``study.ask``.

Call order, once per round, in one process:

1. :meth:`Proposer.propose` with the current :class:`RoundContext` (must not mutate it);
2. the runner validates, evaluates and tells each proposal (or sampler trial);
3. :meth:`Proposer.observe` with the round's :class:`Evaluation` records and the
   proposals that were rejected, with the reason.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import optuna

from coevo.search.problem import Point, Problem


@dataclass(frozen=True)
class Proposal:
    """A candidate design point with the reasoning behind it.

    Attributes:
        point: the design point (the problem's point type).
        rationale: why it was proposed (stored in the trial's user_attrs).
        heuristics: ids of the knowledge-base heuristics the proposal cites.
        attrs: extra JSON-serialisable attributes stored on the trial.
        error: set when the reasoner's output could not be read as a point (then ``point``
            holds the raw text); such a proposal is rejected with this reason.
    """

    point: Point
    rationale: str = ""
    heuristics: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Evaluation:
    """One evaluated point as the study recorded it."""

    trial_number: int
    point: Point
    point_id: str
    values: dict[str, float]
    query: bool
    """True when this evaluation paid for the expensive objectives (counts against budget)."""
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundContext:
    """What a proposer may look at when proposing (read-only).

    Attributes:
        problem: the problem being searched.
        study: the Optuna study (for its trials; do not tell or enqueue from a proposer).
        round: round number, from 0, restored from storage on resume.
        evaluations: every evaluation so far, in order.
        seen: point ids already evaluated.
        remaining: expensive evaluations left in the budget.
        seed: the run's seed.
        storage: the study's storage URL (None: the default), for stores kept beside it.
    """

    problem: Problem
    study: optuna.Study
    round: int
    evaluations: tuple[Evaluation, ...]
    seen: frozenset[str]
    remaining: int
    seed: int
    storage: str | None = None


class Proposer(ABC):
    """Base class of every proposer (Optuna baselines, the co-evolution engine, ...)."""

    name: str = ""
    """Registry name, e.g. ``tpe``."""
    sees_cheap_objectives: bool = False
    """True when the proposer reads the cheap objectives of candidates before paying for them
    (``coevo bench`` marks such proposers: their comparison is only fair among themselves)."""
    variant: str = ""
    """Suffix of default study names for options that change the run (e.g. ``-kbfrom-X``)."""

    @abstractmethod
    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        """The Optuna sampler for trials the proposer leaves to the study (and for resume)."""

    @property
    def explicit(self) -> bool:
        """True when :meth:`propose` returns proposals in rounds (workers then elect a round leader);
        False when every trial is the sampler's choice. By default: whether ``propose`` is overridden."""
        return type(self).propose is not Proposer.propose

    def options(self) -> dict[str, Any]:
        """JSON-serialisable options that rebuild this proposer with ``get_proposer(name, options)``.

        Stored with the study, so a worker that joins from anywhere proposes as the search
        that created it did. Never include secrets (API keys): they stay in the environment.
        """
        return {}

    def check_storage(self, storage: str | None) -> None:  # noqa: B027 (a hook: most proposers keep nothing beside the study)
        """Refuse, before the study is opened or written, a storage whose companions this proposer cannot use.

        The co-evolution engine keeps its knowledge base in a store beside the study's: a corrupt
        one must stop the search before it changes the study (its budget, a worker row), not after.
        Default: nothing to check.

        Raises:
            StorageError: a companion store that exists and cannot be used.
        """

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        """Explicit proposals for this round; the default (none) lets the sampler pick one."""
        return []

    def observe(self, ctx: RoundContext, results: list[Evaluation], rejected: list[tuple[Proposal, str]]) -> None:  # noqa: B027
        """Learn from a finished round (default: nothing; samplers learn from the study)."""
