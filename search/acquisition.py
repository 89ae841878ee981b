"""Greedy expected-hypervolume batch selection with a known cheap objective.

Shared by every proposer that screens candidates with a model before paying for them (the
co-evolution engine's offline reasoner, the ``mobo`` baseline and the screened EAs), so they rank by exactly
the same rule: the first (expensive, maximised) objective is sampled from the model, the
second (cheap, minimised) is known for every candidate; each pick maximises the mean
hypervolume gain over the current front with the earlier picks added at their predicted mean
(the Kriging-believer batch heuristic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from coevo.search.metrics import hv_improvement, pareto_mask
from coevo.search.surrogate import samples_at

if TYPE_CHECKING:  # search.proposers imports this module (the mobo baseline)
    from coevo.search.proposers._base import Evaluation
    from coevo.search.surrogate import SurrogateModel


def greedy_ehvi(
    problem: Any, model: SurrogateModel, paid: Sequence[Evaluation], points: Sequence[Any], quota: int
) -> list[tuple[int, tuple[float, float]]]:
    """Pick up to ``quota`` of ``points`` by greedy expected HV improvement.

    Args:
        problem: an :class:`search.problem.Evolvable` problem (features, cheap values).
        model: a model of the first objective fit on ``paid``.
        paid: the evaluations paid for so far (their front is the baseline).
        points: the candidates.
        quota: how many to pick.

    Returns:
        ``(index into points, (predicted first objective, expected HV gain))`` per pick, in order.
    """
    first, second = problem.front_objectives
    samples = samples_at(problem, model, points)
    y2 = problem.cheap_values(list(points))[second]
    # never problem.reference(): it is built from every point's expensive objective
    bounds = problem.acquisition_bounds()
    floor, ceiling = bounds if bounds else (float(np.min([e.values[first] for e in paid])), float(np.max(y2)))
    f1 = np.array([e.values[first] for e in paid])
    f2 = np.array([e.values[second] for e in paid])
    keep = pareto_mask(f1, f2)
    f1, f2 = f1[keep], f2[keep]
    mean = samples.mean(axis=0)
    available = np.ones(len(points), bool)
    chosen = []
    for _ in range(min(quota, len(points))):
        gain = hv_improvement(f1, f2, floor, ceiling, samples, y2).mean(axis=0)
        score = np.where(available, gain + 1e-9 * mean, -np.inf)  # no gain anywhere: best predicted first objective
        i = int(np.argmax(score))
        chosen.append((i, (float(mean[i]), float(gain[i]))))
        available[i] = False
        f1, f2 = np.append(f1, mean[i]), np.append(f2, y2[i])
    return chosen


def greedy_hv(score: np.ndarray, cheap: np.ndarray, quota: int) -> list[int]:
    """Pick up to ``quota`` indices by greedy hypervolume contribution in (``score`` maximised, ``cheap`` minimised).

    The label-free counterpart of :func:`greedy_ehvi`, for a start with no paid value: the
    score is a ranking on any scale (a zero-cost prior, an earlier study's model), so the
    reference point is the median score of the candidates (half of them can add nothing) and
    the largest cheap value. Candidates with a non-finite score are never picked.
    """
    score, cheap = np.asarray(score, dtype=float), np.asarray(cheap, dtype=float)
    known = np.isfinite(score)
    if not known.any():
        return []
    floor, ceiling = float(np.median(score[known])), float(np.max(cheap))
    f1, f2 = np.zeros(0), np.zeros(0)
    available = known.copy()
    chosen: list[int] = []
    y1 = np.where(known, score, floor)[None, :]
    for _ in range(min(quota, int(known.sum()))):
        gain = hv_improvement(f1, f2, floor, ceiling, y1, cheap)[0]
        pick = int(np.argmax(np.where(available, gain + 1e-12 * y1[0], -np.inf)))
        chosen.append(pick)
        available[pick] = False
        f1, f2 = np.append(f1, score[pick]), np.append(f2, cheap[pick])
    return chosen
