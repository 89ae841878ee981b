"""NB201 in few-shot mode: a few true accuracy queries, a predictor on zero-cost proxies for the rest.

The budget counts accuracy queries, as in query mode, and the proposer chooses them. Every
proposer's model sees the design encoding while searching, as in query mode (proxy scores of
every candidate would cost a network instantiation each). After the budget is spent,
:func:`search.few_shot.predicted_front` trains the predictor on the paid accuracies and
scores the shipped proxy table's cells with it; the reported front is scored on the
benchmark's true accuracy only then.
"""

from __future__ import annotations

from coevo.search.nb201.proxies import ProxyNB201


class FewShotNB201(ProxyNB201):
    """NB201 with accuracy paid for (the budget) and predicted from zero-cost proxies after the search.

    Args:
        dataset, device: as for :class:`NB201Problem`.
        storage: storage URL where computed proxy scores are cached.
        config: proxy settings.
    """

    mode = "few-shot"
    found_set = "predicted"
