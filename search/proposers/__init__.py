"""Proposers: the Optuna baselines here, the co-evolution engine and others as plug-ins.

* The baselines (Optuna samplers) are :data:`BASELINES`; a new one is one factory and one line.
* Proposers that live above search/ (the co-evolution engine drives reasoners in agent/) or in
  other packages register under the ``coevo.proposers`` entry-point group; coevo's own
  ``pelnas`` variants are declared so in pyproject.toml, so search/ never imports agent/.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from coevo.search.errors import UserInputError, unknown_name
from coevo.search.plugins import entry_points, load_entry_point
from coevo.search.proposers._base import Evaluation, Proposal, Proposer, RoundContext
from coevo.search.proposers._design import ROUND_SIZE, round_quota, start_quota
from coevo.search.proposers._mobo import MOBOProposer
from coevo.search.proposers._optuna import SamplerProposer, nsga2_proposer, random_proposer, tpe_proposer
from coevo.search.proposers._qnehvi import QNEHVIProposer
from coevo.search.proposers._screened import ScreenedEAProposer

BASELINES: dict[str, Callable[..., Proposer]] = {
    "random": random_proposer,
    "nsga2": nsga2_proposer,
    "tpe": tpe_proposer,
    "mobo": MOBOProposer,
    "qnehvi": QNEHVIProposer,
    "nsga2-screened": functools.partial(ScreenedEAProposer, "nsga2"),
    "smsemoa-screened": functools.partial(ScreenedEAProposer, "smsemoa"),
}
"""Proposer name -> factory, for the proposers defined in search/ itself (a class is its own factory: its keyword
arguments are the proposer's options, declared once with their defaults)."""

ENTRY_POINT_GROUP = "coevo.proposers"


def proposer_names() -> list[str]:
    """Every proposer name: the baselines, then the installed plug-ins (coevo's co-evolution engine among them)."""
    return [*BASELINES, *(n for n in entry_points(ENTRY_POINT_GROUP) if n not in BASELINES)]


def proposer_factory(name: str) -> Callable[..., Proposer]:
    """The factory of proposer ``name``.

    Raises:
        UserInputError: unknown name (the message lists the known ones, and says how to get
            the co-evolution engine when coevo is not installed).
    """
    if name in BASELINES:
        return BASELINES[name]
    installed = entry_points(ENTRY_POINT_GROUP)
    if name in installed:
        factory: Callable[..., Proposer] = load_entry_point(installed[name], what="proposer")
        return factory
    exc = unknown_name("proposer", name, proposer_names())
    if name.startswith("pelnas") and not installed:
        exc = UserInputError(f"{exc}; the co-evolution engine registers when coevo is installed (pip install -e .)")
    raise exc


def takes_reasoner(name: str) -> bool:
    """Whether proposer ``name`` is driven by a reasoner (its factory takes ``reasoner=``): the co-evolution engine."""
    return "reasoner" in inspect.signature(proposer_factory(name)).parameters


def get_proposer(proposer: str | Proposer, options: Mapping[str, Any] | None = None) -> Proposer:
    """Return ``proposer`` itself, or build the registered proposer of that name with ``options``."""
    if isinstance(proposer, Proposer):
        return proposer
    factory = proposer_factory(proposer)
    given = {k: v for k, v in (options or {}).items() if v is not None}
    params = inspect.signature(factory).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        named = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        unknown = sorted(set(given) - set(named))
        if unknown:
            takes = f"its options: {', '.join(named)}" if named else "it takes no options"
            raise UserInputError(f"proposer {proposer!r} has no option {', '.join(unknown)} ({takes})")
    return factory(**given)


__all__ = [
    "BASELINES",
    "ROUND_SIZE",
    "Evaluation",
    "MOBOProposer",
    "Proposal",
    "Proposer",
    "QNEHVIProposer",
    "RoundContext",
    "SamplerProposer",
    "ScreenedEAProposer",
    "get_proposer",
    "proposer_factory",
    "proposer_names",
    "round_quota",
    "start_quota",
    "takes_reasoner",
]
