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
ROUNDS_PER_BUDGET = 10
"""A search's budget is spread over at least this many rounds where the round size allows: a 60-evaluation search
refits its model every 6 evaluations, not every 20 (a 300-evaluation one keeps rounds of 20)."""
MIN_ROUND = 4
"""The fewest proposals a round asks for (when the budget leaves that many)."""
START_SHARE = 1 / 3
"""The start (the initial design) pays for at most this share of the budget; the rest is model-guided."""
ROUND_SIZE = 20
"""Proposals per round of every proposer that proposes in rounds (the co-evolution engine, ``mobo``, ``qnehvi``, the
screened EAs): declared once, because the fair-comparison rule wants the engine and its baselines on the same rounds."""
CANDIDATES = 2000
"""Random designs an acquisition is maximised over each round (``mobo``, ``qnehvi``), besides the front's neighbours."""


def round_quota(ctx: RoundContext, round_size: int) -> int:
    """Proposals a round asks for: ``round_size``, fewer for a small budget (:data:`ROUNDS_PER_BUDGET`), never past the budget.

    The co-evolution engine and the model-based baselines (``mobo``, ``qnehvi``) share this schedule,
    so none of them refits its model more often than another at the same budget.
    """
    budget = sum(1 for e in ctx.evaluations if e.query) + ctx.remaining
    return max(0, min(round_size, max(MIN_ROUND, -(-budget // ROUNDS_PER_BUDGET)), ctx.remaining))


def start_quota(ctx: RoundContext, designs: int, floor: int) -> int:
    """Designs the start pays for: ``designs`` (a proposer's own start size), at most :data:`START_SHARE` of the budget,
    at least ``floor`` (one per niche, or the model's minimum), never past the budget."""
    budget = sum(1 for e in ctx.evaluations if e.query) + ctx.remaining
    return max(0, min(designs, max(floor, int(budget * START_SHARE)), ctx.remaining))


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
    paid = [e for e in ctx.evaluations if e.query]
    quota = round_quota(ctx, round_size) if paid else start_quota(ctx, round_size, MIN_PAID)
    if quota <= 0:
        return rng, quota, paid, []
    if len(paid) < MIN_PAID:
        design = stratified_design(ctx.problem, ctx.seen, rng, quota, candidates)
        return rng, quota, paid, [Proposal(p, rationale="initial design, stratified by the cheap objective") for p in design]
    return rng, quota, paid, None
