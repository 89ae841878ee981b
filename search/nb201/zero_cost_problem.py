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

from coevo.search.nb201.problem import NB201Problem
from coevo.search.nb201.proxies import ProxyNB201
from coevo.search.nb201.space import Cell
from coevo.search.predictor import Z_CLIP
from coevo.search.problem import Objective


class ZeroCostNB201(ProxyNB201):
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
    mode = "zero-cost"
    found_set = "front"

    def acquisition_bounds(self) -> tuple[float, float]:
        # the reference sample's median (z = 0) is the floor worth improving on
        return 0.0, float(self._lat.max())

    def evaluate(self, point: Any) -> dict[str, float]:
        return {"accuracy": float(self.proxies.prior([point])[0]), "latency_ms": float(self.cheap_values([point])["latency_ms"][0])}

    def true_values(self, point: Cell) -> dict[str, float]:
        """Benchmark values, used only to score the reported front after the search."""
        return NB201Problem.evaluate(self, point)
