"""Surrogates of an expensive objective for the co-evolution engine: posterior samples, not just a mean.

Query mode fits :class:`TreeSurrogate` on the values the search has paid for (never on the
benchmark's other points). Each tree of the ensemble is one sample, so a proposer can rank
candidates by expected HV improvement (:func:`search.metrics.hv_improvement`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

TOP_MARGIN = 0.005
"""For an objective with a known upper bound, targets are -log(top - value) with top the bound
plus this share of the objective's range (NB201 accuracy: top = 100.5 %): the transform
stretches the top of the range, where fronts live, and compresses the degenerate points
(~10 % of NB201 cells at chance accuracy) that would otherwise dominate the fit."""


class TopTransform:
    """The target transform of :data:`TOP_MARGIN` for one objective's bounds (identity without an upper bound).

    Shared by every surrogate so they fit the same targets.
    """

    def __init__(self, bounds: tuple[float | None, float | None]) -> None:
        lower, upper = bounds
        self.top: float | None = None
        if upper is not None:
            span = upper - lower if lower is not None else max(abs(upper), 1.0)
            self.top = upper + TOP_MARGIN * span

    def forward(self, y: np.ndarray) -> np.ndarray:
        """Values -> fit targets."""
        if self.top is None:
            return y
        return -np.log(self.top - np.clip(y, None, self.top - 1e-3))

    def inverse(self, raw: np.ndarray) -> np.ndarray:
        """Fit targets (or predictions of them) -> values."""
        return raw if self.top is None else self.top - np.exp(-raw)


class SurrogateModel(Protocol):
    """Predicts samples of one objective for candidate feature rows."""

    def samples(self, features: np.ndarray) -> np.ndarray:
        """(S, K) samples of the objective, in its unit, for K candidates."""
        ...


class TreeSurrogate:
    """Extra-trees ensemble on paid evaluations of one maximised objective.

    Args:
        features: (n, d) encodings of the evaluated points.
        values: (n,) their values of the objective.
        bounds: (lower, upper) bounds of the objective where known (:attr:`search.problem.Objective.bounds`);
            with an upper bound, the fit uses the log-distance to it (:data:`TOP_MARGIN`), else the raw values.
        seed: seed of the ensemble.
        n_trees: ensemble size (= number of samples).
    """

    def __init__(
        self,
        features: np.ndarray,
        values: np.ndarray,
        *,
        bounds: tuple[float | None, float | None] = (None, None),
        seed: int,
        n_trees: int = 64,
    ) -> None:
        # imported here, not at module level: scikit-learn takes ~4 s to import, and every `coevo` command
        # (and every worker process) imports this module whether it fits a surrogate or not
        from sklearn.ensemble import ExtraTreesRegressor

        self._transform = TopTransform(bounds)
        self._model = ExtraTreesRegressor(n_estimators=n_trees, max_features=0.5, random_state=seed, n_jobs=1)
        self._model.fit(features, self._transform.forward(np.asarray(values, dtype=float)))

    def samples(self, features: np.ndarray) -> np.ndarray:
        if len(features) == 0:
            return np.zeros((len(self._model.estimators_), 0))
        # the float32 copy every tree's predict makes of its input (scikit-learn's DTYPE), made once for all trees:
        # the same values, so the same predictions, without 64 validations and copies of a 15,625-row table
        x = np.ascontiguousarray(features, dtype=np.float32)
        raw = np.stack([tree.predict(x, check_input=False) for tree in self._model.estimators_])
        return self._transform.inverse(raw)


@runtime_checkable
class PointSurrogate(Protocol):
    """A model that makes its own features from design points (:class:`search.informed.InformedPredictor`)."""

    def point_samples(self, points: Sequence[Any]) -> np.ndarray:
        """(S, K) samples of the objective for K points."""
        ...


def samples_at(problem: Any, model: SurrogateModel, points: Sequence[Any]) -> np.ndarray:
    """(S, K) samples of the first objective for ``points`` under ``model``, in the features it was fitted on."""
    if isinstance(model, PointSurrogate):
        return model.point_samples(points)
    return model.samples(problem.features(list(points)))
