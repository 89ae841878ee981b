"""Zero-cost proxies of NB201 cells as predictor features and as a label-free prior.

Shared by zero-cost mode (the prior is the accuracy estimate) and few-shot mode (the prior
and the features feed a predictor trained on the accuracies paid for). Scores come from the
shipped table when it has the cell, else are computed on real PyTorch networks and cached
(:class:`search.zero_cost.ProxyCache`).

Each proxy is put on a common scale by a robust z-score against a fixed reference sample of
random cells (median and inter-quartile range, clipped to +-5): unlike percentiles within a
small sample, it does not tie every cell above the sample's best. The prior is the mean
robust z of :data:`PRIOR_PROXIES`, a choice made on the validation datasets (CIFAR-100 and
ImageNet16-120, docs/bench/nb201/issue15-zero-shot.md), never on CIFAR-10.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from coevo.search.errors import UserInputError
from coevo.search.nb201.problem import NB201Options, NB201Problem
from coevo.search.nb201.proxy_table import (
    FEATURE_PROXIES,
    PRIOR_PROXIES,
    PROXIES,
    REFERENCE_CELLS,
    REFERENCE_SEED,
    ProxyConfig,
    shipped_cells,
)
from coevo.search.nb201.space import EDGES, N_OPS, Cell, is_disconnected, random_cell
from coevo.search.predictor import robust_z, zero_shot
from coevo.search.problem import Predictable
from coevo.search.zero_cost import ProxyCache


class NB201Proxies:
    """Proxy scores, predictor features and the label-free prior of NB201 cells.

    Args:
        storage: storage URL where computed scores are cached.
        config: proxy settings (the shipped table is used when it was made with them).
    """

    def __init__(self, storage: str | None, config: ProxyConfig | None = None) -> None:
        self.cache = ProxyCache(storage, config or ProxyConfig())
        self._reference: np.ndarray | None = None

    def reference_cells(self) -> list[Cell]:
        """The fixed reference sample (free when the shipped table has it)."""
        shipped = shipped_cells(self.cache.config.key())
        if len(shipped) >= REFERENCE_CELLS:
            return shipped[:REFERENCE_CELLS]
        rng = random.Random(REFERENCE_SEED)
        return [random_cell(rng) for _ in range(REFERENCE_CELLS)]

    def raw(self, cells: Sequence[Cell], *, what: str | None = None) -> np.ndarray:
        """(n, len(PROXIES)) scores, in :data:`search.zero_cost.PROXIES` order."""
        scores = self.cache.scores(cells, what=what)
        return np.array([[s[p] for p in PROXIES] for s in scores], dtype=float).reshape(len(scores), len(PROXIES))

    def reference(self) -> np.ndarray:
        """Scores of the reference sample (computed once per storage, then cached)."""
        if self._reference is None:
            what = f"scoring {REFERENCE_CELLS} reference cells for the zero-cost scale (first run only, then cached)"
            self._reference = self.raw(self.reference_cells(), what=what)
        return self._reference

    def prior(self, cells: Sequence[Cell]) -> np.ndarray:
        """Label-free estimate (mean robust z of :data:`PRIOR_PROXIES`; higher is better)."""
        cols = [PROXIES.index(p) for p in PRIOR_PROXIES]
        return zero_shot(self.raw(cells)[:, cols], self.reference()[:, cols])

    def features(self, cells: Sequence[Cell]) -> np.ndarray:
        """Predictor features: robust z of every feature proxy, op counts, a disconnected flag, and the prior last."""
        raw, ref = self.raw(cells), self.reference()
        cols = [PROXIES.index(p) for p in FEATURE_PROXIES]
        prior_cols = [PROXIES.index(p) for p in PRIOR_PROXIES]
        ops = np.asarray(cells, dtype=np.int64).reshape(-1, len(EDGES))
        counts = np.stack([(ops == k).sum(axis=1) for k in range(N_OPS)], axis=1)
        disconnected = np.array([float(is_disconnected(tuple(row))) for row in ops.tolist()]).reshape(-1, 1)
        prior = zero_shot(raw[:, prior_cols], ref[:, prior_cols]).reshape(-1, 1)
        return np.hstack([robust_z(raw[:, cols], ref[:, cols]), counts, disconnected, prior])


class ProxyNB201(NB201Problem, Predictable):
    """NB201 in a mode that reads zero-cost proxies (the base of few-shot and zero-cost modes).

    Args:
        dataset, device: as for :class:`NB201Problem`.
        storage: storage URL where computed proxy scores are cached.
        config: proxy settings (the shipped table is used when it was made with them).
    """

    mode: ClassVar[str]
    """The ``mode`` option value this class runs."""

    def __init__(
        self, options: NB201Options | None = None, /, *, storage: str | None = None, config: ProxyConfig | None = None, **values: Any
    ) -> None:
        super().__init__(options, **({"mode": self.mode, **values} if options is None else values))
        if self.options.mode != self.mode:
            raise UserInputError(f"{type(self).__name__} runs mode={self.mode!r}, got mode={self.options.mode!r}")
        self.proxies = NB201Proxies(storage, config)
        self.proxy_config = self.proxies.cache.config

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "mode": self.mode, "proxies": {"prior": list(PRIOR_PROXIES), "config": self.proxies.cache.config.key()}}

    def predictor_features(self, points: Sequence[Any]) -> np.ndarray:
        """Proxy features (robust z), op counts, a disconnected flag and the prior, last (:class:`search.problem.Predictable`)."""
        return self.proxies.features(points)

    def prior(self, points: Sequence[Any]) -> np.ndarray:
        """Label-free estimates of many cells (scores computed and cached as needed)."""
        return self.proxies.prior(points)
