"""Proposers: the baselines (Optuna samplers) and, later, the co-evolution engine.

A new proposer is one module plus one line in :data:`PROPOSERS`.
"""

from __future__ import annotations

from collections.abc import Callable

from search.errors import unknown_name
from search.proposers._base import Evaluation, Proposal, Proposer, RoundContext
from search.proposers._optuna import SamplerProposer, nsga2_proposer, random_proposer, tpe_proposer

PROPOSERS: dict[str, Callable[[], Proposer]] = {
    "random": random_proposer,
    "nsga2": nsga2_proposer,
    "tpe": tpe_proposer,
}
"""Proposer name -> factory."""


def get_proposer(proposer: str | Proposer) -> Proposer:
    """Return ``proposer`` itself, or build the registered proposer of that name."""
    if isinstance(proposer, Proposer):
        return proposer
    try:
        return PROPOSERS[proposer]()
    except KeyError:
        raise unknown_name("proposer", proposer, PROPOSERS) from None


__all__ = ["PROPOSERS", "Evaluation", "Proposal", "Proposer", "RoundContext", "SamplerProposer", "get_proposer"]
