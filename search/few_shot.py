"""Few-shot mode's last stage: the search goes on over a predictor trained on the queries paid for.

A few-shot search pays for ``budget`` evaluations of the expensive objective like a query
search (the proposer chooses them). Afterwards :func:`predicted_front` fits the problem's
predictor on them (:class:`search.predictor.BoostedSurrogate` on the problem's predictor
features: LightGBM on zero-cost proxies for NB201) and scores more designs with it: every design of the problem's free pool
(:meth:`search.problem.Predictable.free_designs`, e.g. the cells of the shipped proxy table)
when it has one, else ``budget`` designs of an evolutionary search on the predicted objective
with the problem's own operators. The reported set is the Pareto
front of every design seen, under the true values of the paid ones and the predictions of the
others; the caller scores it on the truth (never the search).

When the predictor's out-of-fold rank correlation on the paid designs is below
:data:`TRUST_FLOOR`, its predictions are not reported: the found set is then the paid
designs alone (as in query mode), and the stage says so.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coevo.search.metrics import pareto_mask
from coevo.search.niches import niche_of
from coevo.search.predictor import BoostedSurrogate, out_of_fold_rho
from coevo.search.problem import Evolvable, Predictable, Problem
from coevo.search.proposers import Evaluation

PREDICTED_BUDGET = 3000
"""Designs the predictor scores in the last stage."""
TRUST_FLOOR = 0.3
"""Out-of-fold Spearman rho below which predictions are not reported."""
GENERATION = 400
"""Designs scored per generation of the predicted search."""


@dataclass
class PredictedStage:
    """What the last stage did.

    Attributes:
        reported: the designs reported (paid ones with their true values, predicted ones with
            the predictor's mean; ``query`` tells them apart).
        scored: designs the predictor scored.
        trust: out-of-fold Spearman rho of the predictor on the paid designs (nan below 6).
        note: one line for the run's notes.
        paid_reported: how many reported designs were paid for.
    """

    reported: list[Evaluation]
    scored: int
    trust: float
    note: str
    paid_reported: int = 0


def predicted_front(problem: Problem, paid: Sequence[Evaluation], *, seed: int, budget: int | None = None) -> PredictedStage:
    """Fit the predictor on ``paid``, score more designs with it, and report the front of everything seen.

    ``budget`` (default :data:`PREDICTED_BUDGET`) bounds the designs scored when the problem
    has no free pool and the stage searches.
    """
    budget = PREDICTED_BUDGET if budget is None else budget
    if not isinstance(problem, Evolvable) or not isinstance(problem, Predictable):
        raise TypeError(f"few-shot needs a problem with operators and a label-free prior; {problem.name} has none")
    first, second = problem.front_objectives
    paid = [e for e in paid if e.query]
    if len(paid) < 2:
        return PredictedStage(list(paid), 0, float("nan"), "few-shot: fewer than 2 paid designs, nothing to train a predictor on")
    points = [e.point for e in paid]
    y = np.array([e.values[first] for e in paid])
    features, bounds = problem.predictor_features(points), problem.objectives[0].bounds
    trust = out_of_fold_rho(features, y, bounds=bounds, seed=seed, prior_column=-1)
    if not np.isnan(trust) and trust < TRUST_FLOOR:
        note = (
            f"few-shot: the predictor's out-of-fold rank correlation on the {len(paid)} paid designs is {trust:.2f} "
            f"(< {TRUST_FLOOR}): its predictions are not reported; the found set is the paid designs. Spend more queries."
        )
        return PredictedStage(list(paid), 0, trust, note, paid_reported=len(paid))
    model = BoostedSurrogate(features, y, bounds=bounds, seed=seed, prior_column=-1)
    rng = random.Random(seed)
    seen: dict[str, tuple[Any, float, float, Evaluation | None]] = {
        e.point_id: (e.point, e.values[first], e.values[second], e) for e in paid
    }

    def score(candidates: list[Any]) -> None:
        fresh: dict[str, Any] = {}
        for c in candidates:
            pid = problem.point_id(c)
            if pid not in seen and pid not in fresh:
                fresh[pid] = c
        if not fresh:
            return
        pts = list(fresh.values())
        mean = model.samples(problem.predictor_features(pts)).mean(axis=0)
        cheap = problem.cheap_values(pts)[second]
        for (pid, p), m, c2 in zip(fresh.items(), mean, cheap, strict=True):
            seen[pid] = (p, float(m), float(c2), None)

    niches = problem.niches()
    scored = 0
    start = len(seen)
    pool = problem.free_designs()
    if pool is not None:
        for k in range(0, len(pool), 1000):
            score(pool[k : k + 1000])
        budget = 0  # no search: designs outside the pool would each cost a feature computation
    else:
        score([problem.random_point(rng) for _ in range(min(GENERATION, budget))])
    scored += len(seen) - start
    while scored < budget:
        rows = list(seen.values())
        f1 = np.array([r[1] for r in rows])
        f2 = np.array([r[2] for r in rows])
        parents = [rows[i][0] for i in np.flatnonzero(pareto_mask(f1, f2))]
        by_niche: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            by_niche.setdefault(niche_of(niches, r[0]), []).append(i)
        for members in by_niche.values():  # the best few of every niche keep the search spread out
            parents += [rows[i][0] for i in sorted(members, key=lambda i: -f1[i])[:3]]
        children = [n for p in parents for n in problem.neighbours(p)]
        if len(parents) > 1:
            for _ in range(len(parents) * 4):
                a, b = rng.sample(parents, 2)
                children.append(problem.crossover(a, b, rng))
        children = [c for c in children if problem.point_id(c) not in seen]
        if not children:
            children = [problem.random_point(rng) for _ in range(GENERATION)]
        rng.shuffle(children)
        before = len(seen)
        score(children[: min(GENERATION, budget - scored)])
        if len(seen) == before:
            break  # nothing new reachable: the space is exhausted
        scored += len(seen) - before
    rows = list(seen.values())
    keep = pareto_mask(np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))
    reported = []
    for r, k in zip(rows, keep, strict=True):
        if not k:
            continue
        if r[3] is not None:
            reported.append(r[3])
        else:
            reported.append(Evaluation(-1, r[0], problem.point_id(r[0]), {first: r[1], second: r[2]}, False, {"predicted": True}))
    paid_reported = sum(e.query for e in reported)
    where = "of the free pool" if pool is not None else "found by searching on its predictions"
    note = (
        f"few-shot: a predictor trained on {len(paid)} paid designs (out-of-fold rank correlation {trust:.2f}) "
        f"scored {scored} more, {where}; "
        f"reported front: {len(reported)} designs ({paid_reported} paid, {len(reported) - paid_reported} predicted; "
        "scored on the truth only afterwards)"
    )
    return PredictedStage(reported, scored, trust, note, paid_reported=paid_reported)
