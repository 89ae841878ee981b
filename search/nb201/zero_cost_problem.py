"""NB201 in zero-cost mode: no accuracy query during the search.

Accuracy is estimated by the label-free prior of :class:`search.nb201.proxies.NB201Proxies`
(mean robust z-score of a fixed proxy set against a fixed reference sample of random cells),
computed on real PyTorch instantiations (or read from the shipped table) and cached in the
study's database. The budget counts cells scored by the proxies. The found set is the final
reported front (non-dominated under estimated accuracy and latency), scored afterwards with
the benchmark's true accuracy: the search never sees it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from search.errors import UserInputError
from search.nb201.problem import NB201Options, NB201Problem
from search.nb201.proxies import PRIOR_PROXIES, NB201Proxies
from search.nb201.space import Cell
from search.predictor import Z_CLIP
from search.problem import Objective, Predictable
from search.zero_cost import ProxyConfig


class ZeroCostNB201(NB201Problem, Predictable):
    """NB201 with the accuracy objective replaced by the zero-cost prior.

    Args:
        dataset, device: as for :class:`NB201Problem` (the dataset only matters for scoring).
        storage: storage URL where proxy scores are cached.
        config: proxy settings.
    """

    objectives = (
        # the estimate is the same whatever the dataset: the proxies see one fixed batch
        Objective("accuracy", "maximize", "zero-shot score (mean robust z)", "expensive", depends_on=(), bounds=(-Z_CLIP, Z_CLIP)),
        Objective("latency_ms", "minimize", "ms", "cheap", depends_on=("device",), bounds=(0.0, None)),
    )
    found_set = "front"

    def __init__(
        self, options: NB201Options | None = None, /, *, storage: str | None = None, config: ProxyConfig | None = None, **values: Any
    ) -> None:
        super().__init__(options, **({"mode": "zero-cost", **values} if options is None else values))
        if self.options.mode != "zero-cost":
            raise UserInputError(f"ZeroCostNB201 runs mode='zero-cost', got mode={self.options.mode!r}")
        self.proxies = NB201Proxies(storage, config)

    def free_designs(self) -> list[Any] | None:
        """The shipped proxy table's cells (:class:`search.problem.Predictable`)."""
        return list(self.proxies.free_cells()) or None

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "mode": "zero-cost", "proxies": {"prior": list(PRIOR_PROXIES), "config": self.proxies.cache.config.key()}}

    def acquisition_bounds(self) -> tuple[float, float]:
        # the reference sample's median (z = 0) is the floor worth improving on
        return 0.0, float(self._lat.max())

    def evaluate(self, point: Any) -> dict[str, float]:
        return {"accuracy": float(self.proxies.prior([point])[0]), "latency_ms": float(self.cheap_values([point])["latency_ms"][0])}

    def true_values(self, point: Cell) -> dict[str, float]:
        """Benchmark values, used only to score the reported front after the search."""
        return NB201Problem.evaluate(self, point)

    def predictor_features(self, points: Any) -> np.ndarray:
        """Proxy features with the prior last (:class:`search.problem.Predictable`)."""
        return self.proxies.features(points)

    def prior(self, points: Any) -> np.ndarray:
        """Zero-shot estimates of many cells (the objective itself here; scores computed and cached as needed)."""
        return self.proxies.prior(points)
