"""``mobo``: multi-objective Bayesian optimisation with the cheap objective known, the fair model-based baseline.

It gets exactly the free information the co-evolution engine gets and the same model, and
none of its structure (no niches, no knowledge base, no guided variation):

* initial design: ``round_size`` points stratified by the cheap objective (a random sample of
  candidates sorted by it and cut into equal bins, one point drawn per bin), as the engine's
  per-niche initialisation also spreads over latency;
* then, every round: the extra-trees surrogate of the first objective the engine uses
  (:class:`search.surrogate.TreeSurrogate` on :meth:`Evolvable.features`), with the
  acquisition (greedy expected HV improvement, the second objective known exactly:
  :func:`search.acquisition.greedy_ehvi`) maximised over ``candidates`` designs: every
  neighbour of the current front, crossovers of front pairs, and uniform random designs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna

from coevo.search.acquisition import greedy_ehvi
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.proposers._base import Proposal, Proposer, RoundContext
from coevo.search.proposers._design import front_candidates, require_evolvable, round_start
from coevo.search.surrogate import TreeSurrogate


class MOBOProposer(Proposer):
    """Extra-trees expected-HV Bayesian optimisation that sees the cheap objective of every candidate.

    Args:
        round_size: proposals per round (the engine's default, 20).
        candidates: designs the acquisition is maximised over each round.
    """

    name = "mobo"
    sees_cheap_objectives = True

    def __init__(self, *, round_size: int = 20, candidates: int = 2000) -> None:
        if round_size < 1 or candidates < round_size:
            raise UserInputError(f"mobo needs round_size >= 1 and candidates >= round_size, got {round_size} and {candidates}")
        self.round_size = round_size
        self.candidates = candidates

    def options(self) -> dict[str, Any]:
        return {"round_size": self.round_size, "candidates": self.candidates}

    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)  # only for a trial with no proposal left

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        problem = ctx.problem
        evolvable = require_evolvable(problem, "mobo")
        rng, quota, paid, early = round_start(ctx, self.round_size, self.candidates)
        if early is not None:
            return early
        first = problem.front_objectives[0]
        points = front_candidates(problem, paid, ctx.seen, rng, self.candidates)
        y1 = np.array([e.values[first] for e in paid])
        features = evolvable.features([e.point for e in paid])
        model = TreeSurrogate(features, y1, bounds=problem.objectives[0].bounds, seed=rng.randrange(2**31))
        return [
            Proposal(points[i], rationale=f"expected HV gain {gain:.3g} (predicted {first} {mean:.4g})")
            for i, (mean, gain) in greedy_ehvi(problem, model, paid, points, quota)
        ]


def mobo_proposer(*, round_size: int = 20, candidates: int = 2000) -> MOBOProposer:
    """The ``mobo`` baseline (see :class:`MOBOProposer`)."""
    return MOBOProposer(round_size=round_size, candidates=candidates)
