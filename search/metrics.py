"""Pareto metrics for two objectives: accuracy (maximised) and latency (minimised).

Definitions follow DESIGN.md ("Measures"):

* useful region: accuracy >= floor;
* HV ratio: hypervolume of the found set inside the useful region, reference point
  (accuracy = floor, latency = max latency over the space), divided by the true front's;
* IGD: mean over true-front points in the useful region of the Euclidean distance to the
  nearest found point, both objectives min-max normalised over the whole space;
* front recall: share of true-front cells (useful region) that were found exactly.

Everything is exact (no Monte-Carlo): 2-D hypervolume is a sweep over the sorted front.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def pareto_mask(accuracy: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated points (max accuracy, min latency).

    A point is dominated when another is at least as good in both objectives and strictly
    better in one. Exact duplicates do not dominate each other, so both stay on the front.
    """
    acc = np.asarray(accuracy, dtype=float)
    lat = np.asarray(latency, dtype=float)
    n = len(acc)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    order = np.lexsort((-acc, lat))  # latency ascending, ties: accuracy descending
    best = -np.inf  # best accuracy among strictly-lower latencies seen so far
    i = 0
    while i < n:
        j = i
        while j < n and lat[order[j]] == lat[order[i]]:
            j += 1
        group = order[i:j]  # same latency, accuracy descending
        top = acc[group[0]]
        if top > best:
            # only the group's best accuracy (and exact ties of it) survive
            mask[group[acc[group] == top]] = True
            best = top
        i = j
    return mask


def hypervolume(accuracy: np.ndarray, latency: np.ndarray, acc_ref: float, lat_ref: float) -> float:
    """Exact 2-D hypervolume dominated by the points and bounded by the reference point.

    Points with accuracy <= ``acc_ref`` or latency >= ``lat_ref`` add nothing.
    """
    acc = np.asarray(accuracy, dtype=float)
    lat = np.asarray(latency, dtype=float)
    keep = (acc > acc_ref) & (lat < lat_ref)
    if not keep.any():
        return 0.0
    acc, lat = acc[keep], lat[keep]
    front = pareto_mask(acc, lat)
    acc, lat = acc[front], lat[front]
    order = np.argsort(lat)
    acc, lat = acc[order], lat[order]
    # Along the front latency rises and accuracy rises; each point owns the slab between
    # its latency and the next point's, with height (its accuracy - acc_ref).
    widths = np.diff(np.append(lat, lat_ref))
    return float(np.sum(widths * (acc - acc_ref)))


def hv_improvement(
    front_acc: np.ndarray, front_lat: np.ndarray, acc_ref: float, lat_ref: float, acc: np.ndarray, lat: np.ndarray
) -> np.ndarray:
    """Exact HV gained by adding each candidate alone to a front, vectorised over samples.

    Args:
        front_acc, front_lat: the current set (need not be non-dominated).
        acc_ref, lat_ref: the reference point.
        acc: (S, K) accuracy samples (e.g. one row per ensemble member) of K candidates.
        lat: (K,) latencies of the candidates.

    Returns:
        (S, K) improvements; the mean over rows is a Monte-Carlo expected HV improvement.
    """
    order = np.argsort(front_lat)
    starts = np.concatenate([[-np.inf], np.asarray(front_lat, dtype=float)[order]])
    # attainment level: best accuracy reached at latency <= x, for x in each segment
    levels = np.concatenate([[acc_ref], np.maximum.accumulate(np.maximum(np.asarray(front_acc, dtype=float)[order], acc_ref))])
    ends = np.append(starts[1:], lat_ref)
    begin = np.maximum(starts[None, :], np.asarray(lat, dtype=float)[:, None])
    width = np.clip(np.minimum(ends[None, :], lat_ref) - begin, 0.0, None)  # (K, J)
    gain = np.clip(np.asarray(acc, dtype=float)[:, :, None] - levels[None, None, :], 0.0, None)  # (S, K, J)
    return np.einsum("skj,kj->sk", gain, width)


