"""Accuracy models for the co-evolution engine: posterior samples, not just a mean.

Query mode fits :class:`TreeSurrogate` on the accuracies the search has paid for (never on
the benchmark's other cells). Each tree of the ensemble is one sample, so a proposer can
rank candidates by expected HV improvement (:func:`search.metrics.hv_improvement`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from sklearn.ensemble import ExtraTreesRegressor

_TOP = 100.5
"""Targets are -log(_TOP - accuracy): this stretches the top of the range, where fronts
live, and compresses the ~10 % degenerate cells that would otherwise dominate the fit."""


class AccuracyModel(Protocol):
    """Predicts accuracy samples for candidate feature rows."""

    def samples(self, features: np.ndarray) -> np.ndarray:
        """(S, K) accuracy samples (%) for K candidates."""
        ...


class TreeSurrogate:
    """Extra-trees ensemble on paid evaluations.

    Args:
        features: (n, d) encodings of the evaluated points.
        accuracy: (n,) their accuracies (%).
        seed: seed of the ensemble.
        n_trees: ensemble size (= number of samples).
    """

    def __init__(self, features: np.ndarray, accuracy: np.ndarray, *, seed: int, n_trees: int = 64) -> None:
        target = -np.log(_TOP - np.clip(accuracy, None, _TOP - 1e-3))
        self._model = ExtraTreesRegressor(n_estimators=n_trees, max_features=0.5, random_state=seed, n_jobs=1)
        self._model.fit(features, target)

    def samples(self, features: np.ndarray) -> np.ndarray:
        if len(features) == 0:
            return np.zeros((len(self._model.estimators_), 0))
        logs = np.stack([tree.predict(features) for tree in self._model.estimators_])
        return _TOP - np.exp(-logs)
