"""The ``freeze`` problem: layer-freezing schedule, cache compression per stage and augmentation share (:mod:`search.freeze.problem`)."""
