"""The Reasoner contract: update the knowledge base from evidence, then propose.

The co-evolution proposer (:mod:`agent.coevolution`) calls, once per round:

1. :meth:`Reasoner.update_knowledge` with the evaluations of the rounds not yet learned
   from (on resume, possibly several) and the knowledge base to edit in place;
2. :meth:`Reasoner.propose` once per niche with a :class:`ProposeRequest`, again with
   ``feedback`` when some candidates were invalid (bounded retries).

Reasoners never evaluate expensive objectives and never touch the study: the proposer
validates, the runner evaluates and tells. Every reasoner carries a human label; the
offline one is always labelled as offline (no LLM).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from coevo.knowledge import Heuristic, KnowledgeBase
from coevo.search.niches import Niche
from coevo.search.problem import Problem
from coevo.search.proposers import Evaluation, Proposal
from coevo.search.surrogate import SurrogateModel


@dataclass
class Usage:
    """LLM use so far (all zero for the offline reasoner)."""

    calls: int = 0
    cached_calls: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return dict(vars(self))


KB_TOKENS = 600
"""Token budget of the heuristics a propose request carries (the engine's ``kb_tokens``, flag ``--kb-tokens``)."""
UPDATE_TOKENS_FACTOR = 3
"""An update request shows the existing heuristics with this many times a propose request's budget: it revises
them, so it sees more of them than a request that only follows them."""


@dataclass(frozen=True)
class KnowledgeContext:
    """What an update may look at besides the new evidence."""

    problem: Problem
    niches: tuple[Niche, ...]
    round: int
    evaluations: tuple[Evaluation, ...]
    """Every paid evaluation so far (the new evidence included)."""
    token_budget: int = KB_TOKENS * UPDATE_TOKENS_FACTOR
    """Budget for the existing heuristics shown to an LLM (see :mod:`knowledge.retrieval`)."""
    study: str = ""
    """The study's name (an LLM reasoner's replies are cached per study)."""
    storage: str | None = None
    """The study's storage URL (where an LLM reasoner's reply cache lives)."""


@dataclass(frozen=True, kw_only=True)
class ProposeRequest:
    """One niche's share of a round (built with keywords: thirteen fields are too many to pass by position).

    Attributes:
        problem: the problem (an :class:`search.problem.Evolvable` for the offline reasoner).
        niche: the niche to propose in.
        quota: how many candidates are wanted.
        elites: the niche's best paid evaluations (its non-dominated set, then top accuracy).
        heuristics: relevant active heuristics (empty for the ``nokb`` ablation).
        evaluations: every paid evaluation so far.
        seen: ids of evaluated or already chosen points (never propose these).
        round: round number.
        rng: the round's random generator (seeded from the run seed and round).
        model: samples of the first objective for candidates (a surrogate), or None.
        feedback: why earlier candidates of this request were rejected.
        study: the study's name (an LLM reasoner's replies are cached per study).
        storage: the study's storage URL (where an LLM reasoner's reply cache lives).
    """

    problem: Problem
    niche: Niche
    quota: int
    elites: tuple[Evaluation, ...]
    heuristics: tuple[Heuristic, ...]
    evaluations: tuple[Evaluation, ...]
    seen: frozenset[str]
    round: int
    rng: random.Random
    model: SurrogateModel | None = None
    feedback: tuple[str, ...] = field(default_factory=tuple)
    study: str = ""
    storage: str | None = None


class Reasoner(ABC):
    """Base class of the reasoners (offline statistics, LLM)."""

    label: str = ""
    """Shown everywhere the reasoner's work appears, e.g. ``offline (no LLM)``."""

    ranks_candidates: bool = False
    """Whether :meth:`propose` already ranks by the request's model (the offline reasoner); when
    False the engine screens what comes back (:class:`agent.coevolution.CoevolutionProposer`)."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.trace: dict[str, Any] = {}

    def take_trace(self) -> dict[str, Any]:
        """What the reasoner did this round besides its answers (tool calls, fallbacks, models used), then forget it."""
        trace, self.trace = self.trace, {}
        return trace

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """JSON-serialisable settings that rebuild this reasoner (:func:`agent.reasoners.reasoner_from_config`); no secrets."""

    @abstractmethod
    def update_knowledge(self, kb: KnowledgeBase, evidence: Sequence[Evaluation], ctx: KnowledgeContext) -> list[str]:
        """Edit ``kb`` in place from ``evidence``; return one line per change (for the round log)."""

    @abstractmethod
    def propose(self, request: ProposeRequest) -> list[Proposal]:
        """Up to ``request.quota`` candidates inside ``request.niche``, not in ``request.seen``."""
