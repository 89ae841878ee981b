"""NAS-Bench-201 cell space, the shipped NB201 x hardware table, and the NB201 problem."""

from __future__ import annotations

from coevo.search.nb201.problem import PARAM_NAMES, NB201Problem
from coevo.search.nb201.space import (
    EDGES,
    N_CELLS,
    OPS,
    Cell,
    crossover,
    format_arch,
    is_disconnected,
    mutations,
    op_counts,
    parse_arch,
    random_cell,
)
from coevo.search.nb201.table import DATASETS, USEFUL_FLOOR, NB201Table, load_table

__all__ = [
    "DATASETS",
    "EDGES",
    "N_CELLS",
    "OPS",
    "PARAM_NAMES",
    "USEFUL_FLOOR",
    "Cell",
    "NB201Problem",
    "NB201Table",
    "crossover",
    "format_arch",
    "is_disconnected",
    "load_table",
    "mutations",
    "op_counts",
    "parse_arch",
    "random_cell",
]
