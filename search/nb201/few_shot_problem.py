"""NB201 in few-shot mode: a few true accuracy queries, a predictor on zero-cost proxies for the rest.

The budget counts accuracy queries, as in query mode, and the proposer chooses them. Every
proposer's model sees the design encoding while searching, as in query mode (proxy scores of
every candidate would cost a network instantiation each). After the budget is spent,
:func:`search.few_shot.predicted_front` trains the predictor on the paid accuracies and
scores the shipped proxy table's cells with it; the reported front is scored on the
benchmark's true accuracy only then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from search.errors import UserInputError
from search.nb201.problem import NB201Options, NB201Problem
from search.nb201.proxies import PRIOR_PROXIES, NB201Proxies
from search.problem import Predictable
from search.zero_cost import ProxyConfig


class FewShotNB201(NB201Problem, Predictable):
    """NB201 with accuracy paid for (the budget) and predicted from zero-cost proxies after the search.

    Args:
        dataset, device: as for :class:`NB201Problem`.
        storage: storage URL where computed proxy scores are cached.
        config: proxy settings.
    """

    found_set = "predicted"

    def __init__(
        self, options: NB201Options | None = None, /, *, storage: str | None = None, config: ProxyConfig | None = None, **values: Any
    ) -> None:
        super().__init__(options, **({"mode": "few-shot", **values} if options is None else values))
        if self.options.mode != "few-shot":
            raise UserInputError(f"FewShotNB201 runs mode='few-shot', got mode={self.options.mode!r}")
        self.proxies = NB201Proxies(storage, config)

    def free_designs(self) -> list[Any] | None:
        """The shipped proxy table's cells (:class:`search.problem.Predictable`)."""
        return list(self.proxies.free_cells()) or None

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "mode": "few-shot", "proxies": {"prior": list(PRIOR_PROXIES), "config": self.proxies.cache.config.key()}}

    def predictor_features(self, points: Sequence[Any]) -> np.ndarray:
        """Proxy features (robust z), op counts, a disconnected flag and the prior, last (:class:`search.problem.Predictable`)."""
        return self.proxies.features(points)

    def prior(self, points: Sequence[Any]) -> np.ndarray:
        return self.proxies.prior(points)
