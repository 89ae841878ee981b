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
    samples = model.samples(problem.features(list(points)))
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
