"""The ``stepping`` problem: the MAC split of a SteppingNet (:mod:`search.stepping.problem`)."""
