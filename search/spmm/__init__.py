"""The ``spmm`` problem: autotuning the degree-block SpMM kernel on measured time."""

from coevo.search.spmm.problem import SpmmDesign, SpmmProblem

__all__ = ["SpmmDesign", "SpmmProblem"]
