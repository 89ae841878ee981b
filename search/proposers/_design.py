"""Candidate designs shared by the proposers that see the cheap objective (``mobo``, ``qnehvi``, the screened EAs).

One helper per step, so these baselines start and search from exactly the same designs:

* :func:`stratified_design`: the initial design, ``quota`` points spread over the cheap
  objective (a random sample of candidates sorted by it and cut into equal bins, one point
  drawn per bin), as the co-evolution engine's per-niche initialisation also spreads over it;
* :func:`front_candidates`: the designs an acquisition is maximised over each round: every
  neighbour of the paid front, crossovers of front pairs, and uniform random designs.

Both take the caller's ``random.Random`` and draw from it in a fixed order, so a proposer
that uses them is deterministic per seed.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from coevo.search.errors import UserInputError
from coevo.search.metrics import pareto_mask
from coevo.search.problem import Evolvable, Point, Problem
from coevo.search.proposers._base import Evaluation, Proposal, RoundContext

MIN_PAID = 8
"""Paid evaluations before a model is trusted (the co-evolution engine's threshold too)."""


def require_evolvable(problem: Problem, proposer: str) -> Evolvable:
    """``problem`` as an :class:`Evolvable` (features, operators, cheap objectives).

    Raises:
        UserInputError: the problem is not one, with what the proposer needs.
    """
    if not isinstance(problem, Evolvable):
        raise UserInputError(f"{proposer} needs a problem with features and cheap objectives (Evolvable); {problem.name} has none")
    return problem


class _Pool:
    """Unseen, distinct candidates in the order they were offered."""

    def __init__(self, problem: Problem, seen: Collection[str]) -> None:
        self.problem = problem
        self.seen = seen
        self.points: dict[str, Any] = {}

    def offer(self, point: Any) -> None:
        pid = self.problem.point_id(point)
        if pid not in self.seen and pid not in self.points:
            self.points[pid] = point

    def fill_random(self, rng: random.Random, size: int) -> None:
        """Add uniform random designs until ``size`` candidates (at most ``3 * size`` draws: small spaces run out)."""
        evolvable = require_evolvable(self.problem, "this proposer")
        for _ in range(size * 3):
            if len(self.points) >= size:
                break
            self.offer(evolvable.random_point(rng))


def stratified_design(problem: Problem, seen: Collection[str], rng: random.Random, quota: int, candidates: int) -> list[Point]:
    """``quota`` unseen designs spread over the cheap (second front) objective.

    Args:
        problem: an :class:`Evolvable` problem.
        seen: point ids already evaluated (never proposed again).
        rng: the caller's random stream.
        quota: designs wanted (fewer when the space has fewer unseen designs).
        candidates: size of the random sample the bins are cut from.
    """
    evolvable = require_evolvable(problem, "this proposer")
    pool = _Pool(problem, seen)
    pool.fill_random(rng, candidates)
    points = list(pool.points.values())
    if not points or quota <= 0:
        return []
    order = np.argsort(evolvable.cheap_values(points)[problem.front_objectives[1]], kind="stable")
    bins = np.array_split(order, min(quota, len(points)))
    return [points[int(rng.choice(list(b)))] for b in bins]


def front_candidates(
    problem: Problem, paid: Sequence[Evaluation], seen: Collection[str], rng: random.Random, candidates: int
) -> list[Point]:
    """Unseen designs near the paid front, then random ones: what an acquisition is maximised over.

    Every neighbour of the paid front's designs, up to 200 crossovers of front pairs, then
    uniform random designs until ``candidates`` (the neighbours and crossovers are all kept,
    so there may be more).
    """
    evolvable = require_evolvable(problem, "this proposer")
    first, second = problem.front_objectives
    y1 = np.array([e.values[first] for e in paid])
    y2 = np.array([e.values[second] for e in paid])
    front = [paid[int(i)].point for i in np.flatnonzero(pareto_mask(y1, y2))]
    pool = _Pool(problem, seen)
    for p in front:
        for n in evolvable.neighbours(p):
            pool.offer(n)
    for _ in range(min(200, len(front) * (len(front) - 1))):
        a, b = rng.sample(front, 2)
        pool.offer(evolvable.crossover(a, b, rng))
    pool.fill_random(rng, candidates)
    return list(pool.points.values())


def round_start(ctx: RoundContext, round_size: int, candidates: int) -> tuple[random.Random, int, list[Evaluation], list[Proposal] | None]:
    """What every model-based baseline does first in a round: its RNG, quota and paid evaluations.

    The fourth item is the round's whole answer when the model cannot be fitted yet: an empty
    list when nothing is left to pay for, the initial design stratified by the cheap objective
    while fewer than ``MIN_PAID`` evaluations are paid; ``None`` when the model should propose.
    """
    rng = random.Random(ctx.seed * 100_003 + ctx.round)
    quota = min(round_size, ctx.remaining)
    paid = [e for e in ctx.evaluations if e.query]
    if quota <= 0:
        return rng, quota, paid, []
    if len(paid) < MIN_PAID:
        design = stratified_design(ctx.problem, ctx.seen, rng, quota, candidates)
        return rng, quota, paid, [Proposal(p, rationale="initial design, stratified by the cheap objective") for p in design]
    return rng, quota, paid, None
