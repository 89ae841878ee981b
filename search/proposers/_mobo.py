"""``mobo``: multi-objective Bayesian optimisation with the cheap objective known, the fair model-based baseline.

It gets exactly the free information the co-evolution engine gets and the same model, and
none of its structure (no niches, no knowledge base, no guided variation):

* the engine's predictor (:class:`search.informed.InformedPredictor`: the encoding and every
  free feature, e.g. NB201's shipped zero-cost proxies, plus the paid values);
* initial design: with a predictor that ranks before any label (a free prior), the front it
  predicts over the free designs and ``candidates`` random ones, by greedy HV contribution (as
  the engine starts); else ``round_size`` points stratified by the cheap objective (a random
  sample sorted by it and cut into equal bins, one point drawn per bin);
* then, every round: the acquisition (greedy expected HV improvement, the second objective
  known exactly: :func:`search.acquisition.greedy_ehvi`) maximised over ``candidates`` designs:
  every neighbour of the current front, crossovers of front pairs, uniform random designs and
  the problem's free designs.
"""

from __future__ import annotations

import random
from typing import Any

import optuna

from coevo.search.acquisition import greedy_ehvi, greedy_hv
from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.proposers._base import Proposal, Proposer, RoundContext
from coevo.search.proposers._design import CANDIDATES, ROUND_SIZE, front_candidates, require_evolvable, round_start, stratified_design


class MOBOProposer(Proposer):
    """Expected-HV Bayesian optimisation on the engine's predictor that sees the cheap objective of every candidate.

    Args:
        round_size: proposals per round (the engine's default, 20).
        candidates: designs the acquisition is maximised over each round.
    """

    name = "mobo"
    sees_cheap_objectives = True

    def __init__(self, *, round_size: int = ROUND_SIZE, candidates: int = CANDIDATES) -> None:
        if round_size < 1 or candidates < round_size:
            raise UserInputError(f"mobo needs round_size >= 1 and candidates >= round_size, got {round_size} and {candidates}")
        self.round_size = round_size
        self.candidates = candidates

    def options(self) -> dict[str, Any]:
        return {"round_size": self.round_size, "candidates": self.candidates}

    def sampler(self, problem: Problem, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)  # only for a trial with no proposal left

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        from coevo.search.informed import InformedPredictor, free_pool  # the predictor imports the proposers' types

        problem = ctx.problem
        evolvable = require_evolvable(problem, "mobo")
        rng, quota, paid, early = round_start(ctx, self.round_size, self.candidates)
        first = problem.front_objectives[0]
        model = InformedPredictor(evolvable, paid, seed=rng.randrange(2**31))
        free = free_pool(problem)
        if early is not None:
            return self._start(evolvable, ctx, model, free, quota) if early and model.ranks else early
        points = front_candidates(problem, paid, ctx.seen, rng, self.candidates)
        offered = set(points)
        points += [p for p in free if problem.point_id(p) not in ctx.seen and p not in offered]
        return [
            Proposal(points[i], rationale=f"expected HV gain {gain:.3g} (predicted {first} {mean:.4g})")
            for i, (mean, gain) in greedy_ehvi(problem, model, paid, points, quota)
        ]

    def _start(self, problem: Any, ctx: RoundContext, model: Any, free: list[Any], quota: int) -> list[Proposal]:
        """With a predictor that ranks before labels: the front it predicts over the free and random designs (as the engine starts)."""
        rng = random.Random(ctx.seed * 100_003 + ctx.round + 1)
        points = list({p: None for p in free if problem.point_id(p) not in ctx.seen})
        points += [p for p in (problem.random_point(rng) for _ in range(self.candidates)) if problem.point_id(p) not in ctx.seen]
        points = list(dict.fromkeys(points))
        picks = greedy_hv(model.score(points), problem.cheap_values(points)[problem.front_objectives[1]], quota)
        if not picks:
            return [
                Proposal(p, rationale="initial design, stratified by the cheap objective")
                for p in stratified_design(problem, ctx.seen, rng, quota, self.candidates)
            ]
        return [Proposal(points[i], rationale="initial design: the front the predictor gives before any label") for i in picks]