@dataclass(frozen=True)
class FrontReference:
    """The exact front of a whole space, with the normalisation the metrics need.

    Build it with :meth:`from_space`. ``ids`` are the point ids (e.g. NB201 indices) of the
    true-front points inside the useful region.
    """

    floor: float
    lat_ref: float
    acc_min: float
    acc_max: float
    lat_min: float
    lat_max: float
    front_acc: np.ndarray
    front_lat: np.ndarray
    ids: frozenset[str]
    hv: float

    @classmethod
    def from_space(cls, accuracy: np.ndarray, latency: np.ndarray, floor: float, ids: Sequence[str] | None = None) -> FrontReference:
        """Compute the true front of every point of a space.

        Args:
            accuracy: maximised objective of every point.
            latency: minimised objective of every point.
            floor: accuracy floor of the useful region.
            ids: point id of each row; the row number as a string when None.
        """
        acc = np.asarray(accuracy, dtype=float)
        lat = np.asarray(latency, dtype=float)
        mask = pareto_mask(acc, lat) & (acc >= floor)
        lat_ref = float(lat.max())
        rows = np.flatnonzero(mask)
        hv = hypervolume(acc[rows], lat[rows], floor, lat_ref)
        if hv <= 0:
            raise ValueError(
                f"no point of the space is above the accuracy floor {floor} at a latency below {lat_ref}: HV ratios are undefined"
            )
        return cls(
            floor=floor,
            lat_ref=lat_ref,
            acc_min=float(acc.min()),
            acc_max=float(acc.max()),
            lat_min=float(lat.min()),
            lat_max=lat_ref,
            front_acc=acc[rows],
            front_lat=lat[rows],
            ids=frozenset(str(r) if ids is None else ids[int(r)] for r in rows),
            hv=hv,
        )

    def hv_ratio(self, accuracy: Sequence[float] | np.ndarray, latency: Sequence[float] | np.ndarray) -> float:
        """HV of a found set (useful region) over the true front's HV."""
        acc = np.asarray(accuracy, dtype=float)
        lat = np.asarray(latency, dtype=float)
        return hypervolume(acc, lat, self.floor, self.lat_ref) / self.hv

    def igd(self, accuracy: Sequence[float] | np.ndarray, latency: Sequence[float] | np.ndarray) -> float:
        """Mean normalised distance from each useful true-front point to the nearest found point.

        Returns ``inf`` for an empty found set.
        """
        acc = np.asarray(accuracy, dtype=float)
        lat = np.asarray(latency, dtype=float)
        if len(acc) == 0:
            return float("inf")
        a_span = (self.acc_max - self.acc_min) or 1.0
        l_span = (self.lat_max - self.lat_min) or 1.0
        fa = (self.front_acc - self.acc_min) / a_span
        fl = (self.front_lat - self.lat_min) / l_span
        qa = (acc - self.acc_min) / a_span
        ql = (lat - self.lat_min) / l_span
        d = np.hypot(fa[:, None] - qa[None, :], fl[:, None] - ql[None, :])
        return float(d.min(axis=1).mean())

    def recall(self, found_ids: Iterable[str]) -> float:
        """Share of the useful true-front points whose id is in ``found_ids``."""
        return len(self.ids.intersection(found_ids)) / len(self.ids)

    def hv_history(self, accuracy: Sequence[float], latency: Sequence[float]) -> list[float]:
        """HV ratio after each evaluation, in evaluation order (an incremental front)."""
        history: list[float] = []
        front_a: list[float] = []
        front_l: list[float] = []
        for a, lt in zip(accuracy, latency, strict=True):
            if not any(fa >= a and fl <= lt for fa, fl in zip(front_a, front_l, strict=True)):
                keep = [k for k in range(len(front_a)) if not (a >= front_a[k] and lt <= front_l[k])]
                front_a = [front_a[k] for k in keep] + [a]
                front_l = [front_l[k] for k in keep] + [lt]
            history.append(hypervolume(np.array(front_a), np.array(front_l), self.floor, self.lat_ref) / self.hv)
        return history


@dataclass(frozen=True)
class FrontMetrics:
    """The three scores of one found set against a :class:`FrontReference`."""

    hv_ratio: float
    igd: float
    front_recall: float

    @classmethod
    def score(
        cls, ref: FrontReference, ids: Sequence[str], accuracy: Sequence[float] | np.ndarray, latency: Sequence[float] | np.ndarray
    ) -> FrontMetrics:
        """Score a found set given its point ids and true objective values."""
        return cls(hv_ratio=ref.hv_ratio(accuracy, latency), igd=ref.igd(accuracy, latency), front_recall=ref.recall(ids))
