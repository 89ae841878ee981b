"""Optuna samplers as proposers: the baselines every coevo search is compared with."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import optuna

from coevo.search.problem import Problem
from coevo.search.proposers._base import Proposer


class SamplerProposer(Proposer):
    """A proposer that leaves every choice to one Optuna sampler.

    Args:
        name: registry name.
        factory: builds the sampler from the run's seed.

    Example:
        >>> p = SamplerProposer("random", lambda seed: optuna.samplers.RandomSampler(seed=seed))
        >>> type(p.sampler(None, 0)).__name__  # doctest: +SKIP
        'RandomSampler'
    """

    def __init__(self, name: str, factory: Callable[[int], optuna.samplers.BaseSampler]) -> None:
        self.name = name
        self._factory = factory

    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        with warnings.catch_warnings():
            # multivariate TPE is flagged experimental; it is the variant we mean to use
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return self._factory(seed)


def random_proposer() -> SamplerProposer:
    """Uniform random sampling (``optuna.samplers.RandomSampler``)."""
    return SamplerProposer("random", lambda seed: optuna.samplers.RandomSampler(seed=seed))


def nsga2_proposer() -> SamplerProposer:
    """NSGA-II with Optuna's defaults (population 50)."""
    return SamplerProposer("nsga2", lambda seed: optuna.samplers.NSGAIISampler(seed=seed))


def tpe_proposer() -> SamplerProposer:
    """Multivariate multi-objective TPE."""
    return SamplerProposer("tpe", lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True))
