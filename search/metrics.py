"""Pareto metrics for two objectives: the first maximised, the second minimised.

A problem's first two objectives (:attr:`search.problem.Problem.front_objectives`; NB201:
accuracy and latency) are the pair. Definitions follow docs/design.md ("Metrics"), there
written for NB201:

* useful region: first >= floor;
* HV ratio: hypervolume of the found set inside the useful region, reference point
  (first = floor, second = the largest value of the second objective over the space),
  divided by the true front's;
* IGD: mean over true-front points in the useful region of the Euclidean distance to the
  nearest found point, both objectives min-max normalised over the whole space;
* front recall: share of true-front points (useful region) that were found exactly.

Everything is exact (no Monte-Carlo): 2-D hypervolume is a sweep over the sorted front.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def pareto_mask(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated points (max first, min second).

    A point is dominated when another is at least as good in both objectives and strictly
    better in one. Exact duplicates do not dominate each other, so both stay on the front.
    """
    y1 = np.asarray(first, dtype=float)
    y2 = np.asarray(second, dtype=float)
    n = len(y1)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    order = np.lexsort((-y1, y2))  # second ascending, ties: first descending
    best = -np.inf  # best first value among strictly lower second values seen so far
    i = 0
    while i < n:
        j = i
        while j < n and y2[order[j]] == y2[order[i]]:
            j += 1
        group = order[i:j]  # same second, first descending
        top = y1[group[0]]
        if top > best:
            # only the group's best first value (and exact ties of it) survive
            mask[group[y1[group] == top]] = True
            best = top
        i = j
    return mask


def hypervolume(first: np.ndarray, second: np.ndarray, floor: float, ceiling: float) -> float:
    """Exact 2-D hypervolume dominated by the points and bounded by the reference point.

    Points with first <= ``floor`` or second >= ``ceiling`` add nothing.
    """
    y1 = np.asarray(first, dtype=float)
    y2 = np.asarray(second, dtype=float)
    keep = (y1 > floor) & (y2 < ceiling)
    if not keep.any():
        return 0.0
    y1, y2 = y1[keep], y2[keep]
    front = pareto_mask(y1, y2)
    y1, y2 = y1[front], y2[front]
    order = np.argsort(y2)
    y1, y2 = y1[order], y2[order]
    # Along the front both objectives rise; each point owns the slab between its second
    # value and the next point's, with height (its first value - floor).
    widths = np.diff(np.append(y2, ceiling))
    return float(np.sum(widths * (y1 - floor)))


def hv_improvement(
    front_first: np.ndarray, front_second: np.ndarray, floor: float, ceiling: float, y1: np.ndarray, y2: np.ndarray
) -> np.ndarray:
    """Exact HV gained by adding each candidate alone to a front, vectorised over samples.

    Args:
        front_first, front_second: the current set (need not be non-dominated).
        floor, ceiling: the reference point.
        y1: (S, K) samples of the first objective (e.g. one row per ensemble member) of K candidates.
        y2: (K,) values of the second objective of the candidates.

    Returns:
        (S, K) improvements; the mean over rows is a Monte-Carlo expected HV improvement.
    """
    order = np.argsort(front_second)
    starts = np.concatenate([[-np.inf], np.asarray(front_second, dtype=float)[order]])
    # attainment level: best first value reached at second <= x, for x in each segment
    levels = np.concatenate([[floor], np.maximum.accumulate(np.maximum(np.asarray(front_first, dtype=float)[order], floor))])
    ends = np.append(starts[1:], ceiling)
    begin = np.maximum(starts[None, :], np.asarray(y2, dtype=float)[:, None])
    width = np.clip(np.minimum(ends[None, :], ceiling) - begin, 0.0, None)  # (K, J)
    gain = np.clip(np.asarray(y1, dtype=float)[:, :, None] - levels[None, None, :], 0.0, None)  # (S, K, J)
    return np.einsum("skj,kj->sk", gain, width)


