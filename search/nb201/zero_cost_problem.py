"""NB201 in zero-cost mode: no accuracy query during the search.

Accuracy is estimated by the zero-cost ensemble (mean percentile of the ensemble proxies
within a fixed reference sample of random cells), computed on real PyTorch instantiations
and cached in the study's database. The budget counts cells scored by the proxies. The found
set is the final reported front (non-dominated under estimated accuracy and latency), scored
afterwards with the benchmark's true accuracy: the search never sees it.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from search.errors import UserInputError
from search.nb201.problem import NB201Options, NB201Problem
from search.nb201.space import Cell, random_cell
from search.problem import Objective
from search.zero_cost import ENSEMBLE, ProxyCache, ProxyConfig, ensemble

REFERENCE_CELLS = 64
"""Random cells whose proxy scores define the percentile scale."""


class ZeroCostNB201(NB201Problem):
    """NB201 with the accuracy objective replaced by the zero-cost ensemble estimate.

    Args:
        dataset, device: as for :class:`NB201Problem` (the dataset only matters for scoring).
        storage: storage URL where proxy scores are cached.
        config: proxy settings.
    """

    objectives = (
        # the estimate is the same whatever the dataset: the proxies see one fixed batch
        Objective("accuracy", "maximize", "ensemble percentile", "expensive", depends_on=(), bounds=(0.0, 100.0)),
        Objective("latency_ms", "minimize", "ms", "cheap", depends_on=("device",), bounds=(0.0, None)),
    )
    found_set = "front"

    def __init__(
        self, options: NB201Options | None = None, /, *, storage: str | None = None, config: ProxyConfig | None = None, **values: Any
    ) -> None:
        super().__init__(options, **({"mode": "zero-cost", **values} if options is None else values))
        if self.options.mode != "zero-cost":
            raise UserInputError(f"ZeroCostNB201 runs mode='zero-cost', got mode={self.options.mode!r}")
        self.cache = ProxyCache(storage, config or ProxyConfig())
        self._reference_scores: list[dict[str, float]] | None = None

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "mode": "zero-cost", "proxies": {"ensemble": list(ENSEMBLE), "config": self.cache.config.key()}}

    def acquisition_bounds(self) -> tuple[float, float]:
        # estimates are percentiles: the median cell is the floor worth improving on
        return 50.0, float(self._lat.max())

    @staticmethod
    def reference_cells() -> list[Cell]:
        """The fixed reference sample whose scores define the percentile scale."""
        rng = random.Random(12345)
        return [random_cell(rng) for _ in range(REFERENCE_CELLS)]

    def reference_scores(self) -> list[dict[str, float]]:
        """Proxy scores of the fixed reference sample (computed once, then cached)."""
        if self._reference_scores is None:
            what = f"scoring {REFERENCE_CELLS} reference cells for the zero-cost estimate (first run only, then cached)"
            self._reference_scores = self.cache.scores(self.reference_cells(), what=what)
        return self._reference_scores

    def evaluate(self, point: Any) -> dict[str, float]:
        estimate = float(ensemble(self.cache.scores([point]), self.reference_scores())[0])
        return {"accuracy": estimate, "latency_ms": float(self.cheap_values([point])["latency_ms"][0])}

    def true_values(self, point: Cell) -> dict[str, float]:
        """Benchmark values, used only to score the reported front after the search."""
        return NB201Problem.evaluate(self, point)

    def estimate_many(self, points: list[Cell]) -> np.ndarray:
        """Ensemble estimates of many cells (scores computed and cached as needed)."""
        return ensemble(self.cache.scores(points), self.reference_scores())
