"""Proposers: the baselines (Optuna samplers) and, later, the co-evolution engine.

A new proposer is one module plus one line in :data:`PROPOSERS`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from search.errors import UserInputError, unknown_name
from search.proposers._base import Evaluation, Proposal, Proposer, RoundContext
from search.proposers._optuna import SamplerProposer, nsga2_proposer, random_proposer, tpe_proposer


def _pelnas(variant: str) -> Callable[..., Proposer]:
    # the co-evolution engine lives in agent/ (it drives reasoners); import it on use so
    # search/ does not depend on agent/ at import time
    def factory(**options: Any) -> Proposer:
        module = importlib.import_module("agent.coevolution")
        proposer: Proposer = module.make_pelnas(variant, **options)
        return proposer

    factory.__doc__ = f"The co-evolution engine ({variant})."
    return factory


PROPOSERS: dict[str, Callable[..., Proposer]] = {
    "random": random_proposer,
    "nsga2": nsga2_proposer,
    "tpe": tpe_proposer,
    "pelnas": _pelnas("pelnas"),
    "pelnas-noniche": _pelnas("pelnas-noniche"),
    "pelnas-nokb": _pelnas("pelnas-nokb"),
}
"""Proposer name -> factory (keyword options, e.g. ``reasoner=``)."""


def get_proposer(proposer: str | Proposer, options: Mapping[str, Any] | None = None) -> Proposer:
    """Return ``proposer`` itself, or build the registered proposer of that name with ``options``."""
    if isinstance(proposer, Proposer):
        return proposer
    try:
        factory = PROPOSERS[proposer]
    except KeyError:
        raise unknown_name("proposer", proposer, PROPOSERS) from None
    given = {k: v for k, v in (options or {}).items() if v is not None}
    if given and not any(p.kind == p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values()):
        raise UserInputError(f"proposer {proposer!r} takes no options (got {', '.join(sorted(given))})")
    return factory(**given)


__all__ = ["PROPOSERS", "Evaluation", "Proposal", "Proposer", "RoundContext", "SamplerProposer", "get_proposer"]