@dataclass(frozen=True)
class FrontReference:
    """The exact front of a whole space, with the normalisation the metrics need.

    Build it with :meth:`from_space`. ``ids`` are the point ids (e.g. NB201 indices) of the
    true-front points inside the useful region.
    """

    floor: float
    ceiling: float
    first_min: float
    first_max: float
    second_min: float
    second_max: float
    front_first: np.ndarray
    front_second: np.ndarray
    ids: frozenset[str]
    hv: float

    @classmethod
    def from_space(cls, first: np.ndarray, second: np.ndarray, floor: float, ids: Sequence[str] | None = None) -> FrontReference:
        """Compute the true front of every point of a space.

        Args:
            first: maximised objective of every point.
            second: minimised objective of every point.
            floor: floor of the first objective's useful region.
            ids: point id of each row; the row number as a string when None.
        """
        y1 = np.asarray(first, dtype=float)
        y2 = np.asarray(second, dtype=float)
        mask = pareto_mask(y1, y2) & (y1 >= floor)
        ceiling = float(y2.max())
        rows = np.flatnonzero(mask)
        hv = hypervolume(y1[rows], y2[rows], floor, ceiling)
        if hv <= 0:
            raise ValueError(
                f"no point of the space is above the floor {floor} of the first objective and below {ceiling} of the second: "
                "HV ratios are undefined"
            )
        return cls(
            floor=floor,
            ceiling=ceiling,
            first_min=float(y1.min()),
            first_max=float(y1.max()),
            second_min=float(y2.min()),
            second_max=ceiling,
            front_first=y1[rows],
            front_second=y2[rows],
            ids=frozenset(str(r) if ids is None else ids[int(r)] for r in rows),
            hv=hv,
        )

    def hv_ratio(self, first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray) -> float:
        """HV of a found set (useful region) over the true front's HV."""
        y1 = np.asarray(first, dtype=float)
        y2 = np.asarray(second, dtype=float)
        return hypervolume(y1, y2, self.floor, self.ceiling) / self.hv

    def igd(self, first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray) -> float:
        """Mean normalised distance from each useful true-front point to the nearest found point.

        Returns ``inf`` for an empty found set.
        """
        y1 = np.asarray(first, dtype=float)
        y2 = np.asarray(second, dtype=float)
        if len(y1) == 0:
            return float("inf")
        span1 = (self.first_max - self.first_min) or 1.0
        span2 = (self.second_max - self.second_min) or 1.0
        f1 = (self.front_first - self.first_min) / span1
        f2 = (self.front_second - self.second_min) / span2
        q1 = (y1 - self.first_min) / span1
        q2 = (y2 - self.second_min) / span2
        d = np.hypot(f1[:, None] - q1[None, :], f2[:, None] - q2[None, :])
        return float(d.min(axis=1).mean())

    def recall(self, found_ids: Iterable[str]) -> float:
        """Share of the useful true-front points whose id is in ``found_ids``."""
        return len(self.ids.intersection(found_ids)) / len(self.ids)

    def hv_history(self, first: Sequence[float], second: Sequence[float]) -> list[float]:
        """HV ratio after each evaluation, in evaluation order (an incremental front)."""
        history: list[float] = []
        front_1: list[float] = []
        front_2: list[float] = []
        for a, lt in zip(first, second, strict=True):
            if not any(f1 >= a and f2 <= lt for f1, f2 in zip(front_1, front_2, strict=True)):
                keep = [k for k in range(len(front_1)) if not (a >= front_1[k] and lt <= front_2[k])]
                front_1 = [front_1[k] for k in keep] + [a]
                front_2 = [front_2[k] for k in keep] + [lt]
            history.append(hypervolume(np.array(front_1), np.array(front_2), self.floor, self.ceiling) / self.hv)
        return history


@dataclass(frozen=True)
class FrontMetrics:
    """The three scores of one found set against a :class:`FrontReference`."""

    hv_ratio: float
    igd: float
    front_recall: float

    @classmethod
    def score(
        cls, ref: FrontReference, ids: Sequence[str], first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray
    ) -> FrontMetrics:
        """Score a found set given its point ids and true objective values."""
        return cls(hv_ratio=ref.hv_ratio(first, second), igd=ref.igd(first, second), front_recall=ref.recall(ids))


def model_yield(problem: Any, paid: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Per LLM model: its paid proposals, how many lie on the front of all paid evaluations, and that share (its yield)."""
    tagged = [k for k, e in enumerate(paid) if e.attrs.get("model")]
    if not tagged:
        return {}
    first, second = problem.front_objectives
    on_front = pareto_mask(np.array([e.values[first] for e in paid]), np.array([e.values[second] for e in paid]))
    out: dict[str, dict[str, Any]] = {}
    for k in tagged:
        row = out.setdefault(str(paid[k].attrs["model"]), {"paid": 0, "on_front": 0})
        row["paid"] += 1
        row["on_front"] += int(on_front[k])
    for row in out.values():
        row["yield"] = round(row["on_front"] / row["paid"], 4)
    return out
