"""The SpMM kernel family's configuration: the defaults and bounds its tool and problem share, declared once.

``tools/kernels.py`` (``kernel.spmm``) and ``search/spmm/problem.py`` (the ``spmm`` problem) read
their defaults and bounds from :class:`SpmmConfig`; the degree-block method's own parameters
keep their defaults in :class:`~coevo.sim.graph.spmm.BlockParams`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WIDTH_ALL = 4096
"""The largest feature width the tools allow: as ``width`` it means one work unit per block (no column split).

Here, not in :mod:`sim.graph.spmm` (which re-exports it), so reading it imports no numba."""


@dataclass(frozen=True)
class SpmmConfig:
    """Defaults and bounds of the SpMM family (each field's ``metadata``: ``help``, ``unit``, bounds).

    ``graph`` is one tool call's matrix; ``search_graph`` the larger one a tuning search times
    every design on (the figures tune on rmat-1m).
    """

    graph: str = field(default="rmat-100k", metadata={"help": "a named graph or the path of a CSR .npz file"})
    search_graph: str = field(
        default="rmat-1m", metadata={"help": "named graph (rmat-100k, rmat-1m, ba-1m, ...; seed suffix @N) or a CSR .npz path"}
    )
    feature_dim: int = field(default=64, metadata={"help": "columns F of the dense X in Y = A X", "unit": "columns", "ge": 1, "le": 4096})
    repeats: int = field(
        default=5, metadata={"help": "timed runs after one warm-up (the median is kept)", "unit": "runs", "ge": 1, "le": 100}
    )
    dtype: str = field(default="float32", metadata={"help": "value type of A and X"})


__all__ = ["SpmmConfig"]
