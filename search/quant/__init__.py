"""The ``quant`` problem: bits per layer and class-importance group of a zoo classifier (:mod:`search.quant.problem`)."""
